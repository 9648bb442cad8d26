"""Extension-point semantics (upstream framework_test.go and schedule_one_test.go, facts only),
with small fake plugins."""

from __future__ import annotations

import asyncio

import pytest

from scheduling.framework.columns import ALL_ROWS
from scheduling.framework.cycle import binding_cycle, scheduling_cycle
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.errors import CycleError, FitError
from scheduling.framework.interfaces import QueuedPodInfo
from scheduling.framework.schedule import schedule_pod
from scheduling.framework.status import SKIP, SUCCESS, Code, Status
from scheduling.framework.waiting_pods import WaitingPod, go_duration
from shared.models import Pod
from tests.builders import make_pod
from tests.framework import fakes
from tests.framework.fakes import Log


def pod(name: str = "p", priority: int = 0) -> Pod:
    return make_pod(name).uid(name).priority(priority).obj()


def schedule(fw, cluster, p: Pod | None = None, explain: bool = False):
    return schedule_pod(fw, CycleState(), p or pod(), cluster.nodes, explain=explain)


# ----------------------------------------------------------------------------- queue
def test_pre_enqueue_returns_the_first_rejection_with_its_plugin():
    log = Log()
    gate = fakes.PreEnqueue("Gate", log, Status.unresolvable("gated"))
    after = fakes.PreEnqueue("After", log)
    fw = fakes.framework({"pre_enqueue": [fakes.PreEnqueue("Ok", log), gate, after]})
    status = fw.run_pre_enqueue_plugins(pod())
    assert (status.code, status.reasons, status.plugin) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        ("gated",),
        "Gate",
    )
    assert log == ["Ok.pre_enqueue", "Gate.pre_enqueue"]


def test_queue_sort_less_and_key_agree():
    fw = fakes.framework({})
    high, low = QueuedPodInfo(pod("a", 10), 2.0), QueuedPodInfo(pod("b", 1), 1.0)
    assert fw.less(high, low)
    assert not fw.less(low, high)
    assert fw.sort_key(high) < fw.sort_key(low)


# ------------------------------------------------------------------------- PreFilter
def test_pre_filter_skip_skips_that_plugins_filter():
    log = Log()
    skipper = fakes.FilterWithPreFilter("Skipper", log, reject={"n1"}, pre_status=SKIP)
    cluster = fakes.cluster_of(["n1"])
    fw = fakes.framework({"pre_filter": [skipper], "filter": [skipper]}, cluster)
    result = schedule(fw, cluster)
    assert result.suggested_host == "n1"
    assert log == ["Skipper.pre_filter"]


@pytest.mark.parametrize(
    ("code", "second_runs"),
    [
        pytest.param(Code.UNSCHEDULABLE, True, id="unschedulable-runs-the-rest"),
        pytest.param(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, False, id="unresolvable-stops"),
    ],
)
def test_pre_filter_rejection_rejects_the_cycle(code, second_runs):
    log = Log()
    first = fakes.PreFilter("First", log, Status(code, ("no way",)))
    second = fakes.PreFilter("Second", log)
    cluster = fakes.cluster_of(["n1", "n2", "n3"])
    fw = fakes.framework(
        {"pre_filter": [first, second], "filter": [fakes.Filter("F", log)]}, cluster
    )
    with pytest.raises(FitError) as info:
        schedule(fw, cluster)
    assert str(info.value) == "0/3 nodes are available: no way."
    assert ("Second.pre_filter" in log) is second_runs
    assert "F.filter" not in log
    diagnosis = info.value.diagnosis
    assert diagnosis.unschedulable_plugins == {"First"}
    statuses = diagnosis.status_by_row()
    assert sorted(statuses) == [0, 1, 2]
    assert {s.plugin for s in statuses.values()} == {"First"}


