"""Node agent settings (environment variables beside shared.env's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.env import StackError
from shared.lifecycle.node_lifecycle import DEFAULT_GRACE_SECONDS, DEFAULT_HEARTBEAT_SECONDS
from shared.lifecycle.pressure import PressureConfig, PressureConfigError

ENV_GRACE = "BERTH_NODE_MONITOR_GRACE_PERIOD"
ENV_HEARTBEAT = "BERTH_NODE_HEARTBEAT_SECONDS"
ENV_TICK = "BERTH_AGENT_TICK_SECONDS"
ENV_SEED = "BERTH_AGENT_SEED"
ENV_KUBELET_CONFIG = "BERTH_KUBELET_CONFIG"


@dataclass(frozen=True, slots=True)
class AgentConfig:
    cluster: str = "default"
    key_prefix: str = "berth:"
    name: str = "agent"
    node_monitor_grace_period: float = DEFAULT_GRACE_SECONDS
    """Seconds without a heartbeat before a node's Ready turns Unknown (upstream
    --node-monitor-grace-period)."""
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    """How often each node's heartbeat is renewed (and agent membership refreshed)."""
    tick_seconds: float = 0.2
    """How often due stages, evictions and node conditions are looked at."""
    seed: int | None = None
    """Seed of the jitter draws (KWOK jitter-delay); None: random."""
    pressure: PressureConfig | None = None
    """Node-pressure eviction thresholds (a KubeletConfiguration file, $BERTH_KUBELET_CONFIG);
    None: no node-pressure eviction (the default: declared usage is opt-in)."""

    @property
    def member_ttl(self) -> float:
        """An agent not heard from for this long no longer owns nodes."""
        return 3 * self.heartbeat_seconds

    @classmethod
    def from_env(cls, env: Mapping[str, str], **base: object) -> AgentConfig:
        values: dict[str, object] = dict(base)
        for var, attr in (
            (ENV_GRACE, "node_monitor_grace_period"),
            (ENV_HEARTBEAT, "heartbeat_seconds"),
            (ENV_TICK, "tick_seconds"),
        ):
            raw = env.get(var)
            if raw:
                values[attr] = _seconds(var, raw)
        if env.get(ENV_SEED):
            try:
                values["seed"] = int(env[ENV_SEED])
            except ValueError:
                raise StackError(f"${ENV_SEED}: {env[ENV_SEED]!r} is not an integer") from None
        if env.get(ENV_KUBELET_CONFIG):
            values["pressure"] = load_pressure(env[ENV_KUBELET_CONFIG])
        config = cls(**values)  # type: ignore[arg-type]
        if config.heartbeat_seconds >= config.node_monitor_grace_period:
            raise StackError(
                f"${ENV_HEARTBEAT} ({config.heartbeat_seconds:g}s) must be below "
                f"${ENV_GRACE} ({config.node_monitor_grace_period:g}s)"
            )
        return config


def _seconds(var: str, raw: str) -> float:
    from shared.lifecycle.kwok import parse_duration

    try:
        value = float(raw)
    except ValueError:
        try:
            value = parse_duration(raw)
        except ValueError:
            raise StackError(f"${var}: {raw!r} is neither seconds nor a duration (40s)") from None
    if value <= 0:
        raise StackError(f"${var}: {raw!r} must be positive")
    return value


def load_pressure(path: str) -> PressureConfig:
    """A KubeletConfiguration (YAML) file's eviction settings; StackError naming the file."""
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            doc = yaml.safe_load(handle) or {}
    except OSError as exc:
        raise StackError(f"${ENV_KUBELET_CONFIG}: {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise StackError(f"${ENV_KUBELET_CONFIG}: {path}: not YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise StackError(f"${ENV_KUBELET_CONFIG}: {path}: expected a KubeletConfiguration map")
    try:
        return PressureConfig.from_kubelet_config(doc)
    except PressureConfigError as exc:
        raise StackError(f"${ENV_KUBELET_CONFIG}: {path}: {exc}") from None
