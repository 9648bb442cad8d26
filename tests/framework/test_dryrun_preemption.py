"""`berth schedule` preemption around the decision itself: PodDisruptionBudget statuses computed
from the pods (manifests carry none) and nominations of lower-priority pods cleared after a
preemption (upstream prepareCandidate)."""

from __future__ import annotations

from scheduling.dryrun import SCHEDULED, run_dry
from shared.models import Node
from shared.models.manifest import Manifests, load_manifest_text
from tests.builders import make_node, make_pod, make_priority_class

CLASSES = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 1
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: guarded}
value: 2
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: medium}
value: 5
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 100
"""

PDB = """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: foo, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: foo}}
"""


def _node(name: str) -> str:
    return f"""
apiVersion: v1
kind: Node
metadata: {{name: {name}}}
status: {{capacity: {{cpu: "1", memory: 4Gi, pods: "10"}}}}
"""


def _pod(name: str, priority_class: str, node: str = "", app: str = "") -> str:
    labels = f", labels: {{app: {app}}}" if app else ""
    node_name = f"\n  nodeName: {node}" if node else ""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}{labels}}}
spec:{node_name}
  priorityClassName: {priority_class}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def test_pdb_status_is_computed_before_the_first_pass_and_after_victims_are_deleted() -> None:
    # Three full one-cpu nodes; the budget (minAvailable 1) covers foo-a (n1) and foo-b (n3):
    # two healthy pods, one disruption allowed. The YAML gives it no status.
    #   vip1: every node is a candidate without a violation, so the lowest victim priority
    #         wins: n1 (foo-a, priority 1). With the status left empty, evicting foo-a or
    #         foo-b would count as a violation and vip1 would take n2 instead.
    #   vip2: foo-a is gone, the budget allows no more disruptions: n3 (foo-b, priority 2)
    #         now violates it, so n2 (other, priority 5) wins. With the status not
    #         recomputed after the deletion, vip2 would take n3.
    documents = [
        CLASSES,
        PDB,
        _node("n1"),
        _node("n2"),
        _node("n3"),
        _pod("foo-a", "low", "n1", "foo"),
        _pod("other", "medium", "n2", "bar"),
        _pod("foo-b", "guarded", "n3", "foo"),
        _pod("vip1", "high"),
        _pod("vip2", "high"),
    ]
    manifests = load_manifest_text("---".join(documents))
    assert manifests.pod_disruption_budgets[0].status.disruptions_allowed == 0
    report = run_dry(manifests, seed=1)
    assert [(p.pod, p.status, p.node, p.nominated_node, p.victims) for p in report.pods] == [
        ("default/vip1", SCHEDULED, "n1", "n1", ["default/foo-a"]),
        ("default/vip2", SCHEDULED, "n2", "n2", ["default/other"]),
    ]
    status = manifests.pod_disruption_budgets[0].status
    # After the run: foo-b and nothing else healthy under the budget.
    assert (status.current_healthy, status.desired_healthy, status.disruptions_allowed) == (
        1,
        1,
        0,
    )


def node(name: str, cpu: str, **labels: str) -> Node:
    return make_node(name).capacity(cpu=cpu, memory="16Gi", pods=110).labels(labels).obj()


def test_preempting_clears_lower_priority_nominations_on_that_node() -> None:
    # Pass 1: high's required affinity (to app=anchor, same zone) matches no pod yet, so it
    # is unresolvable; anchor lands on n0; mid preempts w on n1 and is nominated there.
    # Pass 2: high no longer fits n1 beside v (mid's lower-priority nomination holds no room
    # against it) and preempts v there: mid, a lower-priority pod nominated to n1, loses its
    # nomination (it then fits n1 beside high's nomination and is placed).
    manifests = Manifests(
        nodes=[node("n0", "1", zone="z", host="n0"), node("n1", "3", zone="z", host="n1")],
        pods=[
            make_pod("v").priority_class("p2").req(cpu="2").node("n1").obj(),
            make_pod("w").priority_class("p1").req(cpu="1").node("n1").obj(),
            make_pod("high")
            .priority_class("p100")
            .req(cpu="2")
            .pod_affinity_in("app", ["anchor"], "zone")
            .obj(),
            make_pod("anchor")
            .priority_class("p50")
            .label("app", "anchor")
            .req(cpu="1")
            .node_selector(host="n0")
            .obj(),
            make_pod("mid").priority_class("p10").req(cpu="1").node_selector(host="n1").obj(),
        ],
        priority_classes=[make_priority_class(f"p{value}", value) for value in (1, 2, 10, 50, 100)],
    )
    report = run_dry(manifests, seed=1)
    assert [(p.pod, p.status, p.node, p.nominated_node, p.victims) for p in report.pods] == [
        ("default/high", SCHEDULED, "n1", "n1", ["default/v"]),
        ("default/anchor", SCHEDULED, "n0", None, []),
        ("default/mid", SCHEDULED, "n1", None, ["default/w"]),
    ]
    assert report.passes == 3
