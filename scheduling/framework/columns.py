"""NodeColumns: the cluster as numpy columns, the data every Filter and Score plugin reads.

One row per node, in kube-scheduler's NodeTree order (nodes interleaved round-robin across
zones), so "evaluate nodes in order, resuming where the last pod stopped" is a walk over rows.
Pods bound to nodes update the columns incrementally (O(resources)); adding or removing a node
rebuilds them (O(nodes)), as upstream rebuilds its node list when the node set changes.

Rows are positions, not identities: a rebuild may move a node to another row. Keep node names
(or `index[name]`) across changes, never rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from shared.models import Node, Pod, Taint
from shared.models.affinity import ANY_NAMESPACE, anti_affinity_scopes
from shared.models.quantity import bounded_amount
from shared.models.resources import (
    BIND_ALL_HOST_IP,
    DEFAULT_PROTOCOL,
    PortKey,
    non_zero_requests,
    pod_host_ports,
    pod_requests,
)

__all__ = ["BIND_ALL_HOST_IP", "DEFAULT_PROTOCOL", "PortKey", "pod_host_ports"]

Rows = slice | NDArray[np.intp]
"""Which rows a plugin evaluates: `slice(None)` (every node, no copy) or an index array."""

ALL_ROWS: slice = slice(None)

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
LEGACY_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
LEGACY_REGION_LABEL = "failure-domain.beta.kubernetes.io/region"

# Fixed leading resource columns; extended resources get columns as they appear.
CORE_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")
MISSING = -1
"""Label code of a node without the key."""
UNKNOWN_VALUE = -2
"""Code for a value no node carries: compares unequal to every row."""
_MIN_ROW_LOG = 4096
"""The row log keeps at least this many entries (and 4 per node) before it drops its older
half; a reader that fell further behind starts over."""


UsedPorts = dict[PortKey, dict[int, Counter[str]]]
"""(protocol, hostPort) -> row -> host IP ("0.0.0.0" = all) -> pods using it there."""


def count_host_ports(used: UsedPorts, row: int, pod: Pod, sign: int) -> None:
    """Add (sign 1) or remove (sign -1) `pod`'s host ports on `row`.

    Counted, not a set, exactly as the binder's reserve script counts `hp:` fields in a
    node's usage: two pods may hold the same port (placed around the scheduler, or sharing
    it on distinct IPs that overlap later), and removing one must leave the port taken.
    A set here let the worker see a free port that Redis still counted, and propose the
    same node again and again (a livelock of conflicts).
    """
    for key, ip in pod_host_ports(pod):
        by_row = used.setdefault(key, {})
        ips = by_row.setdefault(row, Counter())
        ips[ip] += sign
        if ips[ip] <= 0:
            del ips[ip]
        if not ips:
            del by_row[row]
        if not by_row:
            del used[key]


def zone_key(node: Node) -> str:
    """Upstream utilnode.GetZoneKey: region and zone joined; "" when the node has neither."""
    labels = node.metadata.labels
    zone = labels.get(ZONE_LABEL) or labels.get(LEGACY_ZONE_LABEL, "")
    region = labels.get(REGION_LABEL) or labels.get(LEGACY_REGION_LABEL, "")
    if not zone and not region:
        return ""
    return f"{region}:\x00:{zone}"


def node_tree_order(nodes: Sequence[Node]) -> list[Node]:
    """Nodes interleaved across zones, as upstream nodeTree.list(): zones in order of first
    appearance, each zone's nodes in insertion order, one node per zone per round."""
    zones: dict[str, list[Node]] = {}
    for node in nodes:
        zones.setdefault(zone_key(node), []).append(node)
    ordered: list[Node] = []
    lists = list(zones.values())
    depth = max((len(z) for z in lists), default=0)
    for i in range(depth):
        ordered.extend(z[i] for z in lists if i < len(z))
    return ordered


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_int64(text: str) -> int | None:
    """Go strconv.ParseInt(text, 10, 64): optional sign, ASCII digits, int64 range.

    Python's int() is laxer ("1_000", " 1", unbounded), which would let Gt/Lt match where
    upstream does not.
    """
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


