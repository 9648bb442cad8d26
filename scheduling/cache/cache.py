"""ClusterCache: the one cluster cache (upstream's internal/cache plus its PodNominator).

Every scheduler berth runs sees the cluster through one of these: the dry run (LocalCluster,
fed from manifests, binding in place), each scheduler worker and each binder (fed from a store
snapshot and then the change stream, by scheduling/cache/sync.py). This module applies the
snapshot and the stream's changes, and holds:

- nodes and the pods counted on them as NodeColumns (what every plugin reads; what counts and
  why is scheduling/cache/counts.py), plus the other objects (namespaces, controllers, pod
  groups, PodDisruptionBudgets) and every pod by key;
- **assumptions** (counts.py): a pod this scheduler placed counts on its node from Reserve on
  (upstream cache.AssumePod), until its binding arrives, it is forgotten (the attempt failed, a
  newer one started) or it expires; each remembers the queue's attempt number and when it was
  made;
- **nominations** (upstream PodNominator): pending pods with a nominated node, read by
  RunFilterPluginsWithNominatedPods and preemption; a pod counted on a node (assumed or
  reserved) is not also counted as nominated;
- **reservations** other holders hold, which the store streams (kind RESERVATION). A binder's
  cache (`holder` its id) skips its own, which it assumes: a cross-node check run `as_of` its
  own reservation's resourceVersion counts every reservation taken before it, in any binder,
  and none taken after, so two binders checking pods that exclude each other cannot both pass.
  A worker's cache (`holder` WORKER_HOLDER, which no binder uses) counts every reservation, so
  the room a gang waiting at Permit or another worker's proposal holds is taken in its eyes
  too. `holder` None ignores reservations altogether (the dry run).

It is the frameworks' cluster handle (scheduling.framework.interfaces.ClusterHandle).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from scheduling.cache.counts import NodeCounts
from scheduling.cache.objects import ViewClusterObjects
from scheduling.framework.cluster_objects import ClusterObjects
from scheduling.framework.columns import NodeColumns
from scheduling.framework.interfaces import Binder
from shared.models import (
    Node,
    Pod,
    PodDisruptionBudget,
    PodGroup,
)
from shared.models.evolve import evolve
from shared.store import RESERVATION, Change, Snapshot, object_key

if TYPE_CHECKING:
    from scheduling.framework.extender import HTTPExtender


ENDED_ATTEMPTS_KEPT = 10_000
"""Attempts ended without a binding the cache remembers (oldest forgotten first)."""

WORKER_HOLDER = ""
"""The holder of a scheduler worker's cache: no binder's id, so every reservation counts."""


class CannotBindError(RuntimeError):
    """This cache has no binder: a worker proposes, the binder service binds (DefaultBinder
    never runs in a worker)."""


class _NoBinder:
    async def bind(self, pod: Pod, node_name: str) -> None:
        raise CannotBindError(f"this scheduler does not bind ({pod.key} -> {node_name})")


class ClusterCache(NodeCounts):
    """See the module docstring."""

    def __init__(
        self, holder: str | None = None, *, extenders: Iterable[HTTPExtender] = ()
    ) -> None:
        super().__init__(holder)
        self.extenders: list[HTTPExtender] = list(extenders)
        """The scheduler's extenders (KubeSchedulerConfiguration.extenders), built once."""
        self.binder: Binder = _NoBinder()
        """Where DefaultBinder binds (LocalCluster binds in place; a worker does not bind)."""
        self.resource_version = 0
        self.objects: dict[str, dict[str, Any]] = {}
        """kind -> object key -> object, for every kind but Node and Pod."""
        self.cluster_objects: ClusterObjects = ViewClusterObjects(self.objects)
        self._nominated: dict[str, Pod] = {}
        """uid -> pending pod with a nominated node (status.nominatedNodeName set)."""
        self._by_node: dict[str, list[Pod]] | None = None
        self._advanced = asyncio.Event()
        self.ended_attempts: dict[str, int] = {}
        """uid -> the latest attempt the store streamed as ended without a binding (the
        ENDED_ATTEMPTS_KEPT latest pods): a worker waiting on its preemption proposal."""
        self.on_undercount: Callable[[str], None] = lambda reason: None
        """Called with the reason when a conflict's usage shows this view counting short of
        the store: a view that counts wrong (a bug, an object it could not apply) must not
        keep offering room that is not there (the worker reloads its snapshot)."""
        self.on_wait: Callable[[], None] = lambda: None
        """Called when `wait_for` has to wait: the follower (CacheSync) reads at once
        instead of lingering."""

    # ---------------------------------------------------------------- loading
    @property
    def pod_groups(self) -> Mapping[str, PodGroup]:
        return self.objects.get("PodGroup", {})

    @property
    def pdbs(self) -> Mapping[str, PodDisruptionBudget]:
        return self.objects.get("PodDisruptionBudget", {})

    # ------------------------------------------------------------------ handle
    @property
    def nodes(self) -> NodeColumns:
        return self.columns

    @property
    def pod_disruption_budgets(self) -> list[PodDisruptionBudget]:
        return list(self.pdbs.values())

    @property
    def nominated_pods(self) -> dict[str, list[Pod]]:
        """Node name -> pods nominated there and not counted on a node yet."""
        if self._by_node is None:
            by_node: dict[str, list[Pod]] = {}
            for uid, pod in self._nominated.items():
                # A reserved or assumed preemptor is counted on its node already: its
                # nomination must not count it a second time.
                if uid not in self._counted:
                    by_node.setdefault(pod.status.nominated_node_name, []).append(pod)
            self._by_node = by_node
        return self._by_node

    def node(self, name: str) -> Node | None:
        row = self.columns.index.get(name)
        return None if row is None else self.columns.nodes[row]

    def bound_node(self, key: str, uid: str) -> str:
        """The node the pod `key` (that very pod: `uid`) is bound to ("" when not bound)."""
        pod = self.pods.get(key)
        if pod is None or pod.metadata.uid != uid:
            return ""
        return pod.spec.node_name

    # ---------------------------------------------------------------- loading
    def load(self, snapshot: Snapshot) -> None:
        """Everything from a snapshot. The pods this scheduler assumed and that are not
        bound yet stay assumed. Nodes keep their creation order (resourceVersion), the node
        tree order the dry run uses, not the snapshot's name order."""
        nodes = sorted(snapshot.nodes, key=lambda n: n.metadata.resource_version)
        self.objects.clear()
        self.pods = {pod.key: pod for pod in snapshot.pods}
        for kind, items in snapshot.objects.items():
            if kind not in ("Node", "Pod"):
                self.objects[kind] = {_key(kind, obj): obj for obj in items}
        names = {n.metadata.name for n in nodes}
        bound = [p for p in snapshot.pods if p.spec.node_name]
        assumed = [self._counted[uid] for uid in self.assumed if uid in self._counted]
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
        kept = {p.metadata.uid for p in keep}
        self.assumed = {uid: held for uid, held in self.assumed.items() if uid in kept}
        self._nominated = {
            p.metadata.uid: p
            for p in snapshot.pods
            if not p.spec.node_name and p.status.nominated_node_name
        }
        self._by_node = None
        for pod in keep:
            self._counted[pod.metadata.uid] = pod
        # New columns, new rows: indexes that listened to the old columns (the inter-pod
        # PodIndex, preemption's PodIndex) re-attach themselves on first use; carried over,
        # they would hear about rows that are not theirs, and PodIndex.of would keep building
        # a throwaway index beside a stale one.
        self.columns = NodeColumns(nodes, [*placed, *keep])
        self._reserved = {}
        self._live = {}
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
        if change.kind in ("Pod", RESERVATION):
            self._by_node = None  # a nomination may start, end, or stop counting
        if change.kind == RESERVATION:
            if change.op == "delete":
                self._live.pop(change.uid, None)
                if change.uid in self._reserved:
                    self._uncount(change.uid)
                if change.attempt:
                    self._attempt_ended(change)
            else:
                node, holder = change.node_name, change.holder
                self._reserve(change.key, change.uid, node, holder, change.resource_version)
        elif change.kind == "Pod":
            if change.op == "delete" or not isinstance(obj, Pod):
                self._nominated.pop(change.uid, None)
                held = self.pods.get(change.key)
                if held is not None and held.metadata.uid == change.uid:
                    del self.pods[change.key]
                self._live.pop(change.uid, None)
                self._uncount(change.uid)
                self._forget_orphan(change.uid)
            else:
                if not obj.spec.node_name and obj.status.nominated_node_name:
                    self._nominated[change.uid] = obj
                else:
                    self._nominated.pop(change.uid, None)
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
            # Namespaces, services and workload selectors reach every node's results.
            self.columns.touch_all()

    def _attempt_ended(self, change: Change) -> None:
        """An attempt ended without a binding (the store streamed it): an assumption of it,
        or of an older attempt, is dropped; a node usage that came with it (a conflict found
        by check-and-reserve) is compared with what this view counts there now, at the very
        version the store read it."""
        uid, attempt = change.uid, change.attempt
        held = self.assumed.get(uid)
        if held is not None and held.attempt <= attempt:
            self.forget(uid)
        if self.ended_attempts.get(uid, 0) < attempt:
            self.ended_attempts[uid] = attempt
            while len(self.ended_attempts) > ENDED_ATTEMPTS_KEPT:
                del self.ended_attempts[next(iter(self.ended_attempts))]
        if change.usage is not None:
            row = self.columns.index.get(change.node_name)
            short = "" if row is None else self._shortfall(row, change.usage)
            if short:
                where = f"node {change.node_name} at resourceVersion {change.resource_version}"
                self.on_undercount(f"{where}: {short}")

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
            elif uid not in self.assumed:
                self._uncount(uid)
            return
        if same_body and before is not None and (uid in self.assumed or uid in self._reserved):
            counted = self._counted.get(uid)
            if (
                counted is not None
                and counted.spec.node_name == pod.spec.node_name
                and counted.metadata.resource_version == before.metadata.resource_version
            ):
                # The binding of the pod assumed here, or reserved by another binder, where
                # it was counted: it stays counted (its copy differs in resourceVersion and
                # nomination only, which no Filter reads), saving the columns a removal and
                # an addition.
                self.assumed.pop(uid, None)
                self._reserved.pop(uid, None)
                return
        self._uncount(uid)
        self._count(pod)

    def _counts_changed(self) -> None:
        self._by_node = None  # a pod counted on a node is not also counted as nominated

    # -------------------------------------------------------------- nominator
    def nominate(self, pod: Pod, node: str) -> None:
        """Record (or, with "", clear) the pod's nominated node, as this scheduler decided it
        (upstream's nominator does so in process): the next cycles count the preemptor on its
        node before the nomination comes back through the stream."""
        uid = pod.metadata.uid
        if node:
            status = evolve(pod.status, nominated_node_name=node)
            self._nominated[uid] = evolve(pod, status=status)
        else:
            self._nominated.pop(uid, None)
        self._by_node = None

    def previous(self, kind: str, key: str) -> Pod | None:
        """The view's copy of a pod (ClusterStore.follow's `previous`: a binding or a
        nomination streamed later reuses it instead of decoding the same bytes again)."""
        return self.pods.get(key) if kind == "Pod" else None

    # ---------------------------------------------------------------- catching up
    def _set_version(self, rv: int) -> None:
        self.resource_version = max(self.resource_version, rv)
        self._advanced.set()
        self._advanced = asyncio.Event()

    async def wait_for(self, rv: int, seconds: float) -> bool:
        """Until the view has applied every change up to `rv` (False after `seconds`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        if self.resource_version < rv:
            self.on_wait()
        while self.resource_version < rv:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._advanced.wait(), remaining)
            except TimeoutError:
                return self.resource_version >= rv
        return True


def _key(kind: str, obj: Any) -> str:
    return object_key(kind, obj.metadata.namespace, obj.metadata.name)
