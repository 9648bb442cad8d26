"""The queue's informer: the store's change stream, turned into queue events.

Clients (`berth apply`, `berth delete`) and the binder write only the store; every fact the
queue acts on (a pod added, updated, bound or deleted; a node or a PodGroup changed) comes from
the store's change stream, as kube-scheduler's informers bring it from the API server. Kafka
carries only work (schedule requests, proposals, outcomes).

- **One tailer at a time.** Queue replicas elect one with a Redis lease (`lease_key`, renewed
  every third of its time); the others stand by. The applied position is kept in Redis
  (`cursor_key`), written only while the lease is held, so a new tailer resumes where the last
  one stopped.
- **Idempotent.** A change may be applied twice (a tailer that dies between applying a batch
  and recording its position): every queue step is idempotent (an upsert of a version the
  queue holds is an in-place update, an older version is dropped, deletes and wake-ups repeat
  harmlessly).
- **Old objects.** Update events carry the object before the change when this tailer saw it
  (queueing hints compare the two); after a restart the first update of an object carries none,
  which the queue treats conservatively (a node update wakes every pod a node update may help).
- **Gaps.** When the stream was trimmed past the cursor, the informer relists: every stored pod
  is upserted (or, when bound, reported bound), queued pods the store no longer has are
  deleted, and a node-add event wakes the unschedulable pods; then it follows from the
  snapshot's version.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from redis.asyncio import Redis

from services.queue.hints import (
    NODE_ADD,
    NODE_DELETE,
    POD_GROUP_ADD,
    POD_GROUP_DELETE,
    POD_GROUP_MEMBER_ADD,
    POD_GROUP_UPDATE,
    ActionType,
    ClusterEvent,
    Resource,
    node_update_event,
)
from services.queue.keys import QueueKeys
from services.queue.quota.workload import QUOTA_KINDS, QUOTA_OBJECTS_CHANGED, QuotaObjectsChanged
from services.queue.records import PodOp, PodRecord
from shared.messaging.wire import MessageError
from shared.models import POD_GROUP_LABEL, Node
from shared.models.evolve import evolve
from shared.runtime.lua import LuaScripts
from shared.runtime.retry import Retry
from shared.store import Change, ClusterStore, StreamGapError

log = logging.getLogger(__name__)

TAILER_LUA = LuaScripts("services.queue", folder="lua/standalone", prelude=None)
"""The tailer lease's scripts (lua/standalone/tail_*.lua: no queue prelude)."""


@dataclass(frozen=True, slots=True)
class PodChange:
    """A pod was added, updated or deleted (informer semantics; `old` when known)."""

    op: PodOp
    pod: PodRecord
    """The new object (for delete: the last known object)."""
    old: PodRecord | None = None


QueueEvent = PodChange | ClusterEvent | QuotaObjectsChanged
"""What the informer hands the queue: pod changes, and cluster events for the rest."""

Handler = Callable[[Sequence[QueueEvent]], Awaitable[None]]
Relist = Callable[[Sequence[PodRecord]], Awaitable[None]]

_RAW_KINDS = frozenset({"Pod"})
"""Kinds the informer reads undecoded (their records come from the bytes)."""

_POD_GROUP_EVENTS = {"add": POD_GROUP_ADD, "update": POD_GROUP_UPDATE, "delete": POD_GROUP_DELETE}


