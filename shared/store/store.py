"""The cluster store: Kubernetes objects in Redis, a resourceVersion counter, a change stream.

    store = ClusterStore(redis, cluster="default")
    await store.apply([node, pod])                 # one Lua script per batch
    pod = await store.get("Pod", "default", "web-1")
    snapshot = await store.load_snapshot()         # every object + usage at one rv
    async for change in store.follow(snapshot.resource_version):
        ...

Every write is one Lua script that bumps the counter and appends the change-stream entry
(id "<rv>-0", trimmed with MAXLEN ~) next to the data it changes, so a follower that loaded a
snapshot at rv R and reads the stream after R sees every later change exactly once, and notices
(StreamGapError) when the stream was trimmed past R. Objects are stored as
`shared.models.codec` bytes; the authoritative resourceVersion and uid of each object, and a
pod's binding and nomination, live beside them and are set on the decoded objects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from shared.models import Node, Pod, PodGroup, decode, decode_many, encode
from shared.models.codec import CodecError
from shared.models.evolve import evolve
from shared.models.schema import KIND_BY_CLASS, KindInfo, KubeObject
from shared.store.batch import ScriptPipeline
from shared.store.bindings import Bindings, HeldReservation
from shared.store.errors import ApplyRejectedError, CorruptObjectError, StreamGapError
from shared.store.keys import KINDS, StoreKeys, check_kind, object_key
from shared.store.records import NodeUsage, node_facts, pack, pod_facts
from shared.store.scripts import StoreScripts

log = logging.getLogger(__name__)

DEFAULT_STREAM_MAXLEN = 200_000
APPLY_BATCH = 256
"""Objects per apply script: keeps one script call short (Redis runs nothing else meanwhile)."""

T = TypeVar("T")
ChangeOp = Literal["put", "delete"]
ObjectList = list[KubeObject]
ChangeList = list["Change"]
RESERVATION = "Reservation"
"""The change-stream kind of reservations (see `Change.holder`)."""
PreviousLookup = Callable[[str, str], KubeObject | None]
"""(kind, key) -> a follower's current copy of the object (see `ClusterStore.follow`)."""


@dataclass(frozen=True, slots=True)
class Applied:
    """What apply wrote for one object."""

    kind: str
    key: str
    resource_version: int
    uid: str


@dataclass(slots=True)
class Change:
    """One entry of the change stream (read-only by convention: not frozen, because every
    follower builds one per change of the cluster, and a frozen dataclass's `__init__`
    costs 1.4 µs for these fields against 0.25 µs)."""

    resource_version: int
    op: ChangeOp
    kind: str
    key: str
    uid: str
    object: KubeObject | None
    """The object after the change (for a delete: the last stored object). None if the stored
    bytes did not decode (logged)."""
    node_name: str = ""
    """Pods: the node the pod is bound to ("" when not bound)."""
    nominated_node_name: str = ""
    same_body: bool = False
    """The stored object did not change, only what is kept beside it (a pod's binding or
    nomination): `object` is the follower's previous copy, restamped, when it had one."""
    holder: str = ""
    """Reservations (kind RESERVATION, `key` the pod's, `node_name` its node, `object`
    None; op "put" taken, "delete" released): the binder holding it."""
    raw: bytes = b""
    """The stored bytes, undecoded (`object` None), for kinds the follower asked to read
    raw (`follow_batches(raw_kinds=...)`): resourceVersion, uid, binding and nomination
    are the fields above, not in the bytes."""
    attempt: int = 0
    """Reservations ending ("delete"): the attempt that ended without a binding (0: not
    told). Schedulers forget their assumption of that attempt."""
    usage: NodeUsage | None = None
    """An attempt refused by check-and-reserve: the node's usage in the store at this very
    change (views check what they count there against it)."""


@dataclass(frozen=True, slots=True)
class BodiesSkipped:
    """Stream entries whose stored object a follower does not decode (its Change has
    `object` None): decoding is most of what following costs, and every follower pays it
    for every change of the cluster."""

    deleted: bool = False
    """Deletions (the object as it was last stored): a view drops what it holds by key."""
    unbound_pods: bool = False
    """Puts of pods not bound to a node (created, updated or put back to waiting)."""

    def skips(self, kind: str, op: ChangeOp, node: str) -> bool:
        if op == "delete":
            return self.deleted
        return self.unbound_pods and kind == "Pod" and not node


