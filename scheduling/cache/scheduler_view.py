"""The worker's cluster: the binder's ClusterView (nodes and bound pods as NodeColumns, kept
fresh from the change stream) plus what only a scheduler needs, and the frameworks' Handle.

- Nominations: pending pods with status.nominatedNodeName (upstream's PodNominator), read by
  RunFilterPluginsWithNominatedPods and preemption as `nominated_pods`.
- Assumptions: a pod this worker proposed is counted on its node from Reserve on (so the
  worker never conflicts with itself) until the change stream brings its binding, an outcome
  says the attempt failed, the pod is dispatched again, or `assume_ttl` passes.
- Node order: the snapshot lists objects by key; nodes are re-sorted by resourceVersion so the
  node tree keeps creation order (what the in-process dry run uses), not name order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from scheduling.cache.view import WORKER_HOLDER, ClusterView
from scheduling.framework.cluster_objects import ClusterObjects
from scheduling.framework.columns import NodeColumns
from scheduling.framework.extender import HTTPExtender
from shared.models import Node, Pod, PodDisruptionBudget
from shared.store import RESERVATION, Change, Snapshot


class WorkerCannotBindError(RuntimeError):
    """A worker proposes; the binder service binds (DefaultBinder never runs in a worker)."""


class _NoBinder:
    async def bind(self, pod: Pod, node_name: str) -> None:
        raise WorkerCannotBindError(f"scheduler workers do not bind ({pod.key} -> {node_name})")


@dataclass(slots=True)
class Assumption:
    attempt: int
    node: str
    since: float


class WorkerView:
    """Handle for the frameworks (nodes, binder, cluster_objects, nominated_pods,
    pod_disruption_budgets) over a ClusterView; see the module docstring."""

    def __init__(self, extenders: Sequence[HTTPExtender] = ()) -> None:
        self.view = ClusterView(WORKER_HOLDER)
        self.extenders: list[HTTPExtender] = list(extenders)
        """The configured extenders (KubeSchedulerConfiguration.extenders), which the
        frameworks call from this handle exactly as in the dry run."""
        self._nominated: dict[str, Pod] = {}
        """uid -> pending pod with a nominated node."""
        self._by_node: dict[str, list[Pod]] | None = None
        self.assumed: dict[str, Assumption] = {}
        self.bound: dict[str, str] = {}
        """uid -> node of every bound pod (from the store, not assumptions)."""
        self._binder = _NoBinder()

    # ------------------------------------------------------------------ Handle
    @property
    def nodes(self) -> NodeColumns:
        return self.view.columns

    @property
    def binder(self) -> _NoBinder:
        return self._binder

    @property
    def cluster_objects(self) -> ClusterObjects:
        return self.view.cluster_objects

    @property
    def nominated_pods(self) -> dict[str, list[Pod]]:
        """Node name -> pods nominated there and not bound (nor assumed) yet."""
        if self._by_node is None:
            by_node: dict[str, list[Pod]] = {}
            for uid, pod in self._nominated.items():
                # A reserved or assumed preemptor is counted on its node already: its
                # nomination must not count it a second time.
                if not self.view.is_counted(uid):
                    by_node.setdefault(pod.status.nominated_node_name, []).append(pod)
            self._by_node = by_node
        return self._by_node

    @property
    def pod_disruption_budgets(self) -> list[PodDisruptionBudget]:
        return list(self.view.pdbs.values())

    @property
    def resource_version(self) -> int:
        return self.view.resource_version

    # ----------------------------------------------------------------- loading
    def load(self, snapshot: Snapshot) -> None:
        nodes = sorted(snapshot.nodes, key=lambda n: n.metadata.resource_version)
        snapshot.objects["Node"] = list(nodes)
        self.view.load(snapshot)
        self._nominated = {
            p.metadata.uid: p
            for p in snapshot.pods
            if not p.spec.node_name and p.status.nominated_node_name
        }
        self.bound = {p.metadata.uid: p.spec.node_name for p in snapshot.pods if p.spec.node_name}
        self._by_node = None
        self._drop_confirmed()

    def apply(self, changes: Sequence[Change]) -> None:
        self.view.apply(changes)
        touched = False
        for change in changes:
            if change.kind == RESERVATION and change.uid in self._nominated:
                touched = True  # a reserved preemptor stops counting as nominated
            if change.kind != "Pod":
                continue
            uid = change.uid
            pod = change.object
            if change.op == "put" and change.node_name:
                self.bound[uid] = change.node_name
            else:
                self.bound.pop(uid, None)
            if (
                change.op == "put"
                and isinstance(pod, Pod)
                and not pod.spec.node_name
                and pod.status.nominated_node_name
            ):
                self._nominated[uid] = pod
                touched = True
            elif self._nominated.pop(uid, None) is not None:
                touched = True
            if uid in self.assumed and not self.view.is_assumed(uid):
                del self.assumed[uid]  # the binding arrived (or the pod was deleted)
                touched = True
        if touched:
            self._by_node = None

    def _drop_confirmed(self) -> None:
        for uid in [uid for uid in self.assumed if not self.view.is_assumed(uid)]:
            del self.assumed[uid]

    # ---------------------------------------------------------------- assuming
    def assume(self, pod: Pod, node: str, attempt: int, now: float) -> Pod:
        """Count `pod` on `node` (upstream cache.AssumePod); returns the assumed copy."""
        uid = pod.metadata.uid
        assumed = replace(pod, spec=replace(pod.spec, node_name=node))
        if self.view.assume(assumed, node):
            self.assumed[uid] = Assumption(attempt, node, now)
            self._by_node = None
        return assumed

    def forget(self, uid: str, attempt: int | None = None) -> bool:
        """Drop the assumption of `uid` (only of `attempt`, when given)."""
        held = self.assumed.get(uid)
        if held is None or (attempt is not None and held.attempt != attempt):
            return False
        del self.assumed[uid]
        self.view.forget(uid)
        self._by_node = None
        return True

    def nominate(self, pod: Pod, node: str) -> None:
        """Record a nomination this worker just decided (upstream's nominator does so in
        process), so the next cycles count the preemptor on its node before the binder's
        nomination comes back through the stream."""
        uid = pod.metadata.uid
        if node:
            status = replace(pod.status, nominated_node_name=node)
            self._nominated[uid] = replace(pod, status=status)
        else:
            self._nominated.pop(uid, None)
        self._by_node = None

    def expire(self, now: float, ttl: float) -> int:
        stale = [uid for uid, held in self.assumed.items() if now - held.since > ttl]
        for uid in stale:
            self.forget(uid)
        return len(stale)

    def node(self, name: str) -> Node | None:
        row = self.view.columns.index.get(name)
        return None if row is None else self.view.columns.nodes[row]
