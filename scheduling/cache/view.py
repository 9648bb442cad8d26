"""The binder's own view of the cluster, for the cross-node checks.

Loaded from a store snapshot and kept fresh from the change stream: nodes and the pods bound to
them as NodeColumns (what InterPodAffinity and PodTopologySpread read), plus namespaces, pod
groups and PodDisruptionBudgets. Pods this binder reserved are *assumed* on their node until
their binding arrives through the stream (or they are forgotten on Unreserve), so two
proposals handled by one binder always see each other.

A view also counts the reservations other holders hold, which the store streams (kind
RESERVATION). A binder's view (`holder` its id) skips its own, which it assumes: a cross-node
check run `as_of` its own reservation's resourceVersion counts every reservation taken before
it, in any binder, and none taken after. Two binders checking pods that exclude each other can
then not both pass: the one that reserved second sees the first. A scheduler worker's view
(`holder` WORKER_HOLDER, which no binder uses) counts every reservation, so the room a gang
waiting at Permit or another worker's proposal holds is taken in its eyes too; its own
proposals are counted once, as assumptions. `holder` None ignores reservations altogether.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from scheduling.framework.columns import NodeColumns
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
from shared.store import RESERVATION, Change, NodeUsage, Snapshot, object_key


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


WORKER_HOLDER = ""
"""The holder of a scheduler worker's view: no binder's id, so every reservation counts."""


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
        self.touched_at: dict[str, int] = {}
        """node -> resourceVersion at which what the view counts there last changed."""
        self._applying = 0
        self._loaded_at = 0
        """The snapshot's resourceVersion: the view cannot tell what changed before it."""
        """The resourceVersion of the change `apply` is applying."""
        self._live: dict[str, tuple[str, str, int]] = {}
        """uid -> (pod key, node, resourceVersion) of every reservation of another holder the
        stream reported and did not end yet, counted or not: a pod counted as an assumption
        when its reservation arrived is counted as reserved once the assumption is dropped."""
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
        self._live = {}
        self.touched_at = {}
        self._loaded_at = snapshot.resource_version
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
            self._applying = change.resource_version
            self._apply_one(change)
        if new_nodes:
            self._add_nodes(new_nodes)
        if changes:
            self._set_version(changes[-1].resource_version)

    def _apply_one(self, change: Change) -> None:
        obj = change.object
        if change.kind == RESERVATION:
            if change.op == "delete":
                self._live.pop(change.uid, None)
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
                self._live.pop(change.uid, None)
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
        if pod.spec.node_name:
            self._live.pop(uid, None)  # a binding ends the reservation
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
        self._touch(node)

    def _reserve(self, key: str, uid: str, node: str, holder: str, rv: int) -> None:
        """Count a pod another binder reserved on `node` (nothing for this binder's own
        reservations, or in a view that does not count reservations)."""
        if self.holder is None or holder == self.holder:
            return
        self._live[uid] = (key, node, rv)
        if uid in self._counted:
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
        self._touch(node)

    def _uncount(self, uid: str) -> None:
        pod = self._counted.pop(uid, None)
        self._assumed.discard(uid)
        self._reserved.pop(uid, None)
        if pod is not None:
            self.columns.remove_pod(pod)
            self._touch(pod.spec.node_name)

    def _touch(self, node: str) -> None:
        """Note that what the view counts on `node` changed at the change being applied (or,
        outside `apply`, after everything applied so far)."""
        self.touched_at[node] = max(self._applying, self.resource_version + 1)

    def undercounts(self, node: str, resource_version: int, usage: NodeUsage) -> str:
        """What the view counts short on `node` against the store's `usage` read at
        `resource_version` ("" when nothing, or when the two cannot be compared: the view
        has not applied that version yet, or its count on the node changed since). Own
        assumptions only add to the view, so any shortfall is a view that counts wrong."""
        row = self.columns.index.get(node)
        if (
            row is None
            or self.resource_version < resource_version
            or max(self.touched_at.get(node, 0), self._loaded_at) > resource_version
        ):
            return ""
        columns = self.columns
        short = []
        have_pods = int(columns.requested[row, columns.resource_index["pods"]])
        if usage.pods > have_pods:
            short.append(f"pods {usage.pods} > {have_pods}")
        for name, amount in sorted(usage.requested.items()):
            col = columns.resource_index.get(name)
            have = 0 if col is None else int(columns.requested[row, col])
            if amount > have:
                short.append(f"{name} {amount} > {have}")
        for port, count in sorted(usage.host_ports.items()):
            ips = columns.used_ports.get((port.protocol, port.port), {}).get(row)
            have = 0 if ips is None else ips[port.host_ip]
            if count > have:
                short.append(f"host port {port.field()} {count} > {have}")
        return ", ".join(short)

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
        self._touch(node)
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
        """Drop an assumed pod (Unreserve); a pod whose binding arrived stays. If a holder's
        reservation of it is live (a worker's proposal, reserved, waiting at Permit), the
        reservation counts from now on."""
        if uid in self._assumed:
            self._uncount(uid)
            live = self._live.get(uid)
            if live is not None:
                key, node, rv = live
                pod = self.pods.get(key)
                if pod is not None and pod.metadata.uid == uid:
                    self._count_reserved(pod, node, rv)

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

    def is_counted(self, uid: str) -> bool:
        """Whether the pod is counted on a node (bound, assumed, or reserved by a holder)."""
        return uid in self._counted

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
