"""The node agent in the chart: its own Deployment in standalone mode, running `python -m
services.agent` with the lifecycle settings, and none with kubernetes.enabled."""

from __future__ import annotations

from services.agent.config import ENV_GRACE, ENV_HEARTBEAT, AgentConfig
from tests.deploy.chart import render


def test_the_agent_runs_standalone_with_its_settings() -> None:
    rendered = render({"agent": {"nodeMonitorGracePeriod": 50, "heartbeatSeconds": 5}})
    container = rendered.container("agent")
    assert container["command"][:3] == ["python", "-m", "services.agent"]
    env = rendered.env("agent")
    assert (env[ENV_GRACE], env[ENV_HEARTBEAT]) == ("50", "5")
    config = AgentConfig.from_env({ENV_GRACE: env[ENV_GRACE], ENV_HEARTBEAT: env[ENV_HEARTBEAT]})
    assert (config.node_monitor_grace_period, config.heartbeat_seconds) == (50.0, 5.0)
    assert rendered.get("Deployment", "agent").doc["spec"]["replicas"] == 1


def test_no_agent_in_kubernetes_mode_or_when_disabled() -> None:
    kube = render({"kubernetes": {"enabled": True, "takeOverDefaultScheduler": True}})
    assert kube.find("Deployment", "agent") is None
    off = render({"agent": {"enabled": False}})
    assert off.find("Deployment", "agent") is None
    assert off.find("Service", "agent") is None
