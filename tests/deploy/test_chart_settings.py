"""Every BERTH_* variable the chart sets on a component is a setting that component reads,
and every flag in its command is one of its flags (so a renamed or misspelled setting in the
chart fails here, not silently in a cluster)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from shared.runtime.settings import add_flags, fields
from tests.deploy.chart import Rendered, render
from tests.deploy.test_chart import EVERYTHING_ON
from tests.deploy.test_chart_kube import KUBE_MODE
from tests.deploy.test_chart_security import SECURED
from tests.settings.catalog import OWN, known

VALUE_SETS = [
    pytest.param({}, id="defaults"),
    pytest.param(EVERYTHING_ON, id="everything-on"),
    pytest.param(SECURED, id="secured"),
    pytest.param(
        KUBE_MODE
        | {
            "dashboard": {"enabled": True, "tokensSecret": "t"},
            "kueue": {"mode": "kueue"},
            "kubernetes": {"enabled": True, "leaseNamespace": "kube-system"},
        },
        id="kubernetes-dashboard-kueue",
    ),
    pytest.param(
        {"agent": {"nodeMonitorGracePeriod": 50, "heartbeatSeconds": 5}}, id="agent-timings"
    ),
]


def _components(rendered: Rendered) -> list[str]:
    return sorted({m.component for m in rendered.kinds("Deployment") if m.component in OWN})


def _flags(service: str) -> set[str]:
    flags = {"--name"}
    for model in OWN[service]:
        flags |= {f.spec.flag for f in fields(model) if f.spec.flag}
    return flags


@pytest.mark.parametrize("values", VALUE_SETS)
def test_the_chart_sets_only_settings_each_component_reads(values: dict[str, Any]) -> None:
    rendered = render(values)
    components = _components(rendered)
    assert {"queue", "scheduler", "binder"} <= set(components)
    for component in components:
        names = {n for n in rendered.env(component) if n.startswith("BERTH_")}
        unknown = names - known(component)
        assert not unknown, f"{component}: the chart sets {sorted(unknown)}, which it never reads"
        command = rendered.container(component)["command"]
        assert command[:3] == ["python", "-m", f"services.{component}"]
        given = {arg.partition("=")[0] for arg in command[3:] if arg.startswith("--")}
        assert given <= _flags(component), f"{component}: unknown flags {given - _flags(component)}"


def test_the_check_sees_a_setting_the_component_does_not_read() -> None:
    """The check above would fail: the queue's own settings are not the binder's."""
    assert "BERTH_KUEUE_MODE" in known("queue")
    assert "BERTH_KUEUE_MODE" not in known("binder")
    assert "BERTH_DASHBOARD_PORT" not in known("queue")


@pytest.mark.parametrize("component", sorted(OWN))
def test_each_flag_is_one_argparse_knows(component: str) -> None:
    parser = argparse.ArgumentParser()
    for model in OWN[component]:
        add_flags(parser, model)
    assert {a for action in parser._actions for a in action.option_strings} - {"-h", "--help"} == (
        _flags(component) - {"--name"}
    )
