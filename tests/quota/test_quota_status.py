"""services.queue.quota.status: ClusterQueue usage counted from bound pods (LocalQueue, flavor by
the
node's labels, covered resources only), borrowed, lent and share, pending by reason."""

from __future__ import annotations

from typing import Any

import pytest

from services.queue.pod_status import PodRow
from services.queue.quota.status import ClusterQueueStatus, cluster_queue_statuses
from shared.models import Node, Pod, load_manifest_text
from shared.models.kueue import QUEUE_NAME_LABEL, ClusterQueue, LocalQueue, ResourceFlavor
from tests.builders import make_node, make_pod

FLAVORS = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: on-demand}
spec: {nodeLabels: {instance: on-demand}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: spot}
spec: {nodeLabels: {instance: spot}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
"""


def cq(
    name: str,
    cohort: str = "",
    *,
    cpu: dict[str, Any] | None = None,
    flavors: tuple[str, ...] = ("default",),
    covered: tuple[str, ...] = ("cpu",),
    weight: Any = 1,
    **extra: Any,
) -> str:
    """A ClusterQueue with one resource group: each flavor gets `cpu`'s limits for cpu and
    `extra[resource]` (nominal) for the other covered resources."""
    limits = cpu or {"nominalQuota": 10}
    fields = ", ".join(f"{k}: {v}" for k, v in limits.items())
    flavor_text = ""
    for flavor in flavors:
        resources = [f"{{name: cpu, {fields}}}"] + [
            f"{{name: {r}, nominalQuota: {extra[r]}}}" for r in covered if r != "cpu"
        ]
        flavor_text += f"    - name: {flavor}\n      resources: [{', '.join(resources)}]\n"
    return f"""---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  cohort: "{cohort}"
  fairSharing: {{weight: {weight}}}
  resourceGroups:
  - coveredResources: [{", ".join(covered)}]
    flavors:
{flavor_text}"""


def lq(namespace: str, name: str, cluster_queue: str) -> str:
    return f"""---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: {name}, namespace: {namespace}}}