@dataclass(slots=True)
class LabelColumn:
    """One label key across all nodes: an integer code per row (MISSING when absent)."""

    codes: NDArray[np.int32]
    value_codes: dict[str, int] = field(default_factory=dict)
    values: list[str] = field(default_factory=list)
    _numeric: NDArray[np.float64] | None = None

    def code_of(self, value: str) -> int:
        return self.value_codes.get(value, UNKNOWN_VALUE)

    def intern(self, value: str) -> int:
        code = self.value_codes.get(value)
        if code is None:
            code = len(self.values)
            self.value_codes[value] = code
            self.values.append(value)
        return code

    def numeric(self) -> NDArray[np.float64]:
        """Integer value of the label per row for Gt/Lt; NaN when absent or not an integer."""
        if self._numeric is None:
            table = np.full(len(self.values) + 1, np.nan)
            for value, code in self.value_codes.items():
                number = parse_int64(value)
                if number is not None:
                    table[code] = number
            # codes == MISSING (-1) index the trailing NaN.
            self._numeric = table[self.codes]
        return self._numeric


class PodListener(Protocol):
    """Keeps a derived per-pod index in step with NodeColumns (e.g. the inter-pod plugins'
    PodIndex): told of every bound pod added or removed, and of every row rebuild."""

    def pod_added(self, row: int, pod: Pod) -> None: ...

    def pod_removed(self, row: int, pod: Pod) -> None: ...

    def rows_rebuilt(self) -> None:
        """Rows moved (nodes added or removed): row numbers seen so far are stale."""