@pytest.mark.parametrize(
    ("raises", "message"),
    [
        pytest.param(False, 'running PreFilter plugin "Broken": boom', id="error-status"),
        pytest.param(True, 'running PreFilter plugin "Broken": boom', id="exception"),
    ],
)
def test_pre_filter_error_aborts(raises, message):
    broken = fakes.PreFilter("Broken", status=Status.error("boom"), raises=raises)
    cluster = fakes.cluster_of(["n1"])
    fw = fakes.framework({"pre_filter": [broken]}, cluster)
    with pytest.raises(CycleError) as info:
        schedule(fw, cluster)
    assert str(info.value) == message
    assert info.value.status().plugin == "Broken"


def test_pre_filter_result_narrows_the_nodes_filter_sees():
    log = Log()
    a = fakes.PreFilter("A", log, nodes={"n1", "n2", "ghost"})
    b = fakes.PreFilter("B", log, nodes={"n2", "n3"})
    f = fakes.Filter("F", log, reject={"n2"})
    cluster = fakes.cluster_of(["n1", "n2", "n3"])
    fw = fakes.framework({"pre_filter": [a, b], "filter": [f]}, cluster)
    with pytest.raises(FitError) as info:
        schedule(fw, cluster)
    assert f.seen == [["n2"]]
    assert str(info.value) == (
        "0/3 nodes are available: 1 F rejects, 2 node(s) didn't satisfy plugin(s) [A B]."
    )
    statuses = info.value.diagnosis.status_by_row()
    # n3 was left out by A, n1 by B; each is attributed to the plugin that excluded it.
    assert {row: s.plugin for row, s in statuses.items()} == {0: "B", 1: "F", 2: "A"}
    assert statuses[0].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert info.value.diagnosis.unschedulable_plugins == {"A", "B", "F"}


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        pytest.param(
            [{"n1"}, {"n2"}],
            "0/2 nodes are available: node(s) didn't satisfy plugin(s) [A B] simultaneously.",
            id="disjoint",
        ),
        pytest.param(
            [set()], "0/2 nodes are available: node(s) didn't satisfy plugin A.", id="one-empty"
        ),
    ],
)
def test_pre_filter_result_empty_intersection(sets, message):
    plugins = [fakes.PreFilter(name, nodes=s) for name, s in zip("AB", sets, strict=False)]
    cluster = fakes.cluster_of(["n1", "n2"])
    fw = fakes.framework({"pre_filter": plugins}, cluster)
    with pytest.raises(FitError) as info:
        schedule(fw, cluster)
    assert str(info.value) == message
    assert info.value.diagnosis.status_by_row()[0].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# ---------------------------------------------------------------------------- Filter
def test_filter_runs_plugins_in_order_on_the_rows_still_feasible():
    log = Log()
    first = fakes.Filter("First", log, reject={"n1"})
    second = fakes.Filter("Second", log, reject={"n1", "n2"})
    cluster = fakes.cluster_of(["n1", "n2", "n3"])
    fw = fakes.framework({"filter": [first, second]}, cluster)
    outcome = fw.run_filter_plugins(CycleState(), pod(), cluster.nodes, ALL_ROWS)
    assert second.seen == [["n2", "n3"]]
    assert cluster.nodes.row_indices(outcome.feasible).tolist() == [2]
    by_row = {int(r): s for s, rows in outcome.rejections for r in rows}
    assert {r: (s.plugin, s.reasons) for r, s in by_row.items()} == {
        0: ("First", ("First rejects",)),
        1: ("Second", ("Second rejects",)),
    }


def test_filter_with_all_rows_passing_keeps_the_slice():
    cluster = fakes.cluster_of(["n1", "n2"])
    fw = fakes.framework({"filter": [fakes.Filter("F")]}, cluster)
    outcome = fw.run_filter_plugins(CycleState(), pod(), cluster.nodes, ALL_ROWS)
    assert outcome.feasible is ALL_ROWS
    assert outcome.rejections == []


