"""The binder's own view of the cluster, for the cross-node checks.

Loaded from a store snapshot and kept fresh from the change stream: nodes and the pods bound to
them as NodeColumns (what InterPodAffinity and PodTopologySpread read), plus namespaces, pod
groups and PodDisruptionBudgets. Pods this binder reserved are *assumed* on their node until
their binding arrives through the stream (or they are forgotten on Unreserve), so two
proposals handled by one binder always see each other.

A binder's view (`holder` set) also counts the reservations *other* binders hold, which the
store streams (kind RESERVATION): a cross-node check run `as_of` its own reservation's
resourceVersion counts every reservation taken before it, in any binder, and none taken
after. Two binders checking pods that exclude each other can then not both pass: the one
that reserved second sees the first. (A scheduler worker's view, `holder` None, ignores
reservations: it counts what it proposed itself.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from services.scheduler.framework.columns import NodeColumns
from shared.models import (
    LabelSelector,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    ReplicaSet,
    ReplicationController,
    Service,
    StatefulSet,
)
from shared.store import RESERVATION, Change, Snapshot, object_key


class ViewClusterObjects:
    """ClusterObjects over the view's namespaces, Services and controllers."""

    def __init__(self, objects: Mapping[str, Mapping[str, Any]]) -> None:
        self._objects = objects

    def _get(self, kind: str, key: str) -> Any:
        return self._objects.get(kind, {}).get(key)

    def namespace(self, name: str) -> Namespace | None:
        ns = self._get("Namespace", name)
        return ns if isinstance(ns, Namespace) else None

    def namespaces(self) -> Iterable[Namespace]:
        return [ns for ns in self._objects.get("Namespace", {}).values()]

    def service_selectors(self, namespace: str) -> Iterable[Mapping[str, str] | None]:
        return [
            svc.spec.selector or None
            for svc in self._objects.get("Service", {}).values()
            if isinstance(svc, Service) and svc.metadata.namespace == namespace
        ]

    def replication_controller_selector(
        self, namespace: str, name: str
    ) -> Mapping[str, str] | None:
        rc = self._get("ReplicationController", f"{namespace}/{name}")
        return rc.spec.selector if isinstance(rc, ReplicationController) else None

    def replica_set_selector(self, namespace: str, name: str) -> LabelSelector | None:
        rs = self._get("ReplicaSet", f"{namespace}/{name}")
        return rs.spec.selector if isinstance(rs, ReplicaSet) else None

    def stateful_set_selector(self, namespace: str, name: str) -> LabelSelector | None:
        ss = self._get("StatefulSet", f"{namespace}/{name}")
        return ss.spec.selector if isinstance(ss, StatefulSet) else None


