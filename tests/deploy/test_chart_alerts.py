"""The chart's alerts, made to fire: the PrometheusRule the chart renders is checked and
unit-tested with Prometheus's own `promtool` (Debian's `prometheus` package; `make tools`
installs it). Each alert gets input series that must make it fire (with its labels and its
rendered annotations) and series just on the quiet side of its threshold that must not, and
a `for:` that must hold it pending first. The same tests fail when a threshold or an
expression of the rule is broken on purpose."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from services.queue.config import QueueConfig
from services.queue.service import QueueService
from shared.messaging.kafka import Topics, ensure_topics, make_producer
from tests.deploy.chart import NAMESPACE, render
from tests.deploy.test_chart_monitoring import ALERTS, MONITORING

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
NS = f'namespace="{NAMESPACE}"'


@dataclass(frozen=True)
class AlertCase:
    """One alert's unit test: `fires` makes it fire at `at` with `labels` (severity added)
    and `annotations`; `quiet` keeps it silent; `pending` (a time) is before its `for:`
    elapses, when it must not fire yet."""

    alert: str
    fires: dict[str, str]
    quiet: dict[str, str]
    labels: dict[str, str]
    annotations: dict[str, str]
    at: str = "20m"
    pending: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    """Series both tests share."""


def series(name: str, **labels: str) -> str:
    inner = ",".join([NS, *(f'{k}="{v}"' for k, v in labels.items())])
    return f"{name}{{{inner}}}"


SLI = "scheduler_pod_scheduling_sli_duration_seconds_bucket"
ATTEMPTS = "scheduler_schedule_attempts_total"

CASES = [
    AlertCase(
        "BerthPodSchedulingSlow",
        # 100 pods bound a minute: 90 within 20 s, 10 after 82-164 s (p99 about 156 s > 60 s,
        # the median 11 s) ...
        fires={
            series(SLI, le="20.48"): "0+90x40",
            series(SLI, le="81.92"): "0+90x40",
            series(SLI, le="163.84"): "0+100x40",
            series(SLI, le="+Inf"): "0+100x40",
        },
        # ... or the 10 within 20-41 s (p99 about 39 s).
        quiet={
            series(SLI, le="20.48"): "0+90x40",
            series(SLI, le="40.96"): "0+100x40",
            series(SLI, le="+Inf"): "0+100x40",
        },
        labels={"severity": "warning"},
        annotations={
            "summary": "Pods wait too long to be scheduled",
            "description": "p99 of scheduler_pod_scheduling_sli_duration_seconds (first attempt "
            "to bound) is 2m 35s over 10 minutes.",
        },
        at="25m",
        pending="8m",
    ),
    AlertCase(
        "BerthSchedulingStalled",
        # Pods wait in active while no attempt is counted anywhere ...
        fires={series(ATTEMPTS, result="scheduled", job="binder"): "100+0x40"},
        # ... not while attempts go on.
        quiet={series(ATTEMPTS, result="scheduled", job="binder"): "100+5x40"},
        extra={series("scheduler_pending_pods", queue="active", job="queue"): "7+0x40"},
        labels={"severity": "critical"},
        annotations={
            "summary": "Pods are pending and no attempt is being made",
            "description": "Pods sit in the active queue while no worker or binder reports any "
            "attempt: check the workers, the binders and Kafka.",
        },
        at="25m",
        pending="8m",
    ),
    AlertCase(
        "BerthSchedulingAttemptsFailing",
        # 10% of the attempts are errors (> 5%) ...
        fires={
            series(ATTEMPTS, result="scheduled", job="binder"): "0+90x40",
            series(ATTEMPTS, result="error", job="scheduler"): "0+10x40",
        },
        # ... 2% are.
        quiet={
            series(ATTEMPTS, result="scheduled", job="binder"): "0+98x40",
            series(ATTEMPTS, result="error", job="scheduler"): "0+2x40",
        },
        labels={"severity": "warning"},
        annotations={
            "summary": "Scheduling attempts end in errors",
            "description": 'More than 0.05 of scheduling attempts ended with result="error" '
            "(internal errors: see the workers' and binders' logs and the traces with status "
            "ERROR).",
        },
        pending="8m",
    ),
    AlertCase(
        "BerthConflictRateHigh",
        # 30 of 100 attempts a minute are conflicts (> 25%) ...
        fires={
            series(ATTEMPTS, result="scheduled", job="binder"): "0+70x40",
            series(ATTEMPTS, result="conflict", job="binder"): "0+30x40",
            series("berth_conflicts_total", reason="reserve", job="binder"): "0+30x40",
        },
        # ... 20 of 100 are.
        quiet={
            series(ATTEMPTS, result="scheduled", job="binder"): "0+80x40",
            series(ATTEMPTS, result="conflict", job="binder"): "0+20x40",
            series("berth_conflicts_total", reason="reserve", job="binder"): "0+20x40",
        },
        labels={"severity": "warning"},
        annotations={
            "summary": "The binder refuses many proposals",
            "description": "More than 0.25 of attempts end in a conflict (workers' views "
            "disagree with the store); see berth_conflicts_total by reason and "
            "berth_view_follow_lag.",
        },
        pending="8m",
    ),
    AlertCase(
        "BerthConsumerLagHigh",
        fires={
            series(
                "berth_consumer_lag", job="binder", pod="binder-0", topic="berth.proposals"
            ): "6000+0x40"
        },
        quiet={
            series(
                "berth_consumer_lag", job="binder", pod="binder-0", topic="berth.proposals"
            ): "4000+0x40"
        },
        labels={"severity": "warning", "job": "binder", "topic": "berth.proposals"},
        annotations={
            "summary": "A berth component falls behind its topic",
            "description": "binder has 6000 unconsumed messages on berth.proposals.",
        },
        at="10m",
        pending="3m",
    ),
    AlertCase(
        "BerthViewFollowLagHigh",
        fires={
            series("berth_view_follow_lag", job="scheduler", pod="w-1", view="nodes"): "12000+0x40"
        },
        quiet={
            series("berth_view_follow_lag", job="scheduler", pod="w-1", view="nodes"): "9000+0x40"
        },
        labels={"severity": "warning", "job": "scheduler", "pod": "w-1"},
        annotations={
            "summary": "A worker's view of the cluster falls behind the store",
            "description": "w-1 is 12000 store changes behind.",
        },
        at="10m",
        pending="3m",
    ),
    AlertCase(
        "BerthDeadLetters",
        # One letter in the last 10 minutes ...
        fires={
            series("berth_dead_letters_total", job="queue", topic="berth.outcomes"): "0 0 0 0 "
            "0 1 1 1 1 1 1 1 1 1 1"
        },
        # ... an old count that no longer grows.
        quiet={series("berth_dead_letters_total", job="queue", topic="berth.outcomes"): "3+0x40"},
        labels={"severity": "warning", "job": "queue", "topic": "berth.outcomes"},
        annotations={
            "summary": "Messages went to the dead-letter topic",
            "description": "queue dead-lettered 1 message(s) from berth.outcomes (undecodable, "
            "forged, or refused): read the dead-letter topic.",
        },
        at="10m",
    ),
    AlertCase(
        "BerthLeasesExpiring",
        # 2 a minute: 20 in 10 minutes (> 10) ...
        fires={series("berth_expired_leases_total", job="queue"): "0+2x40"},
        # ... 1 every 2 minutes: 5.
        quiet={series("berth_expired_leases_total", job="queue"): "0+0.5x40"},
        labels={"severity": "warning"},
        annotations={
            "summary": "Dispatched pods come back without an outcome",
            "description": "20 dispatch leases expired in 10 minutes: workers or binders die "
            "or stall.",
        },
    ),
    AlertCase(
        "BerthTraceExportFailing",
        fires={series("berth_trace_export_failures_total", job="binder"): "0+1x40"},
        quiet={series("berth_trace_export_failures_total", job="binder"): "4+0x40"},
        labels={"severity": "info", "job": "binder"},
        annotations={
            "summary": "Spans are not reaching the OTLP collector",
            "description": "binder fails to export spans: check BERTH_OTLP_ENDPOINT and the "
            "collector.",
        },
        at="25m",
        pending="8m",
    ),
    AlertCase(
        "BerthLeaderLost",
        # Neither adapter replica holds the Lease ...
        fires={
            series("berth_leader", job="adapter", pod="a-0", lease="berth-adapter"): "0+0x40",
            series("berth_leader", job="adapter", pod="a-1", lease="berth-adapter"): "0+0x40",
        },
        # ... one does.
        quiet={
            series("berth_leader", job="adapter", pod="a-0", lease="berth-adapter"): "0+0x40",
            series("berth_leader", job="adapter", pod="a-1", lease="berth-adapter"): "1+0x40",
        },
        labels={"severity": "critical", "lease": "berth-adapter"},
        annotations={
            "summary": "No replica holds the leader Lease",
            "description": "No adapter replica leads berth-adapter: pods are not read from or "
            "written to the API server.",
        },
        at="5m",
    ),
    AlertCase(
        "BerthComponentDown",
        fires={series("up", job="binder", pod="binder-0"): "0+0x40"},
        # Up, or down but not one of berth's jobs.
        quiet={
            series("up", job="binder", pod="binder-0"): "1+0x40",
            series("up", job="node-exporter", pod="ne-0"): "0+0x40",
        },
        labels={
            "severity": "critical",
            "job": "binder",
            "pod": "binder-0",
            "namespace": NAMESPACE,
        },
        annotations={
            "summary": "A berth replica cannot be scraped",
            "description": "binder binder-0 has not answered /metrics for 5 minutes.",
        },
        at="10m",
        pending="3m",
    ),
]


def unit_tests(case: AlertCase) -> list[dict[str, Any]]:
    """promtool's tests of one alert: firing (not before its `for:`), and quiet."""

    def inputs(chosen: dict[str, str]) -> list[dict[str, str]]:
        return [{"series": s, "values": v} for s, v in {**case.extra, **chosen}.items()]

    def check(at: str, alerts: list[dict[str, Any]]) -> dict[str, Any]:
        return {"eval_time": at, "alertname": case.alert, "exp_alerts": alerts}

    expected = [{"exp_labels": case.labels, "exp_annotations": case.annotations}]
    times = [t for t in (case.pending, case.at) if t is not None]
    firing = [check(case.pending, [])] if case.pending is not None else []
    return [
        {
            "name": f"{case.alert} fires",
            "interval": "1m",
            "input_series": inputs(case.fires),
            "alert_rule_test": [*firing, check(case.at, expected)],
        },
        {
            "name": f"{case.alert} quiet",
            "interval": "1m",
            "input_series": inputs(case.quiet),
            "alert_rule_test": [check(t, []) for t in times],
        },
    ]