@pytest.mark.parametrize(
    "status",
    [
        pytest.param(Status.error("boom"), id="error"),
        pytest.param(Status(Code.WAIT, ("boom",)), id="not-a-filter-code"),
    ],
)
def test_filter_error_aborts_the_cycle(status):
    cluster = fakes.cluster_of(["n1", "n2"])
    fw = fakes.framework({"filter": [fakes.Filter("F", reject={"n2"}, status=status)]}, cluster)
    with pytest.raises(CycleError, match=r'^running "F" filter plugin: boom$'):
        schedule(fw, cluster)


def test_per_node_filter_is_adapted():
    cluster = fakes.cluster_of(["a1", "b1", "a2"])
    fw = fakes.framework(
        {"filter": [fakes.NodeFilter("PerNode", reject={"a1", "a2", "b1"})]}, cluster
    )
    with pytest.raises(FitError) as info:
        schedule(fw, cluster)
    assert str(info.value) == "0/3 nodes are available: 1 PerNode rejects b, 2 PerNode rejects a."


# ------------------------------------------------------------------------ PostFilter
def test_post_filter_stops_at_the_first_success():
    log = Log()
    no = fakes.PostFilter("No", log, Status.unschedulable("no luck"))
    yes = fakes.PostFilter("Yes", log, SUCCESS, nominate="n1")
    never = fakes.PostFilter("Never", log)
    fw = fakes.framework({"post_filter": [no, yes, never]})
    result, status = fw.run_post_filter_plugins(CycleState(), pod(), fw.handle.nodes, None)  # type: ignore[arg-type]
    assert status.is_success()
    assert result is not None
    assert result.nominated_node == "n1"
    assert log == ["No.post_filter", "Yes.post_filter"]


def test_post_filter_unschedulable_from_all_joins_reasons_first_plugin_recorded():
    a = fakes.PostFilter("A", status=Status.unschedulable("a"))
    b = fakes.PostFilter("B", status=Status.unschedulable("b"))
    fw = fakes.framework({"post_filter": [a, b]})
    result, status = fw.run_post_filter_plugins(CycleState(), pod(), fw.handle.nodes, None)  # type: ignore[arg-type]
    assert result is None
    assert (status.code, status.reasons, status.plugin) == (Code.UNSCHEDULABLE, ("a", "b"), "A")


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            Status.unresolvable("hopeless"), Code.UNSCHEDULABLE_AND_UNRESOLVABLE, id="unresolvable"
        ),
        pytest.param(Status.error("crashed"), Code.ERROR, id="error"),
    ],
)
def test_post_filter_stops_at_a_non_unschedulable_answer(status, expected):
    log = Log()
    first = fakes.PostFilter("First", log, status)
    second = fakes.PostFilter("Second", log)
    fw = fakes.framework({"post_filter": [first, second]})
    _, answer = fw.run_post_filter_plugins(CycleState(), pod(), fw.handle.nodes, None)  # type: ignore[arg-type]
    assert (answer.code, answer.plugin) == (expected, "First")
    assert log == ["First.post_filter"]


def test_a_status_for_every_row_is_attributed_to_its_plugin():
    class RejectAll(fakes.Fake):
        def filter(self, state, pod, nodes, rows):
            return Status.unschedulable("nope")  # no plugin named: the framework names it

    cluster = fakes.cluster_of(["n1", "n2"])
    fw = fakes.framework({"filter": [RejectAll("RejectAll")]}, cluster)
    with pytest.raises(FitError) as info:
        schedule(fw, cluster)
    assert str(info.value) == "0/2 nodes are available: 2 nope."
    assert {s.plugin for s in info.value.diagnosis.status_by_row().values()} == {"RejectAll"}
    assert info.value.diagnosis.unschedulable_plugins == {"RejectAll"}


