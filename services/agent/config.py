"""Node agent settings: its variables beside shared.runtime.env's (shared.runtime.settings reads
them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from msgspec import Meta

from shared.lifecycle.node_lifecycle import DEFAULT_GRACE_SECONDS, DEFAULT_HEARTBEAT_SECONDS
from shared.lifecycle.pressure import PressureConfig, PressureConfigError
from shared.runtime.env import StackError
from shared.runtime.settings import SettingsError, read, setting

ENV_GRACE = "BERTH_NODE_MONITOR_GRACE_PERIOD"
ENV_HEARTBEAT = "BERTH_NODE_HEARTBEAT_SECONDS"
ENV_TICK = "BERTH_AGENT_TICK_SECONDS"
ENV_SEED = "BERTH_AGENT_SEED"
ENV_KUBELET_CONFIG = "BERTH_KUBELET_CONFIG"


def _seconds(raw: str) -> float:
    """Seconds, or a duration (`40s`, `1m`)."""
    from shared.lifecycle.kwok import parse_duration

    try:
        value = float(raw)
    except ValueError:
        try:
            value = parse_duration(raw)
        except ValueError:
            raise ValueError("neither seconds nor a duration (40s)") from None
    return value


def _pressure(path: str) -> PressureConfig:
    try:
        return load_pressure(path)
    except StackError as exc:
        raise ValueError(str(exc).removeprefix(f"${ENV_KUBELET_CONFIG}: {path}: ")) from None


Seconds = Annotated[float, Meta(gt=0)]


@dataclass(frozen=True, slots=True)
class AgentConfig:
    cluster: str = "default"
    key_prefix: str = "berth:"
    name: str = "agent"
    node_monitor_grace_period: Annotated[
        Seconds,
        setting(
            ENV_GRACE,
            "seconds (or a duration) without a heartbeat before a node's Ready turns Unknown "
            "(upstream --node-monitor-grace-period)",
            parse=_seconds,
            kind="seconds",
        ),
    ] = DEFAULT_GRACE_SECONDS
    heartbeat_seconds: Annotated[
        Seconds,
        setting(
            ENV_HEARTBEAT,
            "how often each node's heartbeat is renewed (and agent membership refreshed)",
            parse=_seconds,
            kind="seconds",
        ),
    ] = DEFAULT_HEARTBEAT_SECONDS
    tick_seconds: Annotated[
        Seconds,
        setting(
            ENV_TICK,
            "how often evictions and node conditions are looked at (pod stages fire when due)",
            parse=_seconds,
            kind="seconds",
        ),
    ] = 0.2
    seed: Annotated[
        int | None, setting(ENV_SEED, "seed of the jitter draws (KWOK jitter-delay); unset: random")
    ] = None
    pressure: Annotated[
        PressureConfig | None,
        setting(
            ENV_KUBELET_CONFIG,
            "a KubeletConfiguration file: its node-pressure eviction thresholds "
            "(unset: no node-pressure eviction)",
            parse=_pressure,
            kind="path",
        ),
    ] = None
    """Node-pressure eviction thresholds (a KubeletConfiguration file, $BERTH_KUBELET_CONFIG);
    None: no node-pressure eviction (the default: declared usage is opt-in)."""

    @property
    def member_ttl(self) -> float:
        """An agent not heard from for this long no longer owns nodes."""
        return 3 * self.heartbeat_seconds

    @classmethod
    def from_env(cls, env: Mapping[str, str], **base: object) -> AgentConfig:
        """The settings in `env` over `base` (the stack's cluster, prefix and name);
        SettingsError naming the setting and its value when one is refused."""
        config = read(cls, env, given=base)
        if config.heartbeat_seconds >= config.node_monitor_grace_period:
            raise SettingsError(
                f"{ENV_HEARTBEAT}={env.get(ENV_HEARTBEAT) or config.heartbeat_seconds!r}: "
                "must be below "
                f"{ENV_GRACE} ({config.node_monitor_grace_period:g}s)"
            )
        return config


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