class StoreInformer:
    """Tails the change stream for the queue; see the module docstring."""

    def __init__(
        self,
        redis: Redis,
        store: ClusterStore,
        *,
        key_prefix: str,
        replica_id: str,
        handle: Handler,
        relist: Relist,
        lease_seconds: float = 6.0,
        block_ms: int = 200,
        count: int = 2000,
        linger_seconds: float = 0.05,
    ) -> None:
        self.redis = redis
        self.store = store
        keys = QueueKeys(key_prefix)
        self.lease_key = keys.informer_lease
        self.cursor_key = keys.informer_cursor
        self.replica_id = replica_id
        self._handle = handle
        self._relist = relist
        self._lease_ms = int(lease_seconds * 1000)
        self._block_ms = block_ms
        self._count = count
        self._acquire = TAILER_LUA.register(redis, "tail_acquire")
        self._advance = TAILER_LUA.register(redis, "tail_advance")
        self._release = TAILER_LUA.register(redis, "tail_release")
        self._pods: dict[str, PodRecord] = {}
        """key -> the pod as last seen (the `old` of its next update)."""
        self._linger = linger_seconds
        self._nodes: dict[str, Node] = {}
        self._groups: set[str] = set()
        self.position = 0
        """The last resourceVersion this replica applied."""
        self.leading = False
        self.relists = 0
        self._retry = Retry("informer: tailing the change stream", log)

    # ------------------------------------------------------------------ running
    async def run(self, stop: asyncio.Event) -> None:
        """Stand by, tail while holding the lease, until `stop` is set. Redis trouble ends
        the term (the next one resumes from the cursor) after a growing pause."""
        while not stop.is_set():
            pause = self._lease_ms / 3000
            try:
                if await self._take_lease():
                    await self._lead(stop)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 (Retry logs it)
                # Redis went away: stand by and try again
                pause = self._retry.failed(exc)
            finally:
                self.leading = False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), pause)
        with contextlib.suppress(Exception):
            await self._release(keys=[self.lease_key], args=[self.replica_id])

    async def _take_lease(self) -> bool:
        """Take or renew the lease: whether this replica holds it."""
        return bool(
            await self._acquire(keys=[self.lease_key], args=[self.replica_id, self._lease_ms])
        )

    async def _lead(self, stop: asyncio.Event) -> None:
        self.leading = True
        term_over = asyncio.Event()
        renew = asyncio.create_task(self._renew(stop, term_over), name="queue-informer-lease")
        try:
            raw = await self.redis.get(self.cursor_key)
            self.position = int(raw or 0)
            self._pods.clear()
            self._nodes.clear()
            self._groups.clear()
            while not term_over.is_set():
                try:
                    await self._follow(term_over)
                except StreamGapError as gap:
                    log.warning("informer: %s; relisting", gap)
                    await self.relist()
        except _LeaseLostError:
            log.warning("informer: another replica holds the lease; standing by")
        finally:
            term_over.set()
            renew.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renew

    async def _renew(self, stop: asyncio.Event, term_over: asyncio.Event) -> None:
        """Keep the lease; end the term when it is lost or the service stops."""
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._lease_ms / 3000)
                if stop.is_set():
                    break
                if not await self._take_lease():
                    log.warning("informer: lease lost; standing by")
                    break
        finally:
            term_over.set()

    async def _follow(self, term_over: asyncio.Event) -> None:
        async for batch in self.store.follow_batches(
            self.position,
            block_ms=self._block_ms,
            count=self._count,
            stop=term_over,
            raw_kinds=_RAW_KINDS,
        ):
            events = self.events(batch)
            if events:
                await self._handle(events)
            await self._record(batch[-1].resource_version)
            if len(batch) < self._count and self._linger > 0 and not brings_work(events):
                # A short batch of bindings: let the stream gather more before the next
                # read, so the queue's steps (one script call per run of alike events) carry
                # many pods. A batch that brings work (a pending pod, a node, a placed pod
                # gone) is followed at once: the pods it may let in wait for nothing.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(term_over.wait(), self._linger)

    async def _record(self, position: int) -> None:
        self.position = position
        held = await self._advance(
            keys=[self.lease_key, self.cursor_key],
            args=[self.replica_id, position, self._lease_ms],
        )
        if not held:
            raise _LeaseLostError
        self._retry.succeeded()

    async def relist(self) -> None:
        """Bring the queue in line with a fresh snapshot, then follow from it."""
        snapshot = await self.store.load_snapshot()
        self.relists += 1
        self._pods = {pod.key: PodRecord.from_pod(pod) for pod in snapshot.pods}
        self._nodes = {node.metadata.name: node for node in snapshot.nodes}
        await self._relist(list(self._pods.values()))
        await self._record(snapshot.resource_version)

    # ----------------------------------------------------------------- changes
    def events(self, changes: Sequence[Change]) -> list[QueueEvent]:
        """The queue events of a batch of changes (reservations and other kinds: none)."""
        out: list[QueueEvent] = []
        for change in changes:
            if change.kind == "Pod":
                event = self._pod_change(change)
                if event is not None:
                    if _joins_a_gang(event):
                        # Before the pod itself: the move it requests is for the siblings
                        # parked before it came. After it, a dispatch between the two steps
                        # would pop the new pod first and count its own arrival as a move
                        # request during its attempt (an unschedulable outcome -> backoff).
                        out.append(POD_GROUP_MEMBER_ADD)
                    out.append(event)
            elif change.kind == "Node":
                out.append(self._node_change(change))
            if change.kind in QUOTA_KINDS and (not out or out[-1] is not QUOTA_OBJECTS_CHANGED):
                out.append(QUOTA_OBJECTS_CHANGED)
            if change.kind == "PodGroup":
                if change.op == "delete":
                    self._groups.discard(change.key)
                    out.append(_POD_GROUP_EVENTS["delete"])
                else:
                    known = change.key in self._groups
                    self._groups.add(change.key)
                    out.append(_POD_GROUP_EVENTS["update" if known else "add"])
        return out

    def _pod_change(self, change: Change) -> PodChange | None:
        """Pods are read raw (`PodRecord.from_stored`): the queue needs their routing fields
        and bytes, never the Pod itself."""
        old = self._pods.get(change.key)
        if old is not None and old.uid != change.uid:
            old = None  # a new pod under an old name
        record: PodRecord | None
        if change.op == "delete":
            self._pods.pop(change.key, None)
            record = old if old is not None else self._pod_record(change)
            return None if record is None else PodChange("delete", record)
        if (
            change.same_body
            and change.node_name
            and old is not None
            and not old.node_name
            and old.resource_version < change.resource_version
        ):
            # A binding: the stored object is the pending pod's, bound. Its record is the
            # pending record, bound (the queue routes a bound pod by its node and labels;
            # body and fingerprint describe the same spec), without reading it again.
            record = evolve(
                old,
                node_name=change.node_name,
                nominated_node_name=change.nominated_node_name,
                resource_version=change.resource_version,
            )
        else:
            record = self._pod_record(change)
        if record is None:
            return None
        self._pods[change.key] = record
        return PodChange("add" if old is None else "update", record, old)

    @staticmethod
    def _pod_record(change: Change) -> PodRecord | None:
        try:
            return PodRecord.from_stored(
                change.raw,
                change.resource_version,
                change.uid,
                change.node_name,
                change.nominated_node_name,
            )
        except MessageError as exc:
            log.warning("informer: pod %s at %d: %s", change.key, change.resource_version, exc)
            return None

    def _node_change(self, change: Change) -> ClusterEvent:
        name = change.key
        old = self._nodes.get(name)
        if change.op == "delete":
            self._nodes.pop(name, None)
            return NODE_DELETE
        new = change.object
        if not isinstance(new, Node):
            return ClusterEvent(Resource.NODE, ActionType.UPDATE, "NodeUpdate")
        self._nodes[name] = new
        if old is None:
            # Unknown before: a new node, or one changed while no tailer watched.
            return NODE_ADD
        return node_update_event(old, new) or ClusterEvent(
            Resource.NODE, ActionType.NONE, "NodeUpdate"
        )


def _joins_a_gang(event: PodChange) -> bool:
    """A new pending pod labelled for a PodGroup."""
    pod = event.pod
    return event.op == "add" and not pod.node_name and POD_GROUP_LABEL in pod.labels


def brings_work(events: Sequence[QueueEvent]) -> bool:
    """Whether the queue may have something new to dispatch after these events: a pending pod
    added or changed, a cluster event that may wake parked pods, or a placed pod gone (it
    gives back its node's room, AssignedPodDelete, and its quota: the next admission round
    waits for it). Bindings and the deletion of pending pods bring none."""
    for event in events:
        if isinstance(event, ClusterEvent | QuotaObjectsChanged):
            return True
        if event.op == "delete" and event.pod.node_name:
            return True
        if event.op != "delete" and not event.pod.node_name:
            return True
    return False


class _LeaseLostError(Exception):
    """Another replica took the lease: this one stops tailing."""