def test_post_filter_message_joins_the_fit_error():
    cluster = fakes.cluster_of(["n1"])
    post = fakes.PostFilter("Preempt", status=Status.unschedulable("preemption: not helpful."))
    fw = fakes.framework(
        {"filter": [fakes.Filter("F", reject={"n1"})], "post_filter": [post]}, cluster
    )
    outcome = scheduling_cycle(fw, CycleState(), pod(), cluster.nodes, cluster.for_attempt())
    assert outcome.status.code == Code.UNSCHEDULABLE
    assert outcome.message == "0/1 nodes are available: 1 F rejects. preemption: not helpful."
    assert not outcome.nominating


# ---------------------------------------------------------------------------- Score
def test_pre_score_skip_skips_that_plugins_score():
    skipped = fakes.ScoreWithPreScore("Skipped", scores={"n1": 100}, pre_status=SKIP)
    other = fakes.Score("Other", scores={"n2": 10})
    cluster = fakes.cluster_of(["n1", "n2"])
    fw = fakes.framework({"pre_score": [skipped], "score": [skipped, other]}, cluster)
    result = schedule(fw, cluster, explain=True)
    assert result.suggested_host == "n2"
    assert skipped.seen == []
    assert result.scores is not None
    assert set(result.scores.by_plugin) == {"Other"}


def test_pre_score_failure_aborts():
    bad = fakes.ScoreWithPreScore("Bad", pre_status=Status.unschedulable("nope"))
    cluster = fakes.cluster_of(["n1", "n2"])
    fw = fakes.framework({"pre_score": [bad], "score": [bad]}, cluster)
    with pytest.raises(CycleError, match=r'^running PreScore plugin "Bad": nope$'):
        schedule(fw, cluster)


def test_scores_are_normalized_weighted_and_summed():
    log = Log()
    raw = fakes.NormalizedScore("Raw", log, scores={"n1": 1000, "n2": 500}, divisor=10)
    flat = fakes.Score("Flat", log, scores={"n1": 10, "n2": 60})
    cluster = fakes.cluster_of(["n1", "n2"])
    fw = fakes.framework({"score": [(raw, 2), (flat, 3)]}, cluster)
    result = schedule(fw, cluster, explain=True)
    # n1: 100*2 + 10*3 = 230; n2: 50*2 + 60*3 = 280
    assert result.suggested_host == "n2"
    assert result.scores is not None
    assert result.scores.by_node(cluster.nodes) == {
        "n1": (230, {"Raw": 200, "Flat": 30}),
        "n2": (280, {"Raw": 100, "Flat": 180}),
    }
    # Every Score runs before any NormalizeScore, as upstream.
    assert log == ["Raw.score", "Flat.score", "Raw.normalize_score"]


@pytest.mark.parametrize(
    ("scores", "bad"),
    [
        pytest.param({"n1": 101}, 101, id="above-100"),
        pytest.param({"n2": -1}, -1, id="negative"),
    ],
)
def test_score_range_check(scores, bad):
    cluster = fakes.cluster_of(["n1", "n2"])
    fw = fakes.framework({"score": [fakes.Score("Wild", scores=scores)]}, cluster)
    with pytest.raises(CycleError) as info:
        schedule(fw, cluster)
    assert str(info.value) == (
        f'applying score defaultWeights on Score plugins: plugin "Wild" returns an invalid '
        f"score {bad}, it should in the range of [0, 100] after normalizing"
    )


def test_score_error_status():
    cluster = fakes.cluster_of(["n1", "n2"])
    fw = fakes.framework({"score": [fakes.Score("S", status=Status.error("kaput"))]}, cluster)
    with pytest.raises(CycleError, match=r'^running Score plugins: plugin "S" failed with: kaput$'):
        schedule(fw, cluster)


def test_per_node_score_is_adapted():
    cluster = fakes.cluster_of(["n1", "n2", "n3"])
    fw = fakes.framework({"score": [fakes.NodeScore("PerNode", scores={"n3": 7})]}, cluster)
    assert schedule(fw, cluster).suggested_host == "n3"