spec: {{clusterQueue: {cluster_queue}}}
"""


NODES = [
    make_node("od-1").label("instance", "on-demand").obj(),
    make_node("spot-1").label("instance", "spot").obj(),
    make_node("plain-1").obj(),
]


def pod(name: str, node: str = "", namespace: str = "team-a", queue: str = "lq", **req: Any) -> Pod:
    builder = make_pod(name).namespace(namespace).req(**(req or {"cpu": "1"}))
    if queue:
        builder = builder.label(QUEUE_NAME_LABEL, queue)
    if node:
        builder = builder.node(node)
    return builder.obj()


def statuses(
    text: str, pods: list[Pod], rows: list[PodRow] | None = None, nodes: list[Node] = NODES
) -> dict[str, ClusterQueueStatus]:
    objects = load_manifest_text(FLAVORS + text).queue_objects
    found = cluster_queue_statuses(
        [o for o in objects if isinstance(o, ClusterQueue)],
        [o for o in objects if isinstance(o, LocalQueue)],
        [o for o in objects if isinstance(o, ResourceFlavor)],
        nodes,
        pods,
        rows or [],
    )
    return {s.name: s for s in found}


def usage(status: ClusterQueueStatus) -> dict[str, int]:
    return {f"{r.flavor}/{r.resource}": r.usage for r in status.resources}


@pytest.mark.parametrize(
    ("text", "pods", "want"),
    [
        pytest.param(
            cq("a") + lq("team-a", "lq", "a"),
            [pod("p1", "plain-1", cpu="2"), pod("p2", "plain-1", cpu="500m")],
            {"a": {"default/cpu": 2500}},
            id="bound pods of its LocalQueue count, in milli-CPU",
        ),
        pytest.param(
            cq("a") + lq("team-a", "lq", "a"),
            [
                pod("pending", cpu="4"),
                pod("no-label", "plain-1", queue=""),
                pod("other-ns", "plain-1", namespace="team-b"),
                pod("unknown-lq", "plain-1", queue="nope"),
            ],
            {"a": {"default/cpu": 0}},
            id="pending, unlabelled, other namespace, unknown LocalQueue: nothing",
        ),
        pytest.param(
            cq("a", flavors=("on-demand", "spot")) + lq("team-a", "lq", "a"),
            [pod("p1", "spot-1", cpu="3"), pod("p2", "od-1", cpu="1")],
            {"a": {"on-demand/cpu": 1000, "spot/cpu": 3000}},
            id="the flavor whose nodeLabels match the pod's node",
        ),
        pytest.param(
            cq("a", flavors=("on-demand", "spot")) + lq("team-a", "lq", "a"),
            [pod("p1", "plain-1", cpu="2")],
            {"a": {"on-demand/cpu": 2000, "spot/cpu": 0}},
            id="no flavor matches the node: the first flavor",
        ),
        pytest.param(
            cq("a", covered=("cpu", "pods"), pods=10) + lq("team-a", "lq", "a"),
            [pod("p1", "plain-1", cpu="1", memory="1Gi"), pod("p2", "plain-1", cpu="1")],
            {"a": {"default/cpu": 2000, "default/pods": 2}},
            id="covered resources only (memory is not), one pods each",
        ),
        pytest.param(
            cq("a") + cq("b") + lq("team-a", "lq", "a") + lq("team-b", "lq", "b"),
            [pod("p1", "plain-1", cpu="1"), pod("p2", "plain-1", namespace="team-b", cpu="3")],
            {"a": {"default/cpu": 1000}, "b": {"default/cpu": 3000}},
            id="the same LocalQueue name in two namespaces: two ClusterQueues",
        ),
    ],
)
def test_usage_is_counted_from_bound_pods(
    text: str, pods: list[Pod], want: dict[str, dict[str, int]]
) -> None:
    assert {name: usage(s) for name, s in statuses(text, pods).items()} == want


def _cohort_of_three(**cores: int) -> tuple[str, list[Pod]]:
    text = (
        cq("a", "c", cpu={"nominalQuota": 4})
        + cq("b", "c", cpu={"nominalQuota": 6})
        + cq("d", "c", cpu={"nominalQuota": 3, "lendingLimit": 1})
    )
    pods = []
    for name in cores:
        text += lq(f"ns-{name}", "lq", name)
        pods.append(pod(f"p-{name}", "plain-1", namespace=f"ns-{name}", cpu=str(cores[name])))
    return text, pods


@pytest.mark.parametrize(
    ("cores", "want"),
    [
        pytest.param(
            {"a": 4},
            {"a": (0, 0, 0), "b": (0, 0, 0), "d": (0, 0, 0)},
            id="within nominal: nothing borrowed, nothing lent",
        ),
        pytest.param(
            {"a": 7},
            # a borrows 3; idle lendable: b 6, d 1 (lendingLimit): 3*6/7 = 2.57, 3*1/7 = 0.43
            {"a": (3000, 0, 272), "b": (0, 2571, 0), "d": (0, 429, 0)},
            id="a borrows 3: lent in proportion to idle lendable quota",
        ),
        pytest.param(
            {"a": 11},
            # a borrows 7 = all that is idle and lendable (b 6, d 1); cohort quota 4+6+1 = 11
            {"a": (7000, 0, 636), "b": (0, 6000, 0), "d": (0, 1000, 0)},
            id="a borrows everything b and d may lend",
        ),
        pytest.param(
            {"a": 6, "b": 5},
            # a borrows 2; idle lendable: b 1, d 1
            {"a": (2000, 0, 181), "b": (0, 1000, 0), "d": (0, 1000, 0)},
            id="b uses most of its own: the rest is lent",
        ),
    ],
)
def test_borrowed_lent_and_share_in_a_cohort(
    cores: dict[str, int], want: dict[str, tuple[int, int, int]]
) -> None:
    text, pods = _cohort_of_three(**cores)
    got = statuses(text, pods)
    assert {
        name: (s.resources[0].borrowed, s.resources[0].lent, s.share) for name, s in got.items()
    } == want
    borrowed = sum(s.resources[0].borrowed for s in got.values())
    assert sum(s.resources[0].lent for s in got.values()) == borrowed


def test_status_fields_and_pending_by_reason() -> None:
    text = (
        cq("a", "c", cpu={"nominalQuota": 4, "borrowingLimit": 2, "lendingLimit": 1}, weight=2)
        + lq("team-a", "lq", "a")
        + lq("team-a", "other", "a")
    )
    rows = [
        PodRow("team-a", "p1", "Pending", reason="unschedulable", cluster_queue="a"),
        PodRow("team-a", "p2", "Pending", reason="unschedulable", cluster_queue="a"),
        PodRow("team-a", "p3", "Pending", reason="quota", cluster_queue="a"),
        PodRow("team-a", "p4", "Bound", reason="bound", cluster_queue="a"),
        PodRow("team-b", "p5", "Pending", reason="quota", cluster_queue="zzz"),
    ]
    (status,) = statuses(text, [pod("p4", "plain-1", cpu="1")], rows).values()
    assert status.to_json() == {
        "name": "a",
        "cohort": "c",
        "weight": "2",
        "share": 0,
        "resources": [
            {
                "flavor": "default",
                "resource": "cpu",
                "nominal": 4000,
                "borrowingLimit": 2000,
                "lendingLimit": 1000,
                "usage": 1000,
                "borrowed": 0,
                "lent": 0,
                "reserved": 0,
            }
        ],
        "admittedPods": 1,
        "pending": {"quota": 1, "unschedulable": 2},
        "pendingTotal": 3,
        "localQueues": ["team-a/lq", "team-a/other"],
    }
