"""Kueue's performance configs as berth reads them (cli/bench/kueue_config.py) and Kueue's
summary and checker (cli/bench/kueue_summary.py): pure, table-driven where it can be."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from cli.bench.kueue import nodes_for, pod_of, quota_objects
from cli.bench.kueue_cli import finish_result
from cli.bench.kueue_config import (
    ConfigError,
    Plan,
    lower_bound_ms,
    parse_generator,
    parse_rangespec,
    plan_of,
)
from cli.bench.kueue_summary import WorkloadRecord, check_range, summarize
from cli.bench.kueue_tracker import STAGES, Tracker, uid_of

ROOT = Path(__file__).resolve().parents[2] / "examples" / "kueue-perf"


def baseline() -> Plan:
    return plan_of(parse_generator((ROOT / "baseline" / "generator.yaml").read_text()))


def test_baseline_has_kueue_names_counts_and_schedule() -> None:
    plan = baseline()
    assert len(plan.queues) == 30
    assert len(plan.workloads) == 15_000
    assert plan.queues[0].name == "cq-0-0-cohort-0"
    assert {q.cohort for q in plan.queues} == {f"cohort-{i}" for i in range(5)}
    first = [w for w in plan.workloads if w.queue == "cq-0-0-cohort-0"]
    small = [w for w in first if w.class_name == "small"]
    assert [w.name for w in small[:2]] == ["small-0-0-0", "small-0-1-0"]
    assert [w.at_ms for w in small[:3]] == [100, 200, 300]
    large = [w for w in first if w.class_name == "large"]
    assert (large[-1].at_ms, large[-1].cpu_milli, large[-1].priority) == (60_000, 20_000, 200)
    # 7,920 cpu-seconds per cohort over 120 nominal cores: 66 s, and the tail arrives at 60 s.
    assert lower_bound_ms(plan) == 66_840


def test_objects_let_quota_decide() -> None:
    plan = baseline()
    objects = quota_objects(plan)
    assert len(objects.queue_objects) == 1 + 2 * 30  # the flavor, 30 ClusterQueues and LQs
    nodes = nodes_for(plan)
    total = sum(n.status.allocatable["cpu"] for n in nodes)
    assert total >= 2 * 600_000
    assert min(n.status.allocatable["cpu"] for n in nodes) >= 20_000


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("cohorts: []", "generator.cohorts: must be a non-empty list"),
        (
            "cohorts: [{className: c, count: 1, queuesSets: [{className: q, count: 1, "
            "children: []}]}]",
            "generator.cohorts[0].queuesSets[0].children: not supported",
        ),
        (
            "cohorts: [{className: c, count: 1, queuesSets: [{className: q, count: 1, "
            "nominalQuota: lots}]}]",
            "generator.cohorts[0].queuesSets[0].nominalQuota: invalid cpu quantity",
        ),
        (
            "cohorts: [{className: c, count: -1, queuesSets: [{className: q}]}]",
            "generator.cohorts[0].count: must be an integer >= 0",
        ),
        (
            "cohorts: [{className: c, count: 1, queuesSets: [{className: q, count: 1, "
            "reclaimWithinCohort: Sometimes}]}]",
            "generator.cohorts[0].queuesSets[0].reclaimWithinCohort: 'Sometimes' is not one of",
        ),
        (
            "topology: {}\ncohorts: []",
            "generator.topology: not supported",
        ),
    ],
)
def test_bad_generators_name_the_field(text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error.replace("[", r"\[").replace("]", r"\]")):
        plan_of(parse_generator(text))


def _plan() -> Plan:
    text = """cohorts:
- className: co
  count: 1
  queuesSets:
  - className: cq
    count: 2
    nominalQuota: 2
    borrowingLimit: 2
    workloadsSets:
    - count: 2
      creationIntervalMs: 10
      workloads: [{className: w, runtimeMs: 100, priority: 1, request: 1}]