def test_one_feasible_node_skips_scoring():
    score = fakes.Score("S")
    cluster = fakes.cluster_of(["n1", "n2"])
    fw = fakes.framework({"filter": [fakes.Filter("F", reject={"n1"})], "score": [score]}, cluster)
    result = schedule(fw, cluster, explain=True)
    assert (result.suggested_host, result.evaluated_nodes, result.feasible_nodes) == ("n2", 2, 1)
    assert score.seen == []
    assert result.scores is None


# -------------------------------------------------------------------- Reserve/Permit
def test_reserve_failure_unreserves_every_reserve_plugin_in_reverse():
    log = Log()
    r1 = fakes.Reserve("R1", log)
    r2 = fakes.Reserve("R2", log, Status.unschedulable("full"))
    r3 = fakes.Reserve("R3", log)
    permit = fakes.Permit("Permit", log)
    cluster = fakes.cluster_of(["n1"])
    fw = fakes.framework({"reserve": [r1, r2, r3], "permit": [permit]}, cluster, log=log)
    outcome = scheduling_cycle(fw, CycleState(), pod(), cluster.nodes, cluster.for_attempt())
    assert log == [
        "R1.reserve",
        "R2.reserve",
        "R3.unreserve",
        "R2.unreserve",
        "R1.unreserve",
    ]
    assert (outcome.status.code, outcome.status.plugin) == (Code.UNSCHEDULABLE, "R2")
    assert outcome.message == "0/1 nodes are available: 1 full."
    assert cluster.assumed == {}
    assert cluster.nodes.pods_by_node[0] == []


def test_reserve_error_is_wrapped():
    cluster = fakes.cluster_of(["n1"])
    fw = fakes.framework({"reserve": [fakes.Reserve("R", status=Status.error("disk"))]}, cluster)
    outcome = scheduling_cycle(fw, CycleState(), pod(), cluster.nodes, cluster.for_attempt())
    assert outcome.status.code == Code.ERROR
    assert outcome.message == 'running Reserve plugin "R": disk'


def test_permit_waits_for_the_shortest_timeout():
    cluster = fakes.cluster_of(["n1"])
    slow = fakes.Permit("Slow", status=Status.wait(), timeout=10)
    fast = fakes.Permit("Fast", status=Status.wait(), timeout=5)
    fw = fakes.framework({"permit": [slow, fast]}, cluster)
    p = pod()
    outcome = scheduling_cycle(fw, CycleState(), p, cluster.nodes, cluster.for_attempt())
    assert outcome.status.code == Code.WAIT
    assert outcome.message == 'one or more plugins asked to wait and no plugin rejected pod "p"'
    waiting = fw.get_waiting_pod(p.metadata.uid)
    assert waiting is not None
    assert waiting.timeout == 5
    assert sorted(waiting.pending_plugins()) == ["Fast", "Slow"]
    waiting.time_out()
    assert waiting.result == Status.unschedulable(
        "rejected due to timeout after waiting 5s at plugin Fast", plugin="Fast"
    )


def test_permit_rejection_stops_the_rest_and_unreserves():
    log = Log()
    reserve = fakes.Reserve("R", log)
    deny = fakes.Permit("Deny", log, Status.unschedulable("denied"))
    after = fakes.Permit("After", log)
    cluster = fakes.cluster_of(["n1"])
    fw = fakes.framework({"reserve": [reserve], "permit": [deny, after]}, cluster, log=log)
    outcome = scheduling_cycle(fw, CycleState(), pod(), cluster.nodes, cluster.for_attempt())
    assert log == ["R.reserve", "Deny.permit", "R.unreserve"]
    assert (outcome.status.code, outcome.status.plugin) == (Code.UNSCHEDULABLE, "Deny")
    assert outcome.message == "0/1 nodes are available: 1 denied."
    assert fw.waiting_pods.get(pod().metadata.uid) is None


