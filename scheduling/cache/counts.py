"""What counts on each node of a cluster cache, and why: bound pods, pods this scheduler
assumed (upstream cache.AssumePod, until their binding arrives, they are forgotten or they
expire), pods another holder reserved (streamed reservations, counted as of a resourceVersion),
and bound pods whose node the view does not have yet (orphans, counted when it comes).

ClusterCache (scheduling/cache/cache.py) builds on it: it feeds these counts from a snapshot and
the change stream, and keeps the other objects and the nominations.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from scheduling.framework.columns import NodeColumns
from shared.models import Node, Pod
from shared.models.evolve import evolve
from shared.store import NodeUsage


@dataclass(slots=True)
class Assumption:
    """A pod this scheduler placed, counted on its node until its binding arrives."""

    attempt: int
    """The queue's attempt number (0 in the dry run)."""
    node: str
    since: float


class NodeCounts:
    """The pods counted on each node (NodeColumns) and the reason each one counts."""

    def __init__(self, holder: str | None = None) -> None:
        self.holder = holder
        """The binder this cache belongs to (its reservations are assumed, not streamed in);
        None: reservations are not counted."""
        self.columns = NodeColumns()
        self._counted: dict[str, Pod] = {}
        """uid -> the pod counted in `columns` (bound, assumed, or reserved by a holder)."""
        self.assumed: dict[str, Assumption] = {}
        """uid -> the assumption of a pod this scheduler placed (counted, not bound yet)."""
        self._reserved: dict[str, int] = {}
        """uid -> resourceVersion of the reservation entry, for pods counted because another
        binder reserved them (0: held at the snapshot)."""
        self._live: dict[str, tuple[str, str, int]] = {}
        """uid -> (pod key, node, resourceVersion) of every reservation of another holder the
        stream reported and did not end yet, counted or not: a pod counted as an assumption
        when its reservation arrived is counted as reserved once the assumption is dropped."""
        self._orphans: dict[str, dict[str, Pod]] = {}
        """node -> uid -> bound pods whose node the view does not have (yet)."""
        self.pods: dict[str, Pod] = {}
        """Every pod (bound or not) by "namespace/name", as the store last streamed it. Do
        not mutate: the same objects are counted in `columns`."""

    def _counts_changed(self) -> None:
        """An assumption started or was dropped (ClusterCache: its nominations count anew)."""

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
        reserved = on_node(pod, node)
        self.columns.add_pod(reserved)
        self._counted[pod.metadata.uid] = reserved
        self._reserved[pod.metadata.uid] = rv

    def _uncount(self, uid: str) -> None:
        pod = self._counted.pop(uid, None)
        self.assumed.pop(uid, None)
        self._reserved.pop(uid, None)
        if pod is not None:
            self.columns.remove_pod(pod)

    def _shortfall(self, row: int, usage: NodeUsage) -> str:
        """What the view counts short of `usage` on the node of `row` ("" when nothing)."""
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
            if uid in self.assumed or uid in self._reserved:
                self.assumed.pop(uid, None)
                self._reserved.pop(uid, None)
            else:
                self._orphans.setdefault(name, {})[uid] = pod
        self.columns.remove_node(name)

    def assume(self, pod: Pod, node: str, attempt: int = 0, now: float = 0.0) -> Pod:
        """Count `pod` on `node` until its binding arrives or it is forgotten (upstream
        cache.AssumePod); returns the assumed copy (spec.nodeName set). A node the cache does
        not have, or a pod already counted, changes nothing."""
        assumed = pod if pod.spec.node_name == node else on_node(pod, node)
        uid = pod.metadata.uid
        if node not in self.columns.index or uid in self._counted:
            return assumed
        self.columns.add_pod(assumed)
        self._counted[uid] = assumed
        self.assumed[uid] = Assumption(attempt, node, now)
        self._counts_changed()
        return assumed

    def for_attempt(self, attempt: int = 0, now: float = 0.0) -> AttemptCache:
        """The cycle's PodCache (assume/forget) for one attempt of the queue's."""
        return AttemptCache(self, attempt, now)

    def take_over(self, uid: str) -> int | None:
        """Stop counting a pod reserved by another binder (or assumed here), which this
        binder adopts and checks itself: a pod must not meet itself in its own check.
        Returns the resourceVersion of the reservation when the view had counted it."""
        taken_at = self._reserved.get(uid)
        if taken_at is not None or uid in self.assumed:
            self._uncount(uid)
        return taken_at

    def forget(self, uid: str, attempt: int | None = None) -> bool:
        """Drop an assumed pod (Unreserve; only the assumption of `attempt` when given); a
        pod whose binding arrived stays. If a holder's reservation of it is live (a worker's
        proposal, reserved, waiting at Permit), the reservation counts from now on."""
        held = self.assumed.get(uid)
        if held is None or (attempt is not None and held.attempt != attempt):
            return False
        self._uncount(uid)
        self._counts_changed()
        live = self._live.get(uid)
        if live is not None:
            key, node, rv = live
            pod = self.pods.get(key)
            if pod is not None and pod.metadata.uid == uid:
                self._count_reserved(pod, node, rv)
        return True

    def expire(self, now: float, ttl: float) -> int:
        """Forget assumptions older than `ttl` (their binder died; the queue dispatches the
        pod again); how many."""
        stale = [uid for uid, held in self.assumed.items() if now - held.since > ttl]
        for uid in stale:
            self.forget(uid)
        return len(stale)

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

    def is_assumed(self, uid: str) -> bool:
        return uid in self.assumed

    def is_counted(self, uid: str) -> bool:
        """Whether the pod is counted on a node (bound, assumed, or reserved by a holder)."""
        return uid in self._counted

    def bound_pods(self) -> list[Pod]:
        return list(self.columns.pods())


def on_node(pod: Pod, node: str) -> Pod:
    """A shallow copy of the pod with spec.nodeName set (the stored pod is not touched)."""
    return evolve(pod, spec=evolve(pod.spec, node_name=node))


class AttemptCache:
    """The scheduling cycle's PodCache over a NodeCounts, for one attempt."""

    __slots__ = ("attempt", "cache", "now")

    def __init__(self, cache: NodeCounts, attempt: int, now: float) -> None:
        self.cache = cache
        self.attempt = attempt
        self.now = now

    def assume(self, pod: Pod, node_name: str) -> Pod:
        return self.cache.assume(pod, node_name, self.attempt, self.now)

    def forget(self, pod: Pod) -> None:
        self.cache.forget(pod.metadata.uid, self.attempt)