"""
    return plan_of(parse_generator(text))


def test_lower_bound_is_the_cohort_fluid_bound() -> None:
    plan = _plan()
    # 4 workloads x 1 cpu x 100 ms over 4 nominal cores: 100 ms from the first arrival (10 ms);
    # the last arrives at 20 ms and runs 100 ms: 120 ms.
    assert lower_bound_ms(plan) == 120


def test_summary_is_kueues() -> None:
    plan = _plan()
    q0, q1 = (q.name for q in plan.queues)
    records = [
        WorkloadRecord("a", q0, "w", 1000, 10, 20, 120, 0, [(20, 120)]),
        WorkloadRecord("b", q0, "w", 1000, 20, 70, 250, 1, [(30, 50), (150, 250)]),
        WorkloadRecord("c", q1, "w", 1000, 10, 10, 110, 0, [(10, 110)], started_ms=40),
    ]
    summary = summarize(plan, records)
    cls = summary["clusterQueueClasses"]["cq"]
    assert cls["cpuUsed"] == 1000 * (100 + 20 + 100 + 100)
    assert cls["nominalQuota"] == 4000
    assert cls["monitoredMs"] == 250
    assert cls["cpuAverageUsage"] == 320_000 // 250
    assert cls["usagePercent"] == 32.0
    assert summary["workloadClasses"]["w"] == {
        "count": 3,
        "averageTimeToAdmissionMs": (10 + 50 + 0) // 3,
        "averageTimeToFinishMs": (110 + 230 + 100) // 3,
        "totalEvictions": 1,
        "averageAdmissionToStartMs": 40 - 10,  # only c's start is known
    }


def test_checker_fails_outside_the_range_and_on_unknown_classes() -> None:
    summary = summarize(
        _plan(),
        [WorkloadRecord("a", _plan().queues[0].name, "w", 1000, 0, 50, 150, 0, [(50, 150)])],
    )
    spec = parse_rangespec(
        "cmd: {maxWallMs: 100}\nclusterQueueClassesMinUsage: {cq: 90}\n"
        "wlClassesMaxAvgTimeToAdmissionMs: {other: 10}"
    )
    assert check_range(summary, 150, 0, spec) == [
        "Wall time 150ms is greater than maximum expected 100ms",
        "ClusterQueue class cq: Usage 16.67% is less then expected 90.00%",
        "workload class w: Unexpected class",
    ]
    ok = parse_rangespec(
        "cmd: {maxWallMs: 200}\nclusterQueueClassesMinUsage: {cq: 10}\n"
        "wlClassesMaxAvgTimeToAdmissionMs: {w: 50}"
    )
    assert check_range(summary, 150, 0, ok) == []
    result = {"settled": True, "wallMs": 150, "mCPU": 0, **summary}
    assert finish_result(dict(result), "spec", "cmd: {maxWallMs: 100}") == 1
    assert finish_result(dict(result), None, None) == 0
    assert finish_result({**result, "settled": False}, None, None) == 1


def test_rangespec_of_kueue_parses() -> None:
    spec = parse_rangespec((ROOT / "baseline" / "rangespec.yaml").read_text())
    assert spec.max_wall_ms == 425_000
    assert spec.cq_min_usage == {"cq": 55.0}
    assert spec.wl_max_avg_admission_ms == {"large": 11_000, "medium": 90_000, "small": 260_000}


def test_a_workload_admitted_and_finished_between_two_reads_still_finishes() -> None:
    """The harness reads the admitted records every poll; a workload admitted and finished
    between two reads is found by its completion (`unseen`), counted admitted its runtime
    before it finished and `inferred`, so the run ends instead of waiting for the timeout.
    One in the admitted records just read is not unseen: its own record says when."""

    plan = baseline()
    tracker = Tracker(plan, scale=2.0, started=100.0)
    small = [w for w in plan.workloads if w.class_name == "small"][:3]
    for w in small:
        tracker.created(w, 100.0)
    keys = [f"{w.queue}/{w.name}" for w in small]
    just_read: dict[bytes | str, bytes | str] = {keys[1].encode(): msgpack.packb({"at": 100.5})}
    assert tracker.unseen(just_read) == [keys[0], keys[2]]
    tracker.observe(just_read, 100.5)
    tracker.finish_unseen(keys[0], 101.0)  # runtime 200 ms at scale 2: 0.1 s of wall time
    record = tracker.records[keys[0]]
    assert record.admitted_ms == pytest.approx((100.9 - 100.0) * 1000 * 2.0)
    assert record.finished_ms == pytest.approx(1000 * 2.0)
    [(start, end)] = record.periods
    assert start == pytest.approx(1800.0)
    assert end == pytest.approx(2000.0)
    assert (tracker.finished, tracker.inferred) == (1, 1)
    assert tracker.unseen({}) == [keys[2]]  # keys[1] is running, keys[0] finished


def test_admission_to_start_is_split_into_its_hops_per_class() -> None:
    """Each hop's average over the workloads admitted once and seen at every hop, in
    config-time ms (scale 2: one wall second is 2,000 ms); an evicted workload and one the
    observer missed are left out."""
    plan = baseline()
    tracker = Tracker(plan, scale=2.0, started=100.0)
    small = [w for w in plan.workloads if w.class_name == "small"][:4]
    large = [w for w in plan.workloads if w.class_name == "large"][:1]
    dispatched: dict[str, float] = {}
    proposed: dict[str, float] = {}
    bound: dict[str, float] = {}
    for index, w in enumerate([*small, *large]):
        tracker.created(w, 100.0)
        key, uid = f"{w.queue}/{w.name}", uid_of(w)
        tracker.observe({key.encode(): msgpack.packb({"at": 101.0})}, 101.0)
        # small i: 10 ms to dispatch, 10 * (i + 1) to propose, 5 to bind, 20 to start (wall)
        dispatched[uid] = 101.010
        proposed[uid] = 101.010 + 0.010 * (index + 1)
        bound[uid] = proposed[uid] + 0.005
        tracker.finish(key, 102.0, started=bound[uid] + 0.020)
    tracker.records[f"{small[2].queue}/{small[2].name}"].evictions = 1
    del proposed[uid_of(small[3])]
    hops = tracker.stages(dispatched, proposed, bound)
    assert set(hops) == {"small", "large"}
    # small 0 and 1 count: proposals after 10 and 20 ms, so 15 ms wall = 30 config-time ms
    assert [hops["small"][stage] for stage in STAGES] == [20, 30, 10, 40]
    assert [hops["large"][stage] for stage in STAGES] == [20, 100, 10, 40]


def test_estimates_are_read_once_per_workload_from_the_reasons_of_those_still_waiting() -> None:
    """The harness asks only for the reasons it still needs (waiting, never admitted, no
    estimate read yet), per LocalQueue; the first estimate read is the one kept."""
    plan = baseline()
    tracker = Tracker(plan, scale=1.0, started=100.0)
    queues = sorted({w.queue for w in plan.workloads})[:2]
    chosen = [w for q in queues for w in [x for x in plan.workloads if x.queue == q][:3]]
    for w in chosen:
        tracker.created(w, 100.0)
    keys = [f"{w.queue}/{w.name}" for w in chosen]
    assert tracker.awaiting_estimates() == {queues[0]: keys[:3], queues[1]: keys[3:]}

    def why(seconds: int) -> bytes:
        blob: bytes = msgpack.packb({"msg": f"waiting; admission estimated in ~{seconds}s"})
        return blob

    tracker.observe({keys[0].encode(): msgpack.packb({"at": 100.2})}, 100.2)  # admitted
    tracker.read_estimates({keys[1]: why(4), keys[3]: msgpack.packb({"msg": "no estimate"})}, 101)
    assert tracker.predicted == {keys[1]: 105.0}
    assert tracker.awaiting_estimates() == {queues[0]: [keys[2]], queues[1]: keys[3:]}
    tracker.read_estimates({keys[1]: why(9)}, 102)  # a later estimate does not replace it
    assert tracker.predicted == {keys[1]: 105.0}


def test_a_workload_falls_due_its_runtime_after_its_current_admission() -> None:
    """Kueue's runner ends a workload `runtimeMs` after its admission, counting again from a
    re-admission: the harness's due list holds each admission seen, and only the current
    one's falls due (an evicted one's is dropped when it comes up)."""
    plan = baseline()
    tracker = Tracker(plan, scale=2.0, started=100.0, finish_after_admission=True)
    small, large = (
        next(w for w in plan.workloads if w.class_name == c) for c in ("small", "large")
    )
    for w in (small, large):
        tracker.created(w, 100.0)
    s, big = f"{small.queue}/{small.name}", f"{large.queue}/{large.name}"
    # runtimes 200 and 1,000 ms at scale 2: 0.1 and 0.5 s of wall time
    tracker.observe({s: msgpack.packb({"at": 101.0}), big: msgpack.packb({"at": 101.0})}, 101.0)
    assert tracker.next_due() == pytest.approx(101.1)
    assert tracker.due_now(101.09) == []
    assert tracker.due_now(101.1) == [(s, 101.0)]
    tracker.due_again(s, 101.0, 101.105)  # not bound yet: looked at again
    assert tracker.due_now(101.2) == [(s, 101.0)]
    # the large one is evicted (gone from the admitted records), then admitted again
    tracker.observe({}, 101.3)
    tracker.observe({big: msgpack.packb({"at": 101.4})}, 101.4)
    assert tracker.records[big].evictions == 1
    assert tracker.due_now(101.5) == []  # its first admission's runtime is over: not counted
    assert tracker.due_now(101.9) == [(big, 101.4)]
    assert tracker.next_due() is None


def test_without_finishing_at_admission_nothing_falls_due() -> None:
    """`--runtime-from start`: the agent ends the pods (their pod-complete stage); the
    harness's due list stays empty and the pods carry the stage."""
    plan = baseline()
    tracker = Tracker(plan, scale=1.0, started=100.0)
    w = plan.workloads[0]
    tracker.created(w, 100.0)
    tracker.observe({f"{w.queue}/{w.name}": msgpack.packb({"at": 100.5})}, 100.5)
    assert tracker.due == []
    assert tracker.due_now(1e12) == []
    delay = "pod-complete.stage.kwok.x-k8s.io/delay"
    assert pod_of(w, 2.0).metadata.annotations == {delay: f"{w.runtime_ms // 2}ms"}
    assert pod_of(w, 2.0, stage=False).metadata.annotations == {}


def test_a_workload_the_harness_is_ending_is_not_counted_evicted() -> None:
    """The queue may drop a workload's admitted record (its pod deleted) before the harness's
    `finish_due` is back from ending it: that read is no eviction, and the workload keeps its
    admission until the harness finishes it."""
    plan = baseline()
    tracker = Tracker(plan, scale=1.0, started=100.0, finish_after_admission=True)
    w = plan.workloads[0]
    tracker.created(w, 100.0)
    key = f"{w.queue}/{w.name}"
    tracker.observe({key: msgpack.packb({"at": 101.0})}, 101.0)
    tracker.finishing.add(key)
    tracker.observe({}, 101.5)
    assert tracker.records[key].evictions == 0
    assert tracker.admitted_at == {key: 101.0}
    tracker.finishing.discard(key)
    tracker.observe({}, 101.6)  # once no longer being ended, a missing record is an eviction
    assert tracker.records[key].evictions == 1
