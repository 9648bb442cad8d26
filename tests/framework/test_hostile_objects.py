"""Objects already in the store that validation would reject today (written before it, or
around it) must never stop a view or a cycle: a running pod requesting a resource no node
advertises, amounts beyond int64, an image of 2^64-1 bytes. Each is counted (clamped to
MAX_EXACT_AMOUNT where it is out of range) and scheduling goes on."""

from __future__ import annotations

import pytest

from scheduling.dryrun import run_dry_async
from scheduling.framework.columns import NodeColumns
from shared.models import Manifests, Node, Pod
from shared.models.quantity import MAX_EXACT_AMOUNT, bounded_amount
from shared.store.records import PodCharge, node_facts
from tests.builders import make_node, make_pod

GPU = "example.com/gpu"


def _node(name: str = "n1", extra: dict[str, int] | None = None) -> Node:
    node = make_node(name).capacity(cpu="4", memory="8Gi", pods=10).obj()
    node.status.allocatable.update(extra or {})
    return node


def _with_requests(pod: Pod, **amounts: int) -> Pod:
    """Set raw request amounts (past what a manifest may say: these are stored objects)."""
    if not pod.spec.containers:
        pod = make_pod(pod.metadata.name).uid(pod.metadata.uid).node(pod.spec.node_name).req().obj()
    pod.spec.containers[0].resources.requests.update(amounts)
    return pod


@pytest.mark.parametrize(
    ("value", "expected"),
    [(-5, 0), (0, 0), (7, 7), (MAX_EXACT_AMOUNT, MAX_EXACT_AMOUNT), (2**70, MAX_EXACT_AMOUNT)],
)
def test_bounded_amount(value: int, expected: int) -> None:
    assert bounded_amount(value) == expected


def test_a_running_pod_with_a_resource_no_node_has_is_counted() -> None:
    running = _with_requests(make_pod("r").uid("r").req(cpu="1").node("n1").obj(), **{GPU: 2})
    columns = NodeColumns([_node()], [running])
    col = columns.resource_index[GPU]
    assert columns.requested[0, col] == 2
    assert columns.allocatable[0, col] == 0
    # Later changes keep it: an update, a new node (a rebuild), a removal.
    columns.update_node(_node(extra={"cpu": 8000}))
    columns.add_node(_node("n2"))
    assert columns.requested[columns.index["n1"], col] == 2
    columns.remove_pod(running)
    assert columns.requested[:, col].tolist() == [0, 0]


def test_amounts_beyond_int64_are_clamped_everywhere() -> None:
    huge = 2**70
    node = _node(extra={GPU: huge})
    node.status.allocatable["memory"] = huge
    running = _with_requests(make_pod("r").uid("r").node("n1").obj(), memory=huge)
    columns = NodeColumns([node], [running])
    mem = columns.resource_index["memory"]
    assert columns.allocatable[0, mem] == MAX_EXACT_AMOUNT
    assert columns.requested[0, mem] == MAX_EXACT_AMOUNT
    # The reserve script gets the same clamped numbers (msgpack could not even carry 2^70).
    assert node_facts(node)["a"]["memory"] == MAX_EXACT_AMOUNT
    assert PodCharge.of(running).requests["memory"] == MAX_EXACT_AMOUNT


async def test_the_dry_run_schedules_around_hostile_objects() -> None:
    big_image = make_node("n2").capacity(cpu="4", memory="8Gi", pods=10).image("app:1", 2**64 - 1)
    manifests = Manifests(
        nodes=[_node(), big_image.obj(), _node("n3", {GPU: 2**70})],
        pods=[
            _with_requests(make_pod("odd").uid("odd").node("n1").obj(), **{"vendor.io/x": 3}),
            _with_requests(make_pod("greedy").uid("greedy").obj(), **{GPU: 1}),
            make_pod("plain").uid("plain").container("app:1").req(cpu="1").obj(),
        ],
    )
    report = await run_dry_async(manifests, None, seed=0)
    placed = {r.pod.split("/")[1]: r.node for r in report.pods}
    assert placed["greedy"] == "n3"
    assert placed["plain"] == "n2"  # ImageLocality still prefers the node with the image