@dataclass(slots=True)
class Snapshot:
    """Every object, the per-node usage and the reservations held, as of
    `resource_version`."""

    resource_version: int
    objects: dict[str, list[KubeObject]] = field(default_factory=dict)
    usage: dict[str, NodeUsage] = field(default_factory=dict)
    reservations: list[HeldReservation] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[KubeObject]:
        return self.objects.get(check_kind(kind), [])

    @property
    def nodes(self) -> list[Node]:
        return cast(list[Node], self.of_kind("Node"))

    @property
    def pods(self) -> list[Pod]:
        return cast(list[Pod], self.of_kind("Pod"))

    @property
    def pod_groups(self) -> list[PodGroup]:
        return cast(list[PodGroup], self.of_kind("PodGroup"))


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


def _pairs(flat: Sequence[Any]) -> dict[str, Any]:
    return {_text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}


def _meta(raw: bytes | str) -> tuple[int, str]:
    rv, _, uid = _text(raw).partition(" ")
    return int(rv), uid


def decorate(
    obj: KubeObject, rv: int, uid: str, node: str | None = None, nominated: str | None = None
) -> KubeObject:
    """Set what the store keeps beside the bytes: resourceVersion, uid, binding, nomination."""
    obj.metadata.resource_version = rv
    obj.metadata.uid = uid
    if isinstance(obj, Pod):
        if node is not None:
            obj.spec.node_name = node
        if nominated is not None:
            obj.status.nominated_node_name = nominated
    return obj


