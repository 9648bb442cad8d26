"""The agent's settings from the environment: durations, the KubeletConfiguration file, and
one precise line for each bad value."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.agent.config import (
    ENV_GRACE,
    ENV_HEARTBEAT,
    ENV_KUBELET_CONFIG,
    ENV_SEED,
    ENV_TICK,
    AgentConfig,
)
from shared.runtime.env import StackError


def test_defaults_and_durations() -> None:
    assert AgentConfig.from_env({}).node_monitor_grace_period == 40.0
    config = AgentConfig.from_env({ENV_GRACE: "1m", ENV_HEARTBEAT: "2.5", ENV_SEED: "3"})
    assert (config.node_monitor_grace_period, config.heartbeat_seconds, config.seed) == (
        60.0,
        2.5,
        3,
    )
    assert config.pressure is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {ENV_GRACE: "soon"},
            "BERTH_NODE_MONITOR_GRACE_PERIOD='soon': neither seconds nor a duration (40s)",
        ),
        ({ENV_GRACE: "0"}, "BERTH_NODE_MONITOR_GRACE_PERIOD='0': expected `float` > 0.0"),
        (
            {ENV_GRACE: "5", ENV_HEARTBEAT: "10"},
            "BERTH_NODE_HEARTBEAT_SECONDS='10': must be below BERTH_NODE_MONITOR_GRACE_PERIOD (5s)",
        ),
        ({ENV_SEED: "x"}, "BERTH_AGENT_SEED='x': expected `int`, got `str`"),
        ({ENV_TICK: "-1"}, "BERTH_AGENT_TICK_SECONDS='-1': expected `float` > 0.0"),
    ],
)
def test_bad_settings(env: dict[str, str], message: str) -> None:
    """One line naming the variable and its value."""
    with pytest.raises(StackError) as info:
        AgentConfig.from_env(env)
    assert str(info.value) == message


def test_kubelet_configuration_file(tmp_path: Path) -> None:
    good = tmp_path / "kubelet.yaml"
    good.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "evictionHard: {memory.available: 500Mi}\n"
    )
    config = AgentConfig.from_env({ENV_KUBELET_CONFIG: str(good)})
    assert config.pressure is not None
    assert [t.text() for t in config.pressure.thresholds] == ["memory.available<524288000"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("evictionSoft: {memory.available: 1Gi}\n")
    with pytest.raises(StackError) as info:
        AgentConfig.from_env({ENV_KUBELET_CONFIG: str(bad)})
    assert str(info.value) == (
        f"BERTH_KUBELET_CONFIG={str(bad)!r}: evictionSoft[memory.available]: needs "
        "evictionSoftGracePeriod[memory.available]"
    )
    with pytest.raises(StackError, match="No such file"):
        AgentConfig.from_env({ENV_KUBELET_CONFIG: str(tmp_path / "missing.yaml")})
