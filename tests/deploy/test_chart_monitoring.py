"""The chart's monitoring: a ServiceMonitor for every component that runs, the PrometheusRule
with the on-call's alerts, and the Grafana dashboard, every query of both naming only metric
families the services expose (shared.observability.metrics, and prometheus_client's process
collector)."""

from __future__ import annotations

import json
import re
from typing import Any

import helm_python
import pytest
from prometheus_client import REGISTRY, CollectorRegistry

from shared.observability.metrics import BerthMetrics
from tests.deploy.chart import CHART_DIR, KUBE_VERSION, NAMESPACE, Rendered, render
from tests.deploy.test_chart_kube import KUBE_MODE

MONITORING: dict[str, Any] = {
    "metrics": {
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True, "labels": {"release": "prom"}},
        "grafanaDashboard": {"enabled": True},
    },
    "dashboard": {"enabled": True},
}

ALERTS = {
    "BerthPodSchedulingSlow",
    "BerthSchedulingStalled",
    "BerthSchedulingAttemptsFailing",
    "BerthConflictRateHigh",
    "BerthConsumerLagHigh",
    "BerthViewFollowLagHigh",
    "BerthDeadLetters",
    "BerthLeasesExpiring",
    "BerthTraceExportFailing",
    "BerthLeaderLost",
    "BerthComponentDown",
}

METRIC = re.compile(r"\b((?:scheduler|berth|kueue|process|up)(?:_[a-z0-9]+)*)\b")
"""A metric name in a PromQL expression (label names and functions never start like these)."""


def exposed_series() -> set[str]:
    """Every series name a berth service's /metrics can carry: its families with their
    suffixes (counter _total, histogram _bucket/_count/_sum), the process collector's, and
    Prometheus's own `up`."""
    names = {"up"}
    registries = [BerthMetrics(CollectorRegistry()).registry, REGISTRY]
    for registry in registries:
        for family in registry.collect():
            if family.name.startswith(("python_", "process_")) or registry is not REGISTRY:
                names.add(family.name)
                if family.type == "counter":
                    names.add(family.name + "_total")
                elif family.type == "histogram":
                    names.update(family.name + s for s in ("_bucket", "_count", "_sum"))
    return names


def referenced(expr: str) -> set[str]:
    without_labels = re.sub(r"\{[^}]*\}", "", expr)
    return set(METRIC.findall(without_labels)) - {"scheduler", "berth", "kueue", "process"}


def rule_exprs(rendered: Rendered) -> dict[str, str]:
    (rule,) = rendered.kinds("PrometheusRule")
    return {
        item["alert"]: item["expr"]
        for group in rule.doc["spec"]["groups"]
        for item in group["rules"]
    }


def dashboard(rendered: Rendered) -> dict[str, Any]:
    (board,) = [m for m in rendered.kinds("ConfigMap") if m.name.endswith("grafana-dashboard")]
    loaded: dict[str, Any] = json.loads(board.doc["data"]["berth.json"])
    return loaded


def test_nothing_is_rendered_by_default() -> None:
    rendered = render()
    assert rendered.kinds("PrometheusRule") == []
    assert [m for m in rendered.kinds("ConfigMap") if "grafana" in m.name] == []


@pytest.mark.parametrize(
    ("values", "components"),
    [
        pytest.param(
            MONITORING, {"queue", "scheduler", "binder", "agent", "dashboard"}, id="standalone"
        ),
        pytest.param(
            MONITORING | KUBE_MODE,
            {"queue", "scheduler", "binder", "adapter", "dashboard"},
            id="kubernetes-mode",
        ),
    ],
)
def test_every_component_that_runs_has_a_service_monitor(
    values: dict[str, Any], components: set[str]
) -> None:
    rendered = render(values)
    deployed = {m.component for m in rendered.kinds("Deployment")}
    monitored = {m.component for m in rendered.kinds("ServiceMonitor")}
    assert monitored == deployed == components
    # and each selects a Service that exposes the http-metrics port
    for monitor in rendered.kinds("ServiceMonitor"):
        service = rendered.get("Service", monitor.component)
        assert {p["name"] for p in service.doc["spec"]["ports"]} >= {"http-metrics"}
        selector = monitor.doc["spec"]["selector"]["matchLabels"]
        assert selector.items() <= service.labels.items()


def test_the_rule_has_the_on_calls_alerts_with_the_thresholds_set() -> None:
    values = json.loads(json.dumps(MONITORING))
    values["metrics"]["prometheusRule"]["thresholds"] = {"errorRatio": 0.2, "consumerLag": 77}
    rendered = render(values)
    (rule,) = rendered.kinds("PrometheusRule")
    assert rule.api_version == "monitoring.coreos.com/v1"
    assert rule.labels["release"] == "prom"
    exprs = rule_exprs(rendered)
    assert set(exprs) == ALERTS
    assert "> 0.2" in exprs["BerthSchedulingAttemptsFailing"]
    assert "> 77" in exprs["BerthConsumerLagHigh"]
    # every query is scoped to the release's namespace
    assert all(f'namespace="{NAMESPACE}"' in e for e in exprs.values())
    for group in rule.doc["spec"]["groups"]:
        for item in group["rules"]:
            assert item["labels"]["severity"] in {"info", "warning", "critical"}
            assert item["annotations"]["summary"]


def test_alerts_name_only_metrics_the_services_expose() -> None:
    exposed = exposed_series()
    for alert, expr in rule_exprs(render(MONITORING)).items():
        missing = referenced(expr) - exposed
        assert not missing, (alert, missing)


def test_the_dashboard_queries_name_only_metrics_the_services_expose() -> None:
    board = dashboard(render(MONITORING))
    exposed = exposed_series()
    exprs = [t["expr"] for panel in board["panels"] for t in panel["targets"]]
    assert len(exprs) >= 20
    seen: set[str] = set()
    for expr in exprs:
        names = referenced(expr)
        assert names, expr
        assert not names - exposed, (expr, names - exposed)
        seen |= names
    # the panels the issue asks for, by the series they read
    for wanted in (
        "scheduler_schedule_attempts_total",
        "scheduler_scheduling_attempt_duration_seconds_bucket",
        "scheduler_pod_scheduling_sli_duration_seconds_bucket",
        "berth_tenant_pending_pods",
        "kueue_pending_workloads",
        "berth_conflicts_total",
        "process_cpu_seconds_total",
        "scheduler_pending_pods",
    ):
        assert wanted in seen, wanted
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    assert {v["name"] for v in board["templating"]["list"]} == {"datasource", "namespace"}


def test_the_chart_with_monitoring_lints_strictly() -> None:
    report = helm_python.lint(CHART_DIR, MONITORING, strict=True, kube_version=f"v{KUBE_VERSION}")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