def rules_file(directory: Path, values: dict[str, Any], mutate: str = "") -> Path:
    """The rendered PrometheusRule's groups as a Prometheus rules file; `mutate` ("old=>new")
    replaces text in the alerts' expressions (it must be found)."""
    (rule,) = render(values).kinds("PrometheusRule")
    groups = rule.doc["spec"]["groups"]
    if mutate:
        old, new = mutate.split("=>")
        changed = [r for g in groups for r in g["rules"] if old in r["expr"]]
        assert changed, old
        for item in changed:
            item["expr"] = item["expr"].replace(old, new)
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    assert Path(PROMTOOL).is_file(), "no promtool: `make tools` installs Debian's prometheus"
    return subprocess.run(
        [PROMTOOL, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


def run_tests(
    directory: Path, rules: Path, cases: list[AlertCase]
) -> subprocess.CompletedProcess[str]:
    tests = {
        "rule_files": [rules.name],
        "evaluation_interval": "1m",
        "tests": [t for case in cases for t in unit_tests(case)],
    }
    path = directory / "alerts_test.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    return promtool("test", "rules", path)


def test_every_alert_has_a_firing_test() -> None:
    assert {case.alert for case in CASES} == ALERTS


def test_the_rendered_rules_pass_promtool_check(tmp_path: Path) -> None:
    checked = promtool("check", "rules", rules_file(tmp_path, MONITORING))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout


@pytest.mark.parametrize("case", CASES, ids=[c.alert for c in CASES])
def test_the_alert_fires_when_it_should_and_only_then(tmp_path: Path, case: AlertCase) -> None:
    result = run_tests(tmp_path, rules_file(tmp_path, MONITORING), [case])
    assert result.returncode == 0, result.stdout + result.stderr


def _thresholds(**changed: Any) -> dict[str, Any]:
    values: dict[str, Any] = json.loads(json.dumps(MONITORING))
    values["metrics"]["prometheusRule"]["thresholds"] = changed
    return values


@pytest.mark.parametrize(
    ("values", "mutate", "broken"),
    [
        pytest.param(_thresholds(consumerLag=7000), "", "BerthConsumerLagHigh", id="lag-too-high"),
        pytest.param(
            _thresholds(errorRatio=0.01), "", "BerthSchedulingAttemptsFailing", id="error"
        ),
        pytest.param(_thresholds(conflictRatio=0.5), "", "BerthConflictRateHigh", id="conflicts"),
        pytest.param(_thresholds(stalledFor="30m"), "", "BerthSchedulingStalled", id="stalled-for"),
        pytest.param(
            MONITORING, 'queue="active"=>queue="backoff"', "BerthSchedulingStalled", id="queue"
        ),
        pytest.param(MONITORING, "< 1=>< 0", "BerthLeaderLost", id="leader-comparison"),
        pytest.param(
            MONITORING,
            "berth_dead_letters_total=>berth_dead_letter_total",
            "BerthDeadLetters",
            id="metric-name",
        ),
        pytest.param(
            MONITORING,
            "histogram_quantile(0.99=>histogram_quantile(0.5",
            "BerthPodSchedulingSlow",
            id="quantile",
        ),
        pytest.param(MONITORING, '|dashboard"=>|dashboard|binderx"', None, id="regex-still-ok"),
    ],
)
def test_a_broken_rule_fails_its_tests(
    tmp_path: Path, values: dict[str, Any], mutate: str, broken: str | None
) -> None:
    """Break a threshold or an expression: the alert's tests fail (and only its own)."""
    rules = rules_file(tmp_path, values, mutate)
    assert promtool("check", "rules", rules).returncode == 0  # still a valid rule
    result = run_tests(tmp_path, rules, CASES)
    if broken is None:
        assert result.returncode == 0, result.stdout + result.stderr
        return
    assert result.returncode != 0
    failed = {case.alert for case in CASES if f"{case.alert} " in result.stdout + result.stderr}
    assert failed == {broken}, result.stdout + result.stderr


# ------------------------------------------------------------ broken on purpose, for real
def exposed_samples(name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of `name` a berth process exposes now (its /metrics text), by labels."""
    text = generate_latest(REGISTRY).decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


async def test_a_queue_fed_garbage_fires_the_dead_letter_alert(
    tmp_path: Path,
    redis_url: str,
    kafka_bootstrap: str,
    topics: Topics,
    group_id: str,
    redis_prefix: str,
) -> None:
    """A real queue replica gets an undecodable outcome: what its /metrics then says, scraped
    every minute (as Prometheus would, adding `job` and `namespace`), fires
    BerthDeadLetters; the same replica's metrics before it stay quiet."""
    await ensure_topics(kafka_bootstrap, topics.all(), partitions=2)
    config = QueueConfig(key_prefix=redis_prefix, topics=topics, group_id=group_id)
    name = "berth_dead_letters_total"
    before = exposed_samples(name)
    async with QueueService(redis_url, kafka_bootstrap, config) as service:
        producer = make_producer(kafka_bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(topics.outcomes, b"\x00 not a message", key=b"x")
        finally:
            await producer.stop()
        deadline = time.monotonic() + 20
        while service.metrics["dead_letters"] < 1:
            assert time.monotonic() < deadline, "the queue never dead-lettered the garbage"
            await asyncio.sleep(0.02)
    after = exposed_samples(name)
    changed = {labels: value for labels, value in after.items() if value != before.get(labels)}
    assert [dict(labels) for labels in changed] == [{"topic": topics.outcomes}]
    [(labels, value)] = changed.items()
    scraped = series(name, job="queue", **dict(labels))
    old = before.get(labels, 0.0)
    # Scrapes every minute: 5 before the garbage, then after it.
    values = " ".join([f"{old:g}"] * 5 + [f"{value:g}"] * 10)
    case = AlertCase(
        "BerthDeadLetters",
        fires={scraped: values},
        quiet={scraped: " ".join([f"{old:g}"] * 15)},
        labels={"severity": "warning", "job": "queue", "topic": topics.outcomes},
        annotations={
            "summary": "Messages went to the dead-letter topic",
            "description": f"queue dead-lettered 1 message(s) from {topics.outcomes} "
            "(undecodable, forged, or refused): read the dead-letter topic.",
        },
        at="10m",
        pending="3m",  # before the garbage: nothing yet
    )
    result = run_tests(tmp_path, rules_file(tmp_path, MONITORING), [case])
    assert result.returncode == 0, result.stdout + result.stderr