class ClusterStore:
    """Objects of one cluster (hash tag `{cluster}`) in Redis; see the module docstring."""

    def __init__(
        self,
        redis: Redis,
        *,
        cluster: str = "default",
        prefix: str = "berth:",
        stream_maxlen: int = DEFAULT_STREAM_MAXLEN,
    ) -> None:
        self.redis = redis
        self.keys = StoreKeys(prefix, cluster)
        self.stream_maxlen = stream_maxlen
        self.scripts = StoreScripts.register(redis)
        self.bindings = Bindings(redis, self.keys, self.scripts, stream_maxlen)

    # ------------------------------------------------------------------ writes
    async def apply(self, objects: Iterable[KubeObject], *, kubelet: bool = False) -> list[Applied]:
        """Create or update objects; an existing object keeps its uid. All of them are
        written, or (ApplyRejectedError) none: every batch of APPLY_BATCH objects (one
        script each) is encoded, and checked by the store when it holds a pod with
        spec.nodeName (the only pods apply.lua checks), before the first is written, and
        each script checks its batch again before writing any of it. (A binder starting to
        bind one of the pods between the two checks is the only way an apply of several
        batches can stop half way.) A pod with spec.nodeName is bound at once (its usage
        counted); `kubelet`: a user's write, where such a pod must fit what its node has left
        (ApplyRejectedError with the kubelet's reason, OutOfcpu and the like, otherwise)."""
        items = list(objects)
        batches = [
            _ApplyBatch.of(items[i : i + APPLY_BATCH], i, kubelet)
            for i in range(0, len(items), APPLY_BATCH)
        ]
        if len(batches) > 1:
            await self._check(batches)
        out: list[Applied] = []
        for batch in batches:
            out.extend(await self._write(batch))
        return out

    async def check_apply(self, objects: Sequence[KubeObject], *, kubelet: bool = False) -> None:
        """What `apply` checks before writing, alone (ApplyRejectedError, or nothing): for a
        caller that writes several applies as one. Without a pod with spec.nodeName among
        `objects` the store has nothing to check: only their kinds and names are, here, and
        nothing is encoded (the applies that follow encode them; decoded objects encode)."""
        for obj in objects:
            _stored_kind(obj)
        if not any(_checked_by_store(obj) for obj in objects):
            return
        await self._check(
            [
                _ApplyBatch.of(objects[i : i + APPLY_BATCH], i, kubelet)
                for i in range(0, len(objects), APPLY_BATCH)
            ]
        )

    async def _check(self, batches: Sequence[_ApplyBatch]) -> None:
        """The store's checks of every batch (a batch of new pods was otherwise sent twice:
        nothing is sent when no pod has spec.nodeName)."""
        if any(batch.bound_by_name for batch in batches):
            for batch in batches:
                await self._call_apply(batch, "check")

    async def _write(self, batch: _ApplyBatch) -> list[Applied]:
        reply = await self._call_apply(batch, self.stream_maxlen)
        return [
            Applied(kind, key, int(reply[2 * i]), _text(reply[2 * i + 1]))
            for i, (kind, key) in enumerate(batch.names)
        ]

    async def _call_apply(self, batch: _ApplyBatch, mode: str | int) -> Any:
        reply = await self.scripts.apply(keys=[self.keys.rv], args=[mode, *batch.args])
        if reply and _text(reply[0]) == "err":
            index = int(reply[1])
            raise ApplyRejectedError(batch.offset + index, _text(reply[2]))
        return reply

    async def delete(
        self, kind: str, namespace: str, name: str, *, uid: str | None = None
    ) -> int | None:
        """Delete an object (only if its uid is `uid`, when given). Returns the change's
        resourceVersion, or None when there was nothing (with that uid) to delete. A pod gives
        back its reservation or binding (node usage) and its nomination in the same script."""
        (rv,) = await self.delete_all([(kind, namespace, name, uid)])
        return rv

    async def delete_all(
        self,
        objects: Sequence[tuple[str, str, str, str | None]],
        *,
        ahead: Callable[[Pipeline], object] | None = None,
    ) -> list[int | None]:
        """`delete` of each (kind, namespace, name, uid), in order, in one round trip (a
        script call each): the node agent ends hundreds of pods a second. `ahead` queues
        plain commands that go first in the same round trip: what must be written before
        anyone sees the objects gone (why a pod ended), without a round trip of its own."""
        if not objects:
            return []
        pipe = ScriptPipeline(self.redis)
        if ahead is not None:
            ahead(pipe.pipe)
        first = len(pipe.pipe)
        for kind, namespace, name, uid in objects:
            key = object_key(check_kind(kind), namespace, name)
            args: list[str | int] = [self.stream_maxlen, kind, key, uid or ""]
            pipe.call(self.scripts.delete, [self.keys.rv], args)
        replies = (await pipe.execute())[first:]
        return [rv if (rv := int(reply[0])) > 0 else None for reply in replies]

    # ------------------------------------------------------------------- reads
    async def resource_version(self) -> int:
        return int(await self.redis.get(self.keys.rv) or 0)

    async def get(self, kind: str, namespace: str, name: str) -> KubeObject | None:
        key = object_key(check_kind(kind), namespace, name)
        pipe = self.redis.pipeline(transaction=True)
        pipe.hget(self.keys.objects(kind), key)
        pipe.hget(self.keys.meta(kind), key)
        if kind == "Pod":
            pipe.hget(self.keys.pod_node, key)
            pipe.hget(self.keys.nominated_of, key)
        reply = await pipe.execute()
        body, meta = reply[0], reply[1]
        if body is None or meta is None:
            return None
        rv, uid = _meta(meta)
        obj = self._decode(kind, key, body)
        if kind == "Pod":
            return decorate(obj, rv, uid, _text(reply[2]), _text(reply[3]))
        return decorate(obj, rv, uid)

    async def get_pod(self, namespace: str, name: str) -> Pod | None:
        obj = await self.get("Pod", namespace, name)
        return obj if isinstance(obj, Pod) else None

    async def get_node(self, name: str) -> Node | None:
        obj = await self.get("Node", "", name)
        return obj if isinstance(obj, Node) else None

    async def get_as(self, cls: type[T], namespace: str, name: str) -> T | None:
        """`get` of the kind whose model class is `cls`, typed."""
        obj = await self.get(KIND_BY_CLASS[cls].kind, namespace, name)
        return obj if isinstance(obj, cls) else None

    async def list(self, kind: str) -> list[KubeObject]:
        pipe = self.redis.pipeline(transaction=True)
        pipe.hgetall(self.keys.objects(check_kind(kind)))
        pipe.hgetall(self.keys.meta(kind))
        if kind == "Pod":
            pipe.hgetall(self.keys.pod_node)
            pipe.hgetall(self.keys.nominated_of)
        reply = await pipe.execute()
        bodies = {_text(k): v for k, v in reply[0].items()}
        metas = {_text(k): v for k, v in reply[1].items()}
        nodes = {_text(k): _text(v) for k, v in reply[2].items()} if kind == "Pod" else {}
        noms = {_text(k): _text(v) for k, v in reply[3].items()} if kind == "Pod" else {}
        return self._decode_all(kind, bodies, metas, nodes, noms)

    async def usage(self, node: str) -> NodeUsage:
        """What the pods reserved or bound on `node` use (and how many there are)."""
        return NodeUsage.from_hash(await self.redis.hgetall(self.keys.usage(node)))

    async def load_snapshot(self) -> Snapshot:
        """Every object, its binding and nomination, and every node's usage, read by one
        script: all of it as of `Snapshot.resource_version`, the position to follow from."""
        reply = await self.scripts.snapshot(keys=[self.keys.rv], args=list(KINDS))
        snapshot = Snapshot(resource_version=int(reply[0]))
        at = 1 + 2 * len(KINDS)
        nodes = {k: _text(v) for k, v in _pairs(reply[at]).items()}
        noms = {k: _text(v) for k, v in _pairs(reply[at + 1]).items()}
        for i, kind in enumerate(KINDS):
            bodies = _pairs(reply[1 + 2 * i])
            metas = _pairs(reply[2 + 2 * i])
            pod_nodes, pod_noms = (nodes, noms) if kind == "Pod" else ({}, {})
            snapshot.objects[kind] = self._decode_all(kind, bodies, metas, pod_nodes, pod_noms)
        usage: Any = reply[at + 2]
        for i in range(0, len(usage), 2):
            snapshot.usage[_text(usage[i])] = NodeUsage.from_hash(_pairs(usage[i + 1]))
        held: Any = reply[at + 3]
        snapshot.reservations = [
            HeldReservation(*(_text(value) for value in held[i : i + 4]))
            for i in range(0, len(held), 4)
        ]
        return snapshot

    def _decode(self, kind: str, key: str, body: bytes) -> KubeObject:
        try:
            return decode(body)
        except CodecError as exc:
            raise CorruptObjectError(f"{kind} {key}: {exc}") from exc

    def _decode_all(
        self,
        kind: str,
        bodies: Mapping[str, bytes],
        metas: Mapping[str, Any],
        nodes: Mapping[str, str],
        noms: Mapping[str, str],
    ) -> ObjectList:
        keys = sorted(k for k in bodies if k in metas)
        try:
            objects = decode_many(bodies[k] for k in keys)
        except CodecError:
            objects = [self._decode(kind, k, bodies[k]) for k in keys]
        out: ObjectList = []
        for key, obj in zip(keys, objects, strict=True):
            rv, uid = _meta(metas[key])
            if kind == "Pod":
                decorate(obj, rv, uid, nodes.get(key, ""), noms.get(key, ""))
            else:
                decorate(obj, rv, uid)
            out.append(obj)
        return out

    # ------------------------------------------------------------------ follow
    async def follow(
        self,
        after: int,
        *,
        block_ms: int = 1000,
        count: int = 1000,
        stop: asyncio.Event | None = None,
        previous: PreviousLookup | None = None,
    ) -> AsyncIterator[Change]:
        """Every change with a resourceVersion above `after`, in order (XREAD BLOCK), until
        `stop` is set (forever without one). Raises StreamGapError when some were trimmed.

        Prefer `stop` to cancelling the consuming task: cancelling a blocked redis-py
        command can leave its connection (and the cancelled task) hanging.

        `previous(kind, key)`: the follower's current copy of an object, if it keeps one. A
        change that left the stored bytes as they were (a binding, a nomination) then reuses
        it instead of decoding the same bytes again."""
        async for batch in self.follow_batches(
            after, block_ms=block_ms, count=count, stop=stop, previous=previous
        ):
            for change in batch:
                yield change

    async def follow_batches(
        self,
        after: int,
        *,
        block_ms: int = 1000,
        count: int = 1000,
        stop: asyncio.Event | None = None,
        previous: PreviousLookup | None = None,
        raw_kinds: frozenset[str] = frozenset(),
        skip: BodiesSkipped = BodiesSkipped(),
    ) -> AsyncIterator[Sequence[Change]]:
        """`follow`, a batch (up to `count` changes) at a time; `stop` is looked at at least
        every `block_ms`. `skip`: the bodies this follower has no use for (left undecoded:
        `object` None)."""
        position = after
        stream = self.keys.stream
        while stop is None or not stop.is_set():
            reply: Any = await self.redis.xread(
                {stream: f"{position}-0"}, count=count, block=block_ms
            )
            if not reply:
                continue
            batch: ChangeList = []
            latest: dict[tuple[str, str], KubeObject | None] = {}
            """This batch's objects: the previous copy of a later change in the batch."""
            for entry_id, fields in reply[0][1]:
                rv = int(_text(entry_id).partition("-")[0])
                if rv != position + 1:
                    raise StreamGapError(position, rv)
                change = self._change(rv, fields, latest, previous, raw_kinds, skip)
                latest[(change.kind, change.key)] = change.object
                batch.append(change)
                position = rv
            yield batch

    def _change(
        self,
        rv: int,
        fields: Mapping[bytes, bytes],
        latest: Mapping[tuple[str, str], KubeObject | None],
        previous: PreviousLookup | None,
        raw_kinds: frozenset[str] = frozenset(),
        skip: BodiesSkipped = BodiesSkipped(),
    ) -> Change:
        kind = _text(fields.get(b"k"))
        key = _text(fields.get(b"n"))
        op: ChangeOp = "delete" if fields.get(b"o") == b"del" else "put"
        uid = _text(fields.get(b"u"))
        node = _text(fields.get(b"node"))
        nominated = _text(fields.get(b"nom"))
        same = fields.get(b"same") == b"1"
        obj: KubeObject | None = None
        if same and previous is not None and kind == "Pod":
            held = latest[(kind, key)] if (kind, key) in latest else previous(kind, key)
            if isinstance(held, Pod) and held.metadata.uid == uid:
                return Change(
                    rv,
                    op,
                    kind,
                    key,
                    uid,
                    restamp(held, rv, node, nominated),
                    node,
                    nominated,
                    True,
                )
        body = fields.get(b"b")
        if kind in raw_kinds:
            holder = _text(fields.get(b"h"))
            raw = body if body is not None else b""
            return Change(rv, op, kind, key, uid, None, node, nominated, same, holder, raw)
        if body is not None and not skip.skips(kind, op, node):
            try:
                obj = decode(body)
            except CodecError as exc:
                log.warning("change %d: %s %s does not decode: %s", rv, kind, key, exc)
            else:
                if kind == "Pod":
                    decorate(obj, rv, uid, node, nominated)
                else:
                    decorate(obj, rv, uid)
        holder = _text(fields.get(b"h"))
        if kind == RESERVATION and op == "delete":
            attempt = int(fields.get(b"att") or 0)
            packed = fields.get(b"usage")
            usage = NodeUsage.from_packed(packed) if packed else None
            return Change(
                rv, op, kind, key, uid, None, node, nominated, same, holder, b"", attempt, usage
            )
        return Change(rv, op, kind, key, uid, obj, node, nominated, same, holder)


