"""Fluent test builders, like upstream's st.MakePod() / st.MakeNode().

    make_pod("p").namespace("ns").req(cpu="1", memory="1Gi").node("n1").obj()
    make_node("n1").capacity(cpu="4", memory="32Gi", pods=110).label("zone", "a").obj()

Quantities are given as Kubernetes strings or numbers and stored with the models' integer
convention (cpu in millicores). Resource names that are not identifiers go in a dict:
``req({"nvidia.com/gpu": 1})``. Each ``req``/``lim``/``init_req``/``sidecar_req`` call adds one
container, like upstream.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.models import (
    Affinity,
    Container,
    ContainerImage,
    ContainerPort,
    LabelSelector,
    LabelSelectorRequirement,
    Namespace,
    Node,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectMeta,
    OwnerReference,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
    PodDisruptionBudget,
    PodDisruptionBudgetSpec,
    PodGroup,
    PodGroupSpec,
    PodSchedulingGate,
    PreferredSchedulingTerm,
    PriorityClass,
    ReplicaSet,
    ReplicaSetSpec,
    ReplicationController,
    ReplicationControllerSpec,
    ResourceRequirements,
    Service,
    ServicePort,
    ServiceSpec,
    StatefulSet,
    StatefulSetSpec,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
    cluster_meta,
    resource_list,
)
from shared.models.quantity import QuantityInput

Resources = Mapping[str, QuantityInput]


def _resources(resources: Resources | None, extra: Mapping[str, QuantityInput]) -> dict[str, int]:
    merged: dict[str, QuantityInput] = dict(resources or {})
    merged.update(extra)
    return resource_list(merged)


def label_selector(
    match_labels: Mapping[str, str] | None = None,
    *expressions: tuple[str, str, list[str]],
) -> LabelSelector:
    """label_selector({"app": "web"}, ("tier", "In", ["a", "b"]))"""
    return LabelSelector(
        match_labels=dict(match_labels or {}),
        match_expressions=[
            LabelSelectorRequirement(key=k, operator=op, values=list(v)) for k, op, v in expressions
        ],
    )


class PodBuilder:
    def __init__(self, name: str) -> None:
        self._pod = Pod(metadata=ObjectMeta(name=name))
        self._containers = 0

    def obj(self) -> Pod:
        return self._pod

    # metadata
    def name(self, name: str) -> PodBuilder:
        self._pod.metadata.name = name
        return self

    def namespace(self, namespace: str) -> PodBuilder:
        self._pod.metadata.namespace = namespace
        return self

    def uid(self, uid: str) -> PodBuilder:
        self._pod.metadata.uid = uid
        return self

    def labels(self, labels: Mapping[str, str] | None = None, **kw: str) -> PodBuilder:
        self._pod.metadata.labels.update(labels or {})
        self._pod.metadata.labels.update(kw)
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._pod.metadata.labels[key] = value
        return self

    def annotation(self, key: str, value: str) -> PodBuilder:
        self._pod.metadata.annotations[key] = value
        return self

    def created(self, timestamp: float) -> PodBuilder:
        self._pod.metadata.creation_timestamp = timestamp
        return self

    def terminating(self, timestamp: float = 1.0) -> PodBuilder:
        self._pod.metadata.deletion_timestamp = timestamp
        return self

    def owner(self, kind: str, name: str, uid: str = "", controller: bool = True) -> PodBuilder:
        self._pod.metadata.owner_references.append(
            OwnerReference(kind=kind, name=name, uid=uid or f"{kind}-{name}", controller=controller)
        )
        return self

    def controlled_by(self, api_version: str, kind: str, name: str) -> PodBuilder:
        """An ownerReference with controller: true, as a controller writes it."""
        self._pod.metadata.owner_references.append(
            OwnerReference(
                api_version=api_version, kind=kind, name=name, uid=f"{kind}-{name}", controller=True
            )
        )
        return self

    # containers
    def _add(self, container: Container, init: bool = False) -> PodBuilder:
        if not container.name:
            container.name = f"c{self._containers}"
        self._containers += 1
        target = self._pod.spec.init_containers if init else self._pod.spec.containers
        target.append(container)
        return self

    def container(self, image: str = "pause", name: str = "") -> PodBuilder:
        return self._add(Container(name=name, image=image))

    def req(self, resources: Resources | None = None, **kw: QuantityInput) -> PodBuilder:
        """Add a container requesting these resources."""
        requests = ResourceRequirements(requests=_resources(resources, kw))
        return self._add(Container(resources=requests))

    def req_lim(self, requests: Resources, limits: Resources) -> PodBuilder:
        """Add a container with both requests and limits."""
        res = ResourceRequirements(requests=_resources(requests, {}), limits=_resources(limits, {}))
        return self._add(Container(resources=res))

    def lim(self, resources: Resources | None = None, **kw: QuantityInput) -> PodBuilder:
        """Add a container with limits only (no API defaulting: requests stay empty)."""
        limits = ResourceRequirements(limits=_resources(resources, kw))
        return self._add(Container(resources=limits))

    def init_req(self, resources: Resources | None = None, **kw: QuantityInput) -> PodBuilder:
        """Add a regular (non-restartable) init container."""
        requests = ResourceRequirements(requests=_resources(resources, kw))
        return self._add(Container(resources=requests), init=True)

    def sidecar_req(self, resources: Resources | None = None, **kw: QuantityInput) -> PodBuilder:
        """Add a restartable init container (restartPolicy: Always)."""
        requests = ResourceRequirements(requests=_resources(resources, kw))
        return self._add(Container(resources=requests, restart_policy="Always"), init=True)

    def overhead(self, resources: Resources | None = None, **kw: QuantityInput) -> PodBuilder:
        self._pod.spec.overhead = _resources(resources, kw)
        return self

    def host_port(
        self, port: int, protocol: str = "TCP", host_ip: str = "", container_port: int = 0
    ) -> PodBuilder:
        """Add a container exposing one host port."""
        spec = ContainerPort(
            container_port=container_port or port,
            host_port=port,
            host_ip=host_ip,
            protocol=protocol,
        )
        return self._add(Container(ports=[spec]))

    def container_port(self, port: int, protocol: str = "TCP") -> PodBuilder:
        return self._add(Container(ports=[ContainerPort(container_port=port, protocol=protocol)]))

    # scheduling
    def node_selector(self, selector: Mapping[str, str] | None = None, **kw: str) -> PodBuilder:
        self._pod.spec.node_selector.update(selector or {})
        self._pod.spec.node_selector.update(kw)
        return self

    def _node_affinity(self) -> NodeAffinity:
        affinity = self._affinity()
        if affinity.node_affinity is None:
            affinity.node_affinity = NodeAffinity()
        return affinity.node_affinity

    def _affinity(self) -> Affinity:
        if self._pod.spec.affinity is None:
            self._pod.spec.affinity = Affinity()
        return self._pod.spec.affinity

    def node_affinity_term(self, *requirements: tuple[str, str, list[str]]) -> PodBuilder:
        """Add one required node selector term (ORed with earlier terms)."""
        node_affinity = self._node_affinity()
        required = node_affinity.required_during_scheduling_ignored_during_execution
        if required is None:
            required = NodeSelector()
            node_affinity.required_during_scheduling_ignored_during_execution = required
        required.node_selector_terms.append(_term(requirements))
        return self

    def node_affinity_in(self, key: str, values: list[str]) -> PodBuilder:
        return self.node_affinity_term((key, "In", values))

    def node_affinity_not_in(self, key: str, values: list[str]) -> PodBuilder:
        return self.node_affinity_term((key, "NotIn", values))

    def preferred_node_affinity(
        self, weight: int, *requirements: tuple[str, str, list[str]]
    ) -> PodBuilder:
        self._node_affinity().preferred_during_scheduling_ignored_during_execution.append(
            PreferredSchedulingTerm(weight=weight, preference=_term(requirements))
        )
        return self

    def _pod_affinity(self, anti: bool) -> PodAffinity | PodAntiAffinity:
        affinity = self._affinity()
        if anti:
            if affinity.pod_anti_affinity is None:
                affinity.pod_anti_affinity = PodAntiAffinity()
            return affinity.pod_anti_affinity
        if affinity.pod_affinity is None:
            affinity.pod_affinity = PodAffinity()
        return affinity.pod_affinity

    def pod_affinity(
        self,
        topology_key: str,
        selector: LabelSelector | None,
        *,
        anti: bool = False,
        weight: int = 0,
        namespaces: list[str] | None = None,
        namespace_selector: LabelSelector | None = None,
    ) -> PodBuilder:
        """Add a pod (anti-)affinity term: required when weight is 0, preferred otherwise."""
        term = PodAffinityTerm(
            label_selector=selector,
            topology_key=topology_key,
            namespaces=list(namespaces or []),
            namespace_selector=namespace_selector,
        )
        target = self._pod_affinity(anti)
        if weight:
            target.preferred_during_scheduling_ignored_during_execution.append(
                WeightedPodAffinityTerm(weight=weight, pod_affinity_term=term)
            )
        else:
            target.required_during_scheduling_ignored_during_execution.append(term)
        return self

    def pod_affinity_exists(
        self, key: str, topology_key: str, *, anti: bool = False, weight: int = 0
    ) -> PodBuilder:
        """Upstream PodAffinityExists / PodAntiAffinityExists."""
        selector = label_selector(None, (key, "Exists", []))
        return self.pod_affinity(topology_key, selector, anti=anti, weight=weight)

    def pod_affinity_in(
        self, key: str, values: list[str], topology_key: str, *, anti: bool = False, weight: int = 0
    ) -> PodBuilder:
        selector = label_selector(None, (key, "In", values))
        return self.pod_affinity(topology_key, selector, anti=anti, weight=weight)

    def spread_constraint(
        self,
        max_skew: int,
        topology_key: str,
        when_unsatisfiable: str = "DoNotSchedule",
        selector: LabelSelector | None = None,
        *,
        min_domains: int | None = None,
        node_affinity_policy: str | None = None,
        node_taints_policy: str | None = None,
        match_label_keys: list[str] | None = None,
    ) -> PodBuilder:
        self._pod.spec.topology_spread_constraints.append(
            TopologySpreadConstraint(
                max_skew=max_skew,
                topology_key=topology_key,
                when_unsatisfiable=when_unsatisfiable,
                label_selector=selector,
                min_domains=min_domains,
                node_affinity_policy=node_affinity_policy,
                node_taints_policy=node_taints_policy,
                match_label_keys=list(match_label_keys or []),
            )
        )
        return self

    def toleration(
        self,
        key: str = "",
        value: str = "",
        effect: str = "",
        operator: str = "",
        seconds: int | None = None,
    ) -> PodBuilder:
        """Operator defaults to Exists when no value is given, else Equal."""
        op = operator or ("Equal" if value else "Exists")
        self._pod.spec.tolerations.append(
            Toleration(key=key, operator=op, value=value, effect=effect, toleration_seconds=seconds)
        )
        return self

    def scheduling_gates(self, *names: str) -> PodBuilder:
        self._pod.spec.scheduling_gates.extend(PodSchedulingGate(name=n) for n in names)
        return self

    def priority(self, value: int) -> PodBuilder:
        self._pod.spec.priority = value
        return self

    def priority_class(self, name: str) -> PodBuilder:
        self._pod.spec.priority_class_name = name
        return self

    def preemption_policy(self, policy: str) -> PodBuilder:
        self._pod.spec.preemption_policy = policy
        return self

    def scheduler_name(self, name: str) -> PodBuilder:
        self._pod.spec.scheduler_name = name
        return self

    def node(self, name: str) -> PodBuilder:
        self._pod.spec.node_name = name
        return self

    def grace_period(self, seconds: int) -> PodBuilder:
        self._pod.spec.termination_grace_period_seconds = seconds
        return self

    # status
    def nominated_node_name(self, name: str) -> PodBuilder:
        self._pod.status.nominated_node_name = name
        return self

    def phase(self, phase: str) -> PodBuilder:
        self._pod.status.phase = phase
        return self

    def start_time(self, timestamp: float) -> PodBuilder:
        self._pod.status.start_time = timestamp
        return self


def _term(requirements: tuple[tuple[str, str, list[str]], ...]) -> NodeSelectorTerm:
    exprs = [
        NodeSelectorRequirement(key=k, operator=op, values=list(v)) for k, op, v in requirements
    ]
    return NodeSelectorTerm(match_expressions=exprs)


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._node = Node(metadata=cluster_meta(name))

    def obj(self) -> Node:
        return self._node

    def uid(self, uid: str) -> NodeBuilder:
        self._node.metadata.uid = uid
        return self

    def labels(self, labels: Mapping[str, str] | None = None, **kw: str) -> NodeBuilder:
        self._node.metadata.labels.update(labels or {})
        self._node.metadata.labels.update(kw)
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._node.metadata.labels[key] = value
        return self

    def capacity(self, resources: Resources | None = None, **kw: QuantityInput) -> NodeBuilder:
        """Set capacity and allocatable (the API defaults allocatable to capacity)."""
        values = _resources(resources, kw)
        self._node.status.capacity = dict(values)
        self._node.status.allocatable = dict(values)
        return self

    def allocatable(self, resources: Resources | None = None, **kw: QuantityInput) -> NodeBuilder:
        self._node.status.allocatable = _resources(resources, kw)
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        self._node.spec.taints.append(Taint(key=key, value=value, effect=effect))
        return self

    def unschedulable(self, value: bool = True) -> NodeBuilder:
        self._node.spec.unschedulable = value
        return self

    def image(self, name: str, size_bytes: int, *aliases: str) -> NodeBuilder:
        self._node.status.images.append(
            ContainerImage(names=[name, *aliases], size_bytes=size_bytes)
        )
        return self


def make_pod(name: str = "pod") -> PodBuilder:
    return PodBuilder(name)


def make_node(name: str = "node") -> NodeBuilder:
    return NodeBuilder(name)


def make_namespace(name: str, labels: Mapping[str, str] | None = None) -> Namespace:
    meta = cluster_meta(name)
    meta.labels.update(labels or {})
    return Namespace(metadata=meta)


def make_priority_class(
    name: str,
    value: int,
    *,
    global_default: bool = False,
    preemption_policy: str = "PreemptLowerPriority",
) -> PriorityClass:
    return PriorityClass(
        metadata=cluster_meta(name),
        value=value,
        global_default=global_default,
        preemption_policy=preemption_policy,
    )


def make_pdb(
    name: str,
    selector: LabelSelector | None,
    *,
    namespace: str = "default",
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    disruptions_allowed: int = 0,
) -> PodDisruptionBudget:
    pdb = PodDisruptionBudget(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=PodDisruptionBudgetSpec(
            min_available=min_available, max_unavailable=max_unavailable, selector=selector
        ),
    )
    pdb.status.disruptions_allowed = disruptions_allowed
    return pdb


def make_pod_group(
    name: str,
    min_member: int,
    *,
    namespace: str = "default",
    schedule_timeout_seconds: int | None = None,
) -> PodGroup:
    return PodGroup(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=PodGroupSpec(min_member=min_member, schedule_timeout_seconds=schedule_timeout_seconds),
    )


def make_service(
    name: str,
    selector: Mapping[str, str] | None,
    *,
    namespace: str = "default",
    port: int = 80,
) -> Service:
    """A ClusterIP Service with one TCP port (targetPort defaulted, as the API server does)."""
    return Service(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=ServiceSpec(
            selector=dict(selector or {}), ports=[ServicePort(port=port, target_port=port)]
        ),
    )


def make_replication_controller(
    name: str, selector: Mapping[str, str], *, namespace: str = "default", replicas: int = 1
) -> ReplicationController:
    return ReplicationController(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=ReplicationControllerSpec(selector=dict(selector), replicas=replicas),
    )


def make_replica_set(
    name: str, selector: LabelSelector, *, namespace: str = "default", replicas: int = 1
) -> ReplicaSet:
    return ReplicaSet(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=ReplicaSetSpec(selector=selector, replicas=replicas),
    )


def make_stateful_set(
    name: str,
    selector: LabelSelector,
    *,
    namespace: str = "default",
    replicas: int = 1,
    service_name: str = "",
) -> StatefulSet:
    return StatefulSet(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=StatefulSetSpec(selector=selector, replicas=replicas, service_name=service_name),
    )
