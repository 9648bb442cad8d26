"""The test builders produce the model objects they promise."""

from shared.models import (
    LabelSelector,
    NodeSelectorRequirement,
    Taint,
    Toleration,
    pod_requests,
)
from tests.builders import (
    label_selector,
    make_namespace,
    make_node,
    make_pdb,
    make_pod,
    make_pod_group,
    make_priority_class,
)

Gi = 1024**3


def test_make_pod_chain():
    pod = (
        make_pod("p")
        .namespace("ns")
        .req(cpu="1", memory="1Gi")
        .labels({"app": "web"}, tier="front")
        .node_selector(disk="ssd")
        .toleration("k", "v", "NoSchedule")
        .host_port(80)
        .priority(10)
        .node("n1")
        .obj()
    )
    assert pod.key == "ns/p"
    assert pod.metadata.labels == {"app": "web", "tier": "front"}
    assert pod.spec.node_selector == {"disk": "ssd"}
    assert pod.spec.tolerations == [
        Toleration(key="k", operator="Equal", value="v", effect="NoSchedule")
    ]
    assert [c.name for c in pod.spec.containers] == ["c0", "c1"]
    assert pod.spec.containers[1].ports[0].host_port == 80
    assert pod.spec.containers[1].ports[0].container_port == 80
    assert pod.spec.priority == 10
    assert pod.spec.node_name == "n1"
    assert pod_requests(pod) == {"cpu": 1000, "memory": Gi}


def test_toleration_without_value_is_exists():
    pod = make_pod("p").toleration("k").toleration().obj()
    assert pod.spec.tolerations == [
        Toleration(key="k", operator="Exists"),
        Toleration(operator="Exists"),
    ]


def test_make_pod_affinity_and_spread():
    pod = (
        make_pod("p")
        .node_affinity_in("zone", ["a", "b"])
        .preferred_node_affinity(5, ("disk", "In", ["ssd"]))
        .pod_affinity_exists("app", "kubernetes.io/hostname", anti=True)
        .pod_affinity_in("app", ["db"], "zone", weight=7)
        .spread_constraint(1, "zone", "DoNotSchedule", label_selector({"app": "web"}))
        .obj()
    )
    affinity = pod.spec.affinity
    assert affinity is not None
    assert affinity.node_affinity is not None
    required = affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert required is not None
    assert required.node_selector_terms[0].match_expressions == [
        NodeSelectorRequirement(key="zone", operator="In", values=["a", "b"])
    ]
    assert (
        affinity.node_affinity.preferred_during_scheduling_ignored_during_execution[0].weight == 5
    )
    anti = affinity.pod_anti_affinity
    assert anti is not None
    assert anti.required_during_scheduling_ignored_during_execution[0].topology_key == (
        "kubernetes.io/hostname"
    )
    assert affinity.pod_affinity is not None
    preferred = affinity.pod_affinity.preferred_during_scheduling_ignored_during_execution[0]
    assert preferred.weight == 7
    constraint = pod.spec.topology_spread_constraints[0]
    assert constraint.label_selector == LabelSelector(match_labels={"app": "web"})


def test_make_node_chain():
    node = (
        make_node("n1")
        .capacity(cpu="4", memory="32Gi", pods=110)
        .labels(zone="a")
        .taint("k", "v", "NoExecute")
        .image("nginx:1", 500, "docker.io/nginx:1")
        .obj()
    )
    assert node.metadata.namespace == ""
    assert node.status.capacity == {"cpu": 4000, "memory": 32 * Gi, "pods": 110}
    assert node.status.allocatable == node.status.capacity
    assert node.status.allocatable is not node.status.capacity
    assert node.metadata.labels == {"zone": "a"}
    assert node.spec.taints == [Taint(key="k", value="v", effect="NoExecute")]
    assert node.status.images[0].names == ["nginx:1", "docker.io/nginx:1"]


def test_make_node_allocatable_overrides():
    node = make_node("n").capacity(cpu="4").allocatable(cpu="3500m").obj()
    assert node.status.capacity == {"cpu": 4000}
    assert node.status.allocatable == {"cpu": 3500}


def test_other_builders():
    assert make_namespace("team", {"env": "prod"}).metadata.labels == {"env": "prod"}
    pc = make_priority_class("high", 1000, global_default=True)
    assert (pc.value, pc.global_default, pc.metadata.namespace) == (1000, True, "")
    pdb = make_pdb("pdb", label_selector({"app": "web"}), min_available="50%")
    assert pdb.spec.min_available == "50%"
    assert pdb.key == "default/pdb"
    group = make_pod_group("g", 3, schedule_timeout_seconds=60)
    assert (group.spec.min_member, group.spec.schedule_timeout_seconds) == (3, 60)