class NodeColumns:
    """The scheduler's view of nodes and the pods bound to them, as columns."""

    def __init__(self, nodes: Iterable[Node] = (), pods: Iterable[Pod] = ()) -> None:
        self._by_name: dict[str, Node] = {}
        self._arrival: list[str] = []
        self.resource_names: list[str] = list(CORE_RESOURCES)
        self.resource_index: dict[str, int] = {n: i for i, n in enumerate(CORE_RESOURCES)}
        self.generation = 0
        self.shared_epoch = 0
        """Bumped by a change any row's Filter or Score may depend on (see `touch_all`)."""
        self.row_log: list[tuple[int, str]] = []
        """(row, uid of the pod added there, or "" for a removal) per change of a row's pods,
        in order; `row_log_base` is the position of its first entry. Readers (the signature
        cache) keep a position and bring those rows up to date."""
        self.row_log_base = 0
        self.inter_pod_epoch = 0
        """Bumped when a pod with inter-pod affinity terms comes or goes: the plugins that
        read other nodes may stop (or start) skipping for pods without terms."""
        pods_by_node: dict[str, list[Pod]] = {}
        for node in nodes:
            self._by_name[node.metadata.name] = node
            self._arrival.append(node.metadata.name)
        for pod in pods:
            if pod.spec.node_name:
                pods_by_node.setdefault(pod.spec.node_name, []).append(pod)
        self.pod_listeners: list[PodListener] = []
        self._rebuild(pods_by_node)

    # ----------------------------------------------------------------- building
    def _rebuild(self, pods_by_node: dict[str, list[Pod]]) -> None:
        self.generation += 1
        self.shared_epoch += 1
        ordered = node_tree_order([self._by_name[n] for n in self._arrival])
        n = len(ordered)
        self.nodes: list[Node] = ordered
        self.names: list[str] = [node.metadata.name for node in ordered]
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self.zone_keys: list[str] = [zone_key(node) for node in ordered]
        for node in ordered:
            for name in node.status.allocatable:
                self._resource_col(name)
        r = len(self.resource_names)
        self.allocatable: NDArray[np.int64] = np.zeros((n, r), dtype=np.int64)
        self.requested: NDArray[np.int64] = np.zeros((n, r), dtype=np.int64)
        """Sum of bound pods' requests per resource; the "pods" column counts pods."""
        self.non_zero_requested: NDArray[np.int64] = np.zeros((n, 2), dtype=np.int64)
        """cpu and memory requests with upstream's non-zero defaults, for scoring."""
        self.unschedulable: NDArray[np.bool_] = np.zeros(n, dtype=np.bool_)
        self.labels: dict[str, LabelColumn] = {}
        self.taint_sets: list[tuple[Taint, ...]] = []
        self._taint_set_ids: dict[tuple[tuple[str, str, str], ...], int] = {}
        self.taint_set_of: NDArray[np.int32] = np.zeros(n, dtype=np.int32)
        self.pods_by_node: list[list[Pod]] = [[] for _ in range(n)]
        self.anti_affinity: Counter[str] = Counter()
        """Counted pods with required pod anti-affinity terms, per namespace those can match
        ("*": any). While none can match a pod without cross-node constraints of its own, it
        fits a node whatever the other nodes hold (the binder binds it without a cross-node
        check)."""
        self.used_ports: UsedPorts = {}
        """(protocol, hostPort) -> row -> host IP -> how many pods there use it."""
        self._images: dict[str, tuple[NDArray[np.intp], NDArray[np.int64]]] | None = None
        for row, node in enumerate(ordered):
            self._fill_node_row(row, node)
        for row, name in enumerate(self.names):
            for pod in pods_by_node.get(name, ()):
                self._account_pod(row, pod, +1)
        for listener in self.pod_listeners:
            listener.rows_rebuilt()

    def _resource_col(self, name: str) -> int:
        col = self.resource_index.get(name)
        if col is None:
            col = len(self.resource_names)
            self.resource_names.append(name)
            self.resource_index[name] = col
            if hasattr(self, "allocatable"):
                self.shared_epoch += 1  # column positions a cycle state may hold moved
                pad = np.zeros((self.allocatable.shape[0], 1), dtype=np.int64)
                self.allocatable = np.hstack([self.allocatable, pad])
                self.requested = np.hstack([self.requested, pad])
        return col

    def _fill_node_row(self, row: int, node: Node) -> None:
        n = len(self.names)
        self.allocatable[row, :] = 0
        for name, value in node.status.allocatable.items():
            col = self._resource_col(name)
            self.allocatable[row, col] = bounded_amount(value)
        self.unschedulable[row] = node.spec.unschedulable
        for key, column in self.labels.items():
            if key not in node.metadata.labels:
                column.codes[row] = MISSING
                column._numeric = None
        for key, label_value in node.metadata.labels.items():
            label_column = self.labels.get(key)
            if label_column is None:
                label_column = LabelColumn(np.full(n, MISSING, dtype=np.int32))
                self.labels[key] = label_column
            label_column.codes[row] = label_column.intern(label_value)
            label_column._numeric = None
        taints = tuple(node.spec.taints)
        signature = tuple((t.key, t.value, t.effect) for t in taints)
        set_id = self._taint_set_ids.get(signature)
        if set_id is None:
            set_id = len(self.taint_sets)
            self._taint_set_ids[signature] = set_id
            self.taint_sets.append(taints)
        self.taint_set_of[row] = set_id
        self._images = None

    def _account_pod(self, row: int, pod: Pod, sign: int) -> None:
        for name, value in pod_requests(pod).items():
            # The column first: a resource no node advertises adds one, which replaces
            # `self.requested` (indexing the old array would be out of bounds).
            col = self._resource_col(name)
            self.requested[row, col] += sign * bounded_amount(value)
        self.requested[row, self.resource_index["pods"]] += sign
        nz = non_zero_requests(pod)
        self.non_zero_requested[row, 0] += sign * bounded_amount(nz.get("cpu", 0))
        self.non_zero_requested[row, 1] += sign * bounded_amount(nz.get("memory", 0))
        count_host_ports(self.used_ports, row, pod, sign)
        for scope in anti_affinity_scopes(pod):
            self.anti_affinity[scope] += sign
        if sign > 0:
            self.pods_by_node[row].append(pod)
        else:
            uid = pod.metadata.uid
            self.pods_by_node[row] = [p for p in self.pods_by_node[row] if p.metadata.uid != uid]

    # ---------------------------------------------------------------- mutation
    def add_node(self, node: Node) -> None:
        self.add_nodes([node])

    def add_nodes(self, nodes: Iterable[Node]) -> None:
        for node in nodes:
            if node.metadata.name not in self._by_name:
                self._arrival.append(node.metadata.name)
            self._by_name[node.metadata.name] = node
        self._rebuild(self._pods_by_name())

    def update_node(self, node: Node) -> None:
        """Replace a node in place; a zone change moves it in the tree (a rebuild)."""
        name = node.metadata.name
        row = self.index.get(name)
        if row is None:
            self.add_node(node)
            return
        self._by_name[name] = node
        if zone_key(node) != self.zone_keys[row]:
            self._rebuild(self._pods_by_name())
            return
        self.nodes[row] = node
        self._fill_node_row(row, node)
        self.generation += 1
        # Labels and images of one node reach other rows' results (topology domains, the
        # image spread ImageLocality scales by).
        self.shared_epoch += 1

    def remove_node(self, name: str) -> None:
        if name not in self._by_name:
            return
        del self._by_name[name]
        self._arrival.remove(name)
        pods = self._pods_by_name()
        pods.pop(name, None)
        self._rebuild(pods)

    def add_pod(self, pod: Pod) -> None:
        """Account a pod bound to (or assumed on) `pod.spec.node_name`."""
        row = self.index.get(pod.spec.node_name or "")
        if row is None:
            raise KeyError(f"pod {pod.key} is bound to unknown node {pod.spec.node_name!r}")
        self._account_pod(row, pod, +1)
        self.generation += 1
        self._log_row(row, pod, pod.metadata.uid)
        for listener in self.pod_listeners:
            listener.pod_added(row, pod)

    def remove_pod(self, pod: Pod) -> None:
        row = self.index.get(pod.spec.node_name or "")
        if row is None:
            return
        self._account_pod(row, pod, -1)
        self.generation += 1
        self._log_row(row, pod, "")
        for listener in self.pod_listeners:
            listener.pod_removed(row, pod)

    def _log_row(self, row: int, pod: Pod, added: str) -> None:
        self.row_log.append((row, added))
        if len(self.row_log) > max(_MIN_ROW_LOG, 4 * len(self.names)):
            half = len(self.row_log) // 2
            del self.row_log[:half]
            self.row_log_base += half
        affinity = pod.spec.affinity
        if affinity is not None and (affinity.pod_affinity or affinity.pod_anti_affinity):
            # Its terms reach other nodes (anti-affinity of existing pods, preferred terms).
            self.inter_pod_epoch += 1

    def repelled(self, namespace: str) -> bool:
        """Whether a counted pod's required anti-affinity terms can match pods of
        `namespace`."""
        return self.anti_affinity[ANY_NAMESPACE] > 0 or self.anti_affinity[namespace] > 0

    def touch_all(self) -> None:
        """Something every row may depend on changed (namespaces, services, workload
        selectors): results kept across cycles must be recomputed."""
        self.shared_epoch += 1

    def _pods_by_name(self) -> dict[str, list[Pod]]:
        return {name: self.pods_by_node[row] for row, name in enumerate(self.names)}

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self.names)

    def size_of(self, rows: Rows) -> int:
        if isinstance(rows, slice):
            return len(range(*rows.indices(len(self.names))))
        return int(rows.shape[0])

    def row_indices(self, rows: Rows) -> NDArray[np.intp]:
        if isinstance(rows, slice):
            return np.arange(*rows.indices(len(self.names)), dtype=np.intp)
        return rows

    def label(self, key: str) -> LabelColumn:
        """The column for a label key; a key no node has gives an all-MISSING column."""
        column = self.labels.get(key)
        if column is None:
            column = LabelColumn(np.full(len(self.names), MISSING, dtype=np.int32))
            self.labels[key] = column
        return column

    def images(self) -> dict[str, tuple[NDArray[np.intp], NDArray[np.int64]]]:
        """Image name -> (rows that have it, its size on each of those rows)."""
        if self._images is None:
            rows_of: dict[str, list[int]] = {}
            sizes_of: dict[str, list[int]] = {}
            for row, node in enumerate(self.nodes):
                for image in node.status.images:
                    for name in image.names:
                        rows_of.setdefault(name, []).append(row)
                        sizes_of.setdefault(name, []).append(bounded_amount(image.size_bytes))
            self._images = {
                name: (np.array(rows, dtype=np.intp), np.array(sizes_of[name], dtype=np.int64))
                for name, rows in rows_of.items()
            }
        return self._images

    def resource_column(self, name: str) -> int | None:
        return self.resource_index.get(name)

    def pods(self) -> Iterable[Pod]:
        for pods in self.pods_by_node:
            yield from pods