async def test_wait_on_permit_allowed_by_every_waiting_plugin():
    cluster = fakes.cluster_of(["n1"])
    a = fakes.Permit("A", status=Status.wait(), timeout=30)
    b = fakes.Permit("B", status=Status.wait(), timeout=30)
    fw = fakes.framework({"permit": [a, b]}, cluster)
    state, p = CycleState(), pod()
    outcome = scheduling_cycle(fw, state, p, cluster.nodes, cluster.for_attempt())
    task = asyncio.create_task(
        binding_cycle(fw, state, outcome.pod, "n1", cluster.for_attempt(), cluster.nodes)
    )
    waiting = fw.get_waiting_pod(p.metadata.uid)
    assert waiting is not None
    waiting.allow("A")
    await asyncio.sleep(0)
    assert not task.done()
    waiting.allow("B")
    assert (await task).is_success()
    assert p.metadata.uid in cluster.bound
    assert fw.get_waiting_pod(p.metadata.uid) is None


async def test_wait_on_permit_rejected_unreserves_and_forgets():
    log = Log()
    cluster = fakes.cluster_of(["n1"])
    reserve = fakes.Reserve("R", log)
    gang = fakes.Permit("Gang", log, Status.wait(), timeout=30)
    fw = fakes.framework({"reserve": [reserve], "permit": [gang]}, cluster, log=log)
    state, p = CycleState(), pod()
    outcome = scheduling_cycle(fw, state, p, cluster.nodes, cluster.for_attempt())
    assert cluster.nodes.pods_by_node[0] != []  # assumed: later cycles see it
    task = asyncio.create_task(
        binding_cycle(fw, state, outcome.pod, "n1", cluster.for_attempt(), cluster.nodes)
    )
    assert fw.reject_waiting_pod(p.metadata.uid)
    status = await task
    assert (status.code, status.plugin) == (Code.UNSCHEDULABLE, "")
    assert status.message() == "0/1 nodes are available: 1 removed."
    assert log[-1] == "R.unreserve"
    assert cluster.nodes.pods_by_node[0] == []


async def test_wait_on_permit_times_out():
    cluster = fakes.cluster_of(["n1"])
    fw = fakes.framework(
        {"permit": [fakes.Permit("Gang", status=Status.wait(), timeout=0.02)]}, cluster
    )
    state = CycleState()
    outcome = scheduling_cycle(fw, state, pod(), cluster.nodes, cluster.for_attempt())
    status = await asyncio.wait_for(
        binding_cycle(fw, state, outcome.pod, "n1", cluster.for_attempt(), cluster.nodes), 5
    )
    assert status.plugin == "Gang"
    assert status.message() == (
        "0/1 nodes are available: 1 rejected due to timeout after waiting 20ms at plugin Gang."
    )


def test_waiting_pod_clock():
    now = [100.0]
    waiting = WaitingPod(pod(), {"A": 5, "B": 2000}, clock=lambda: now[0])
    assert waiting.timeout == 5
    assert not waiting.expire()
    waiting.allow("A")
    now[0] += 10
    assert not waiting.expire()  # A allowed; B (capped at 15 minutes) has not expired
    now[0] += 900
    assert waiting.expire()
    assert waiting.result is not None
    assert waiting.result.message() == "rejected due to timeout after waiting 15m0s at plugin B"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(5, "5s", id="5s"),
        pytest.param(1.5, "1.5s", id="1.5s"),
        pytest.param(600, "10m0s", id="10m"),
        pytest.param(3725, "1h2m5s", id="1h2m5s"),
        pytest.param(0.1, "100ms", id="100ms"),
        pytest.param(0, "0s", id="zero"),
    ],
)
def test_go_duration(seconds, text):
    assert go_duration(seconds) == text