class ClusterView:
    def __init__(self, holder: str | None = None) -> None:
        self.holder = holder
        """The binder this view belongs to (its reservations are assumed, not streamed in);
        None: reservations are not counted."""
        self.columns = NodeColumns()
        self.resource_version = 0
        self.objects: dict[str, dict[str, Any]] = {}
        """kind -> object key -> object, for every kind but Node and Pod."""
        self.pods: dict[str, Pod] = {}
        """Every pod (bound or not) by "namespace/name", as the store last streamed it. Do
        not mutate: the same objects are counted in `columns`."""
        self.cluster_objects = ViewClusterObjects(self.objects)
        self._counted: dict[str, Pod] = {}
        """uid -> the pod counted in `columns` (bound, or assumed by this binder)."""
        self._assumed: set[str] = set()
        self._reserved: dict[str, int] = {}
        """uid -> resourceVersion of the reservation entry, for pods counted because another
        binder reserved them (0: held at the snapshot)."""
        self._orphans: dict[str, dict[str, Pod]] = {}
        """node -> uid -> bound pods whose node the view does not have (yet)."""
        self._advanced = asyncio.Event()

    # ---------------------------------------------------------------- loading
    @property
    def pod_groups(self) -> Mapping[str, PodGroup]:
        return self.objects.get("PodGroup", {})

    @property
    def pdbs(self) -> Mapping[str, PodDisruptionBudget]:
        return self.objects.get("PodDisruptionBudget", {})

    def load(self, snapshot: Snapshot) -> None:
        self.objects.clear()
        self.pods = {pod.key: pod for pod in snapshot.pods}
        for kind, items in snapshot.objects.items():
            if kind not in ("Node", "Pod"):
                self.objects[kind] = {_key(kind, obj): obj for obj in items}
        nodes = snapshot.nodes
        names = {n.metadata.name for n in nodes}
        bound = [p for p in snapshot.pods if p.spec.node_name]
        assumed = [self._counted[uid] for uid in self._assumed if uid in self._counted]
        self._orphans.clear()
        self._counted = {}
        placed: list[Pod] = []
        for pod in bound:
            if pod.spec.node_name in names:
                placed.append(pod)
                self._counted[pod.metadata.uid] = pod
            else:
                self._orphans.setdefault(pod.spec.node_name, {})[pod.metadata.uid] = pod
        bound_uids = set(self._counted)
        keep = [
            p for p in assumed if p.metadata.uid not in bound_uids and p.spec.node_name in names
        ]
        self._assumed = {p.metadata.uid for p in keep}
        for pod in keep:
            self._counted[pod.metadata.uid] = pod
        # New columns, new rows: indexes that listened to the old columns (the inter-pod
        # PodIndex, preemption's PodIndex) re-attach themselves on first use; carried over,
        # they would hear about rows that are not theirs, and PodIndex.of would keep building
        # a throwaway index beside a stale one.
        self.columns = NodeColumns(nodes, [*placed, *keep])
        self._reserved = {}
        for held in snapshot.reservations:
            self._reserve(held.pod_key, held.uid, held.node, held.holder, 0)
        self._set_version(snapshot.resource_version)

    def apply(self, changes: Sequence[Change]) -> None:
        """Apply a batch of stream changes (consecutive new nodes cost one rebuild)."""
        new_nodes: list[Node] = []
        for change in changes:
            obj = change.object
            if (
                change.kind == "Node"
                and change.op == "put"
                and isinstance(obj, Node)
                and obj.metadata.name not in self.columns.index
            ):
                new_nodes.append(obj)
                continue
            if new_nodes:
                self._add_nodes(new_nodes)
                new_nodes = []
            self._apply_one(change)
        if new_nodes:
            self._add_nodes(new_nodes)
        if changes:
            self._set_version(changes[-1].resource_version)

    def _apply_one(self, change: Change) -> None:
        obj = change.object
        if change.kind == RESERVATION:
            if change.op == "delete":
                if change.uid in self._reserved:
                    self._uncount(change.uid)
            else:
                node, holder = change.node_name, change.holder
                self._reserve(change.key, change.uid, node, holder, change.resource_version)
        elif change.kind == "Pod":
            if change.op == "delete" or not isinstance(obj, Pod):
                held = self.pods.get(change.key)
                if held is not None and held.metadata.uid == change.uid:
                    del self.pods[change.key]
                self._uncount(change.uid)
                self._forget_orphan(change.uid)
            else:
                self._pod_put(obj, change.same_body)
        elif change.kind == "Node":
            if change.op == "delete":
                self._remove_node(change.key)
            elif isinstance(obj, Node):
                self.columns.update_node(obj)
        else:
            table = self.objects.setdefault(change.kind, {})
            if change.op == "delete" or obj is None:
                table.pop(change.key, None)
            else:
                table[change.key] = obj

    def _pod_put(self, pod: Pod, same_body: bool = False) -> None:
        uid = pod.metadata.uid
        before = self.pods.get(pod.key)
        self.pods[pod.key] = pod
        self._forget_orphan(uid)
        if not pod.spec.node_name:
            held = self._reserved.get(uid)
            if held is not None:  # reserved elsewhere, and updated: count the new version
                node = self._counted[uid].spec.node_name
                self._uncount(uid)
                self._count_reserved(pod, node, held)
            elif uid not in self._assumed:
                self._uncount(uid)
            return
        if same_body and uid in self._assumed and before is not None:
            counted = self._counted.get(uid)
            if (
                counted is not None
                and counted.spec.node_name == pod.spec.node_name
                and counted.metadata.resource_version == before.metadata.resource_version
            ):
                # The binding of the pod assumed here, as it was assumed: it stays counted
                # (its copy differs in resourceVersion and nomination only, which no
                # Filter reads), saving the columns a removal and an addition.
                self._assumed.discard(uid)
                return
        self._uncount(uid)
        self._count(pod)

    def _count(self, pod: Pod) -> None:
        node = pod.spec.node_name
        if node not in self.columns.index:
            self._orphans.setdefault(node, {})[pod.metadata.uid] = pod
            return
        self.columns.add_pod(pod)
        self._counted[pod.metadata.uid] = pod

    def _reserve(self, key: str, uid: str, node: str, holder: str, rv: int) -> None:
        """Count a pod another binder reserved on `node` (nothing for this binder's own
        reservations, or in a view that does not count reservations)."""
        if self.holder is None or holder == self.holder or uid in self._counted:
            return
        pod = self.pods.get(key)
        if pod is not None and pod.metadata.uid == uid:
            self._count_reserved(pod, node, rv)

    def _count_reserved(self, pod: Pod, node: str, rv: int) -> None:
        if node not in self.columns.index:
            return  # a node the view does not have (yet): nothing to check against there
        reserved = _on_node(pod, node)
        self.columns.add_pod(reserved)
        self._counted[pod.metadata.uid] = reserved
        self._reserved[pod.metadata.uid] = rv

    def _uncount(self, uid: str) -> None:
        pod = self._counted.pop(uid, None)
        self._assumed.discard(uid)
        self._reserved.pop(uid, None)
        if pod is not None:
            self.columns.remove_pod(pod)

    def _forget_orphan(self, uid: str) -> None:
        for pods in self._orphans.values():
            pods.pop(uid, None)

    def _add_nodes(self, nodes: list[Node]) -> None:
        self.columns.add_nodes(nodes)
        for node in nodes:
            for pod in self._orphans.pop(node.metadata.name, {}).values():
                self._count(pod)

    def _remove_node(self, name: str) -> None:
        row = self.columns.index.get(name)
        if row is None:
            return
        for pod in list(self.columns.pods_by_node[row]):
            uid = pod.metadata.uid
            self._counted.pop(uid, None)
            if uid in self._assumed or uid in self._reserved:
                self._assumed.discard(uid)
                self._reserved.pop(uid, None)
            else:
                self._orphans.setdefault(name, {})[uid] = pod
        self.columns.remove_node(name)

    # ---------------------------------------------------------------- assuming
    def assume(self, pod: Pod, node: str) -> bool:
        """Count `pod` on `node` until its binding arrives or it is forgotten. False when
        the view does not have the node."""
        if node not in self.columns.index:
            return False
        uid = pod.metadata.uid
        if uid in self._counted:
            return True
        # A pod already on `node` (the worker's own copy) is counted as it is: never mutated.
        assumed = pod if pod.spec.node_name == node else _on_node(pod, node)
        self.columns.add_pod(assumed)
        self._counted[uid] = assumed
        self._assumed.add(uid)
        return True

    def take_over(self, uid: str) -> int | None:
        """Stop counting a pod reserved by another binder (or assumed here), which this
        binder adopts and checks itself: a pod must not meet itself in its own check.
        Returns the resourceVersion of the reservation when the view had counted it."""
        taken_at = self._reserved.get(uid)
        if taken_at is not None or uid in self._assumed:
            self._uncount(uid)
        return taken_at

    def forget(self, uid: str) -> None:
        """Drop an assumed pod (Unreserve); a pod whose binding arrived stays."""
        if uid in self._assumed:
            self._uncount(uid)

    @contextlib.contextmanager
    def as_of(self, rv: int) -> Iterator[None]:
        """Within the block, the reservations of other binders taken after `rv` are not
        counted (a check as of its own reservation counts the ones before it only). No
        await inside: the columns are restored on exit."""
        later = [self._counted[uid] for uid, at in self._reserved.items() if at > rv]
        for pod in later:
            self.columns.remove_pod(pod)
        try:
            yield
        finally:
            for pod in later:
                self.columns.add_pod(pod)

    def previous(self, kind: str, key: str) -> Pod | None:
        """The view's copy of a pod (ClusterStore.follow's `previous`: a binding or a
        nomination streamed later reuses it instead of decoding the same bytes again)."""
        return self.pods.get(key) if kind == "Pod" else None

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed

    def bound_pods(self) -> list[Pod]:
        return list(self.columns.pods())

    # ---------------------------------------------------------------- catching up
    def _set_version(self, rv: int) -> None:
        self.resource_version = max(self.resource_version, rv)
        self._advanced.set()
        self._advanced = asyncio.Event()

    async def wait_for(self, rv: int, seconds: float) -> bool:
        """Until the view has applied every change up to `rv` (False after `seconds`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while self.resource_version < rv:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._advanced.wait(), remaining)
            except TimeoutError:
                return self.resource_version >= rv
        return True


def _on_node(pod: Pod, node: str) -> Pod:
    """A shallow copy of the pod with spec.nodeName set (the stored pod is not touched)."""
    return replace(pod, spec=replace(pod.spec, node_name=node))


def _key(kind: str, obj: Any) -> str:
    return object_key(kind, obj.metadata.namespace, obj.metadata.name)