@dataclass(frozen=True, slots=True)
class _ApplyBatch:
    """One apply script's objects, encoded once (for the store's check pass and the write)."""

    offset: int
    """Where the batch starts in the apply (ApplyRejectedError's index)."""
    args: list[Any]
    """apply.lua's arguments after the first (its mode): n, then (kind, key, body, uid,
    facts) per object."""
    names: list[tuple[str, str]]
    bound_by_name: bool
    """A pod of the batch has spec.nodeName (only those have anything to check)."""

    @classmethod
    def of(cls, batch: Sequence[KubeObject], offset: int, kubelet: bool) -> _ApplyBatch:
        args: list[Any] = [len(batch)]
        names: list[tuple[str, str]] = []
        bound_by_name = any(_checked_by_store(obj) for obj in batch)
        for obj in batch:
            info = _stored_kind(obj)
            meta = obj.metadata
            key = object_key(info.kind, meta.namespace, meta.name)
            facts = b""
            if isinstance(obj, Node):
                facts = pack(node_facts(obj))
            elif isinstance(obj, Pod):
                facts = pack(pod_facts(obj, kubelet=kubelet))
            args.extend((info.kind, key, encode(obj), meta.uid, facts))
            names.append((info.kind, key))
        return cls(offset, args, names, bound_by_name)


