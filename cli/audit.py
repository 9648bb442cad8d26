"""A placement validator over the final state of a cluster: does every binding still hold?

Written independently of the scheduler's plugins (plain loops over objects, no NodeColumns), so
that a test using it checks the plugins and the binder rather than repeating them. It shares
only the plain definitions in shared.models with them (a pod's requests and host ports, label
selectors, whether an affinity term matches a pod), which the plugins' fast forms are tested
against.

    violations = validate_placement(nodes, pods, namespaces=namespaces,
                                    checked={"default/web-1", ...}, bindings=history)
    assert not violations, format_violations(violations)

What is checked, for the pods berth placed (`checked`; every bound pod when None):

- over-commit: on any node holding a checked pod, the bound pods' requests fit the node's
  allocatable (every requested resource, plus the pod count) and no two pods use the same
  host port (upstream HostPortInfo conflicts: same protocol and port, same IP or 0.0.0.0);
- the node exists, is not cordoned (unless the pod tolerates the unschedulable taint), and its
  NoSchedule / NoExecute taints are tolerated;
- spec.nodeSelector and required node affinity match the node;
- required inter-pod anti-affinity: no other pod matching a term in the term's topology
  domain, checked from both pods' sides (the incoming pod's terms and every bound pod's);
- required inter-pod affinity: the node has the topology key and some pod matching the term
  runs in the domain (the pod itself counts: upstream lets the first pod of a self-affine
  group in, and the final state cannot tell which pod came first);
- DoNotSchedule topology spread: in the pod's domain, the count of matching pods minus the
  minimum over eligible domains is at most maxSkew. This holds in a final state as long as
  pods were only added (no pod matching the selector was deleted or bound around the
  scheduler), which is the case in the tests that use it;
- bound twice: from a binding history (pod uid, node) a pod uid bound more than once.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from shared.models import (
    HostPort,
    LabelSelector,
    LabelSelectorRequirement,
    Namespace,
    Node,
    Pod,
    PodAffinityTerm,
    Taint,
    TopologySpreadConstraint,
    affinity_term_matches,
    host_ports,
    pod_requests,
    required_terms,
    selector_matches,
    tolerates_taint,
)

OVERCOMMIT = "overcommit"
HOST_PORT = "host-port"
UNKNOWN_NODE = "unknown-node"
UNSCHEDULABLE_NODE = "unschedulable-node"
TAINT = "taint"
NODE_AFFINITY = "node-affinity"
ANTI_AFFINITY = "anti-affinity"
AFFINITY = "affinity"
SPREAD = "spread"
BOUND_TWICE = "bound-twice"

UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
_FILTERED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    """One of the constants above (OVERCOMMIT, TAINT, ...)."""
    pod: str
    """namespace/name ("" for a node-level violation)."""
    node: str
    message: str

    def __str__(self) -> str:
        where = f"{self.pod} on {self.node}" if self.pod else self.node
        return f"{self.kind}: {where}: {self.message}"


def format_violations(violations: Sequence[Violation], limit: int = 20) -> str:
    lines = [str(v) for v in violations[:limit]]
    if len(violations) > limit:
        lines.append(f"... and {len(violations) - limit} more")
    return "\n".join(lines)


@dataclass(slots=True)
class _Cluster:
    nodes: dict[str, Node]
    bound: list[Pod]
    pods_on: dict[str, list[Pod]]
    namespace_labels: dict[str, dict[str, str]]
    _domains: dict[str, dict[str, list[Pod]]] = field(default_factory=dict)
    _spread_counts: dict[tuple[object, ...], tuple[Counter[str], int]] = field(default_factory=dict)

    def in_domain(self, key: str, value: str) -> list[Pod]:
        """Bound pods on nodes whose label `key` is `value` (indexed per key on first use)."""
        index = self._domains.get(key)
        if index is None:
            index = defaultdict(list)
            for name, pods in self.pods_on.items():
                node = self.nodes.get(name)
                label = None if node is None else node.metadata.labels.get(key)
                if label is not None:
                    index[label].extend(pods)
            self._domains[key] = index
        return index.get(value, [])


def validate_placement(
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    *,
    namespaces: Iterable[Namespace] = (),
    checked: Collection[str] | None = None,
    bindings: Iterable[tuple[str, str]] = (),
) -> list[Violation]:
    """Every violation in the final state (empty when the placement is valid).

    `pods`: every pod of the cluster (pending ones, without nodeName, are ignored).
    `checked`: keys of the pods whose placement is judged (None: every bound pod); the other
    bound pods (running before the test, say) still count as neighbours and usage.
    `bindings`: a history of (pod uid, node) bind events, to find pods bound twice.
    """
    node_map = {node.metadata.name: node for node in nodes}
    bound = [pod for pod in pods if pod.spec.node_name]
    pods_on: dict[str, list[Pod]] = defaultdict(list)
    for pod in bound:
        pods_on[pod.spec.node_name].append(pod)
    cluster = _Cluster(
        nodes=node_map,
        bound=bound,
        pods_on=pods_on,
        namespace_labels={ns.metadata.name: dict(ns.metadata.labels) for ns in namespaces},
    )
    judged = [pod for pod in bound if checked is None or pod.key in checked]
    judged_keys = {pod.key for pod in judged}

    violations = _bound_twice(bindings)
    for pod in judged:
        node = node_map.get(pod.spec.node_name)
        if node is None:
            violations.append(
                Violation(UNKNOWN_NODE, pod.key, pod.spec.node_name, "node does not exist")
            )
            continue
        violations += _node_local(pod, node)
        violations += _affinity(pod, node, cluster)
        violations += _spread(pod, node, cluster)
    violations += _anti_affinity(cluster, judged_keys)
    for node_name in sorted({pod.spec.node_name for pod in judged}):
        node = node_map.get(node_name)
        if node is not None:
            violations += _overcommit(node, pods_on[node_name])
    return violations


# ------------------------------------------------------------------------------ history
def _bound_twice(bindings: Iterable[tuple[str, str]]) -> list[Violation]:
    nodes_of: dict[str, list[str]] = defaultdict(list)
    for uid, node in bindings:
        nodes_of[uid].append(node)
    return [
        Violation(BOUND_TWICE, uid, ",".join(nodes), f"bound {len(nodes)} times")
        for uid, nodes in nodes_of.items()
        if len(nodes) > 1
    ]


# ------------------------------------------------------------------------- node-local
def _overcommit(node: Node, pods: list[Pod]) -> list[Violation]:
    name = node.metadata.name
    allocatable = node.status.allocatable
    used: Counter[str] = Counter()
    for pod in pods:
        used.update(pod_requests(pod))
    out = [
        Violation(
            OVERCOMMIT,
            "",
            name,
            f"{resource}: requested {amount} > allocatable {allocatable.get(resource, 0)}",
        )
        for resource, amount in sorted(used.items())
        if amount > allocatable.get(resource, 0)
    ]
    if len(pods) > allocatable.get("pods", 0):
        out.append(
            Violation(OVERCOMMIT, "", name, f"pods: {len(pods)} > {allocatable.get('pods', 0)}")
        )
    seen: list[tuple[HostPort, str]] = []
    for pod in pods:
        for port in host_ports(pod):
            for other, owner in seen:
                if port.conflicts(other):
                    out.append(
                        Violation(
                            HOST_PORT,
                            pod.key,
                            name,
                            f"{port.protocol}/{port.port} also used by {owner}",
                        )
                    )
            seen.append((port, pod.key))
    return out


def _node_local(pod: Pod, node: Node) -> list[Violation]:
    out: list[Violation] = []
    name = node.metadata.name
    tolerations = pod.spec.tolerations
    if node.spec.unschedulable and not tolerates_taint(tolerations, UNSCHEDULABLE_TAINT):
        out.append(Violation(UNSCHEDULABLE_NODE, pod.key, name, "node is cordoned"))
    for taint in node.spec.taints:
        if taint.effect in _FILTERED_EFFECTS and not tolerates_taint(tolerations, taint):
            out.append(
                Violation(
                    TAINT, pod.key, name, f"untolerated {taint.key}={taint.value}:{taint.effect}"
                )
            )
    if not _node_matches_pod(pod, node):
        out.append(Violation(NODE_AFFINITY, pod.key, name, "nodeSelector/nodeAffinity mismatch"))
    return out


def _node_matches_pod(pod: Pod, node: Node) -> bool:
    """spec.nodeSelector and required node affinity (upstream RequiredNodeAffinity.Match)."""
    labels = node.metadata.labels
    if any(labels.get(key) != value for key, value in pod.spec.node_selector.items()):
        return False
    affinity = pod.spec.affinity
    required = (
        None
        if affinity is None or affinity.node_affinity is None
        else (affinity.node_affinity.required_during_scheduling_ignored_during_execution)
    )
    return required is None or required.matches(labels, node.metadata.name)


# ------------------------------------------------------------------------- inter-pod
def _term_matches(term: PodAffinityTerm, owner: Pod, other: Pod, cluster: _Cluster) -> bool:
    namespace = other.metadata.namespace
    return affinity_term_matches(
        term,
        owner,
        namespace,
        other.metadata.labels,
        cluster.namespace_labels.get(namespace, {}),
    )


def _anti_affinity(cluster: _Cluster, checked: set[str]) -> list[Violation]:
    """Every bound pod's anti-affinity terms against the pods in its domains; a pair counts
    when either side was placed by berth (so checked from both pods' sides)."""
    out: list[Violation] = []
    for owner in cluster.bound:
        terms = required_terms(owner, anti=True)
        owner_node = cluster.nodes.get(owner.spec.node_name)
        if not terms or owner_node is None:
            continue
        for term in terms:
            value = owner_node.metadata.labels.get(term.topology_key)
            if value is None:
                continue
            for target in cluster.in_domain(term.topology_key, value):
                if target.metadata.uid == owner.metadata.uid:
                    continue
                if owner.key not in checked and target.key not in checked:
                    continue
                if _term_matches(term, owner, target, cluster):
                    placed = owner if owner.key in checked else target
                    out.append(
                        Violation(
                            ANTI_AFFINITY,
                            placed.key,
                            placed.spec.node_name,
                            f"{owner.key} repels {target.key} in {term.topology_key}={value}",
                        )
                    )
    return out


def _affinity(pod: Pod, node: Node, cluster: _Cluster) -> list[Violation]:
    out: list[Violation] = []
    for term in required_terms(pod):
        key = term.topology_key
        value = node.metadata.labels.get(key)
        if value is None:
            out.append(Violation(AFFINITY, pod.key, node.metadata.name, f"no {key} label"))
            continue
        if not any(
            _term_matches(term, pod, other, cluster) for other in cluster.in_domain(key, value)
        ):
            out.append(
                Violation(
                    AFFINITY, pod.key, node.metadata.name, f"no pod matching in {key}={value}"
                )
            )
    return out


# ------------------------------------------------------------------------------ spread
def _spread_selector(constraint: TopologySpreadConstraint, pod: Pod) -> LabelSelector | None:
    if constraint.label_selector is None or not constraint.match_label_keys:
        return constraint.label_selector
    extra = [
        LabelSelectorRequirement(key=key, operator="In", values=[pod.metadata.labels[key]])
        for key in constraint.match_label_keys
        if key in pod.metadata.labels
    ]
    return LabelSelector(
        match_labels=dict(constraint.label_selector.match_labels),
        match_expressions=[*constraint.label_selector.match_expressions, *extra],
    )


def _spread(pod: Pod, node: Node, cluster: _Cluster) -> list[Violation]:
    out: list[Violation] = []
    for constraint in pod.spec.topology_spread_constraints:
        if constraint.when_unsatisfiable != "DoNotSchedule":
            continue
        message = _spread_violation(pod, node, constraint, cluster)
        if message:
            out.append(Violation(SPREAD, pod.key, node.metadata.name, message))
    return out


def _eligible(pod: Pod, node: Node, constraint: TopologySpreadConstraint, keys: list[str]) -> bool:
    """Nodes counted for a constraint (upstream: all the topology keys, plus the policies)."""
    if any(key not in node.metadata.labels for key in keys):
        return False
    if (constraint.node_affinity_policy or "Honor") == "Honor" and not _node_matches_pod(pod, node):
        return False
    if (constraint.node_taints_policy or "Ignore") == "Honor":
        return all(
            tolerates_taint(pod.spec.tolerations, taint)
            for taint in node.spec.taints
            if taint.effect in _FILTERED_EFFECTS
        )
    return True


def _spread_violation(
    pod: Pod, node: Node, constraint: TopologySpreadConstraint, cluster: _Cluster
) -> str:
    key = constraint.topology_key
    domain = node.metadata.labels.get(key)
    if domain is None:
        return f"node has no {key} label"
    counts, minimum = _spread_counts(pod, constraint, cluster)
    skew = counts[domain] - minimum
    if skew > constraint.max_skew:
        return (
            f"{key}={domain}: {counts[domain]} matching pods, min {minimum}, "
            f"skew {skew} > maxSkew {constraint.max_skew}"
        )
    return ""


def _spread_counts(
    pod: Pod, constraint: TopologySpreadConstraint, cluster: _Cluster
) -> tuple[Counter[str], int]:
    """Matching pods per domain over the eligible nodes, and the minimum (cached: pods of one
    workload share their constraints)."""
    # Upstream requires every DoNotSchedule constraint's key on a counted node.
    keys = [
        c.topology_key
        for c in pod.spec.topology_spread_constraints
        if c.when_unsatisfiable == "DoNotSchedule"
    ]
    selector = _spread_selector(constraint, pod)
    honor_taints = (constraint.node_taints_policy or "Ignore") == "Honor"
    honor_affinity = (constraint.node_affinity_policy or "Honor") == "Honor"
    cache_key = (
        pod.metadata.namespace,
        repr(constraint),
        repr(selector),
        tuple(keys),
        repr((pod.spec.node_selector, pod.spec.affinity)) if honor_affinity else "",
        repr(pod.spec.tolerations) if honor_taints else "",
    )
    cached = cluster._spread_counts.get(cache_key)
    if cached is not None:
        return cached
    key = constraint.topology_key
    counts: Counter[str] = Counter()
    domains: set[str] = set()
    for name, other in cluster.nodes.items():
        if not _eligible(pod, other, constraint, keys):
            continue
        domain = other.metadata.labels[key]
        domains.add(domain)
        counts[domain] += sum(
            1
            for bound in cluster.pods_on.get(name, ())
            if bound.metadata.namespace == pod.metadata.namespace
            and bound.metadata.deletion_timestamp is None
            and selector_matches(selector, bound.metadata.labels)
        )
    min_domains = constraint.min_domains or 1
    minimum = 0 if len(domains) < min_domains else min((counts[d] for d in domains), default=0)
    cluster._spread_counts[cache_key] = (counts, minimum)
    return counts, minimum


def validate_mapping(
    nodes: Iterable[Node], placements: Mapping[str, str], pods: Iterable[Pod]
) -> list[Violation]:
    """Validate a {pod key: node} placement (a `berth run` or `berth schedule` report)
    applied to the given pods (unplaced pods in the mapping are left pending)."""
    placed: list[Pod] = []
    checked: set[str] = set()
    for pod in pods:
        node = placements.get(pod.key)
        if node and not pod.spec.node_name:
            placed.append(replace(pod, spec=replace(pod.spec, node_name=node)))
            checked.add(pod.key)
        else:
            placed.append(pod)
    return validate_placement(nodes, placed, checked=checked)