# --------------------------------------------------------------------------- binding
@pytest.mark.parametrize(
    ("statuses", "expected", "bound_by"),
    [
        pytest.param([SKIP, SUCCESS, SUCCESS], Code.SUCCESS, ["B0", "B1"], id="skip-passes"),
        pytest.param([SKIP, SKIP], Code.SKIP, ["B0", "B1"], id="all-skip-is-skip"),
        pytest.param([Status.error("down"), SUCCESS], Code.ERROR, ["B0"], id="error-stops"),
    ],
)
async def test_bind_plugins(statuses, expected, bound_by):
    log = Log()
    binders = [fakes.Bind(f"B{i}", log, status) for i, status in enumerate(statuses)]
    fw = fakes.framework({"bind": binders})
    status = await fw.run_bind_plugins(CycleState(), pod(), "n1")
    assert status.code == expected
    assert log == [f"{name}.bind" for name in bound_by]
    if expected == Code.ERROR:
        assert (status.message(), status.plugin) == ('running Bind plugin "B0": down', "B0")


async def test_binding_cycle_all_skip_fails_and_unreserves():
    log = Log()
    cluster = fakes.cluster_of(["n1"])
    reserve = fakes.Reserve("R", log)
    fw = fakes.framework(
        {"reserve": [reserve], "bind": [fakes.Bind("Skipper", log, SKIP)]}, cluster, log=log
    )
    state = CycleState()
    outcome = scheduling_cycle(fw, state, pod(), cluster.nodes, cluster.for_attempt())
    status = await binding_cycle(fw, state, outcome.pod, "n1", cluster.for_attempt(), cluster.nodes)
    assert not status.is_success()
    assert log == ["R.reserve", "Skipper.bind", "R.unreserve"]
    assert cluster.nodes.pods_by_node[0] == []


async def test_binding_cycle_runs_pre_bind_bind_post_bind():
    log = Log()
    cluster = fakes.cluster_of(["n1"])
    fw = fakes.framework(
        {
            "pre_bind": [fakes.PreBind("Pre", log)],
            "bind": [fakes.Bind("B", log, cluster=cluster)],
            "post_bind": [fakes.PostBind("Post", log)],
        },
        cluster,
        log=log,
    )
    state, p = CycleState(), pod()
    outcome = scheduling_cycle(fw, state, p, cluster.nodes, cluster.for_attempt())
    assert (
        await binding_cycle(fw, state, outcome.pod, "n1", cluster.for_attempt(), cluster.nodes)
    ).is_success()
    assert log == ["Pre.pre_bind", "B.bind", "Post.post_bind"]
    assert cluster.bound[p.metadata.uid].spec.node_name == "n1"
    assert int(cluster.nodes.requested[0, cluster.nodes.resource_index["pods"]]) == 1


async def test_pre_bind_rejection_stops_binding():
    log = Log()
    cluster = fakes.cluster_of(["n1"])
    fw = fakes.framework(
        {"pre_bind": [fakes.PreBind("Pre", log, Status.unschedulable("volume"))]},
        cluster,
        log=log,
    )
    state = CycleState()
    outcome = scheduling_cycle(fw, state, pod(), cluster.nodes, cluster.for_attempt())
    status = await binding_cycle(fw, state, outcome.pod, "n1", cluster.for_attempt(), cluster.nodes)
    assert (status.code, status.plugin) == (Code.UNSCHEDULABLE, "Pre")
    assert "Bind.bind" not in log


def test_plugin_exception_becomes_its_error_status():
    class Exploding(fakes.Filter):
        def filter(self, state, pod, nodes, rows):
            raise ZeroDivisionError("division by zero")

    cluster = fakes.cluster_of(["n1"])
    fw = fakes.framework({"filter": [Exploding("X")]}, cluster)
    with pytest.raises(CycleError) as info:
        schedule(fw, cluster)
    assert str(info.value) == 'running "X" filter plugin: division by zero'
    assert info.value.status().plugin == "X"
