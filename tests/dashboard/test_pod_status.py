"""services.queue.pod_status: the reason class and message of a pod, from the store and the
queue."""

from __future__ import annotations

from dataclasses import replace

import pytest

from services.queue.pod_status import GangProgress, classify, pending_first, pod_rows
from services.queue.views import PendingPod
from shared.models import POD_GROUP_LABEL, Pod
from shared.store import HeldReservation, Snapshot
from tests.builders import make_pod, make_pod_group

FIT_ERROR = "0/3 nodes are available: 3 Insufficient cpu."
QUEUED = PendingPod(
    tenant="team-a",
    key="team-a/p",
    uid="u1",
    queue="active",
    attempts=0,
    priority=0,
    timestamp=1.0,
    initial_attempt_timestamp=1.0,
)
POD = make_pod("p").namespace("team-a").obj()


def queued(**changes: object) -> PendingPod:
    return replace(QUEUED, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pod", "entry", "served", "gang", "reserved", "want"),
    [
        pytest.param(
            make_pod("p").node("n1").obj(),
            None,
            True,
            None,
            False,
            ("bound", "bound to n1"),
            id="bound",
        ),
        pytest.param(
            make_pod("p").scheduler_name("other").obj(),
            None,
            False,
            None,
            False,
            ("skipped", 'profile not found for scheduler name "other"'),
            id="skipped",
        ),
        pytest.param(POD, None, True, None, False, ("new", "not in the queue yet"), id="new"),
        pytest.param(
            make_pod("p").scheduling_gates("a", "b").obj(),
            queued(queue="gated"),
            True,
            None,
            False,
            ("gated", "waiting for scheduling gates: a, b"),
            id="gated",
        ),
        pytest.param(
            POD,
            # As services/queue/quota/admission.py keeps it: gated, failed plugin "Quota".
            queued(queue="gated", message="cq a: no room", unschedulable_plugins=("Quota",)),
            True,
            None,
            False,
            ("quota", "cq a: no room"),
            id="quota",
        ),
        pytest.param(
            POD,
            queued(queue="unschedulable", message=FIT_ERROR, unschedulable_plugins=("Fit",)),
            True,
            None,
            False,
            ("unschedulable", FIT_ERROR),
            id="unschedulable: the FitError",
        ),
        pytest.param(
            POD,
            queued(
                queue="backoff",
                message=FIT_ERROR,
                unschedulable_plugins=("Fit",),
                backoff_expires_at=1_700_000_000.0,
            ),
            True,
            None,
            False,
            ("backoff", f"backoff until 2023-11-14T22:13:20Z: {FIT_ERROR}"),
            id="backoff until T",
        ),
        pytest.param(
            POD,
            queued(
                queue="backoff",
                message="node n1 taken",
                conflicts=2,
                backoff_expires_at=1_700_000_000.0,
            ),
            True,
            None,
            False,
            ("conflict", "conflict: node n1 taken; backoff until 2023-11-14T22:13:20Z"),
            id="conflict, backing off",
        ),
        pytest.param(
            POD,
            queued(queue="active", message="node n1 taken", conflicts=1),
            True,
            None,
            False,
            ("conflict", "conflict: node n1 taken"),
            id="conflict, straight back to active",
        ),
        pytest.param(
            make_pod("p").label(POD_GROUP_LABEL, "g").obj(),
            queued(queue="inflight", attempts=1),
            True,
            GangProgress(4, 1),
            True,
            ("gang", "gang default/g waiting for 3 more (1 of minMember 4 placed)"),
            id="gang: waiting at Permit",
        ),
        pytest.param(
            make_pod("p").label(POD_GROUP_LABEL, "g").obj(),
            queued(queue="unschedulable", unschedulable_plugins=("Coscheduling",), message="x"),
            True,
            GangProgress(2, 0),
            False,
            ("gang", "gang default/g waiting for 2 more (0 of minMember 2 placed)"),
            id="gang: too few members",
        ),
        pytest.param(
            make_pod("p").label(POD_GROUP_LABEL, "g").obj(),
            queued(queue="inflight", attempts=1),
            True,
            GangProgress(2, 2),
            True,
            ("scheduling", "attempt 1 in flight"),
            id="gang complete: just scheduling",
        ),
        pytest.param(
            POD,
            queued(),
            True,
            None,
            False,
            ("queued", "waiting in the active queue"),
            id="queued",
        ),
    ],
)
def test_classify(
    pod: Pod,
    entry: PendingPod | None,
    served: bool,
    gang: GangProgress | None,
    reserved: bool,
    want: tuple[str, str],
) -> None:
    assert classify(pod, entry, served=served, gang=gang, reserved=reserved) == want


def test_rows_join_the_store_and_the_queue() -> None:
    group = make_pod_group("g", min_member=3, namespace="team-a")
    pods = [
        make_pod("b-bound").namespace("team-a").node("n1").obj(),
        make_pod("a-big").namespace("team-a").obj(),
        make_pod("g-1").namespace("team-a").label(POD_GROUP_LABEL, "g").node("n1").obj(),
        make_pod("g-2").namespace("team-a").label(POD_GROUP_LABEL, "g").obj(),
    ]
    snapshot = Snapshot(
        resource_version=9,
        objects={"Pod": list(pods), "PodGroup": [group]},
        reservations=[HeldReservation("team-a/g-2", "u", "n1", "binder-0")],
    )
    pending = [
        queued(key="team-a/a-big", queue="unschedulable", message=FIT_ERROR, attempts=1),
        queued(key="team-a/g-2", queue="inflight", attempts=1),
    ]
    rows = pod_rows(snapshot, pending, {"default-scheduler"})
    assert [(r.name, r.status, r.reason) for r in rows] == [
        ("a-big", "Pending", "unschedulable"),
        ("b-bound", "Bound", "bound"),
        ("g-1", "Bound", "bound"),
        ("g-2", "Pending", "gang"),
    ]
    assert rows[3].reason_message == ("gang team-a/g waiting for 1 more (2 of minMember 3 placed)")
    assert [r.name for r in pending_first(rows)] == ["g-2", "a-big", "b-bound", "g-1"]