def _checked_by_store(obj: KubeObject) -> bool:
    """Whether apply.lua's check pass looks at `obj`: a pod with spec.nodeName (bound as
    applied: it must not move, nor be bound by a binder meanwhile, and may have to fit)."""
    return isinstance(obj, Pod) and bool(obj.spec.node_name)


def _stored_kind(obj: KubeObject) -> KindInfo:
    """The kind `obj` is stored as (TypeError for a class the store does not keep,
    ValueError for an object without a name)."""
    info = KIND_BY_CLASS.get(type(obj))
    if info is None:
        raise TypeError(f"cannot store a {type(obj).__name__}")
    if not obj.metadata.name:
        raise ValueError(f"{info.kind} without metadata.name")
    return info


def restamp(pod: Pod, rv: int, node: str, nominated: str) -> Pod:
    """A copy of `pod` at resourceVersion `rv`, bound to `node` and nominated to `nominated`
    (what `decorate` sets on a decoded pod); the parts that did not change are shared."""
    spec, status = pod.spec, pod.status
    if spec.node_name != node:
        spec = evolve(spec, node_name=node)
    if status.nominated_node_name != nominated:
        status = evolve(status, nominated_node_name=nominated)
    return evolve(pod, metadata=evolve(pod.metadata, resource_version=rv), spec=spec, status=status)
