"""What the adapter writes into berth's store for each object the API server shows it.

`admit_pod` decides which pods the store holds (kube-scheduler's informer filters):
- a pod bound to a node (spec.nodeName) counts on that node, whoever scheduled it, until it
  is deleted or terminal (Succeeded/Failed pods hold no resources);
- a pending pod is berth's when its schedulerName names one of berth's profiles, and it is
  not being deleted (upstream skips pods with a deletionTimestamp);
- everything else is left to the scheduler it names.

A pending pod of berth's with a PersistentVolumeClaim or a generic ephemeral volume is not
taken (`claim_volume`): berth has no volume plugins (VolumeBinding, VolumeZone, the volume
limits), so it could neither place the pod where its volume is nor bind the claim, and the
pod would sit on a node waiting for a volume. Nor is a pod with DRA `resourceClaims`
(`claim_devices`): berth has no DynamicResources plugin to allocate them. The sink queues a
`Refusal` instead, which the adapter writes to the pod as kube-scheduler writes an
unschedulable pod's status and Event.

`StoreSink` applies and deletes through `ClusterStore`, and remembers, per object, the uid,
the API resourceVersion and a digest of what berth stored (Redis hash `kube_seen`). That record
makes every event idempotent: a replayed event (a watch resumed from an older position, a
relist after 410 Gone, an adapter restart) finds the same digest and writes nothing, and an
update that changes nothing berth models (status conditions, managedFields, the adapter's own
Events) writes nothing either. A name that comes back with a new uid is deleted first, so the
store never mixes two objects' lives; a version older than the stored one (a list from a
lagging watch cache) is not applied.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from shared.models import Pod
from shared.models.codec import encode
from shared.models.decoding import Mode
from shared.models.manifest import ManifestError, decode_object
from shared.models.schema import KubeObject
from shared.store import ApplyRejectedError, ClusterStore, object_key
from shared.store.store import APPLY_BATCH

log = logging.getLogger(__name__)

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def claim_volume(body: dict[str, Any]) -> str:
    """The first volume of the pod that needs a claim bound, described ("" when none)."""
    spec = body.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, dict) else None
    for volume in volumes if isinstance(volumes, list) else ():
        if not isinstance(volume, dict):
            continue
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, dict):
            return f'PersistentVolumeClaim "{claim.get("claimName", "")}"'
        if volume.get("ephemeral") is not None:
            return f'ephemeral volume "{volume.get("name", "")}"'
    return ""


def claim_devices(body: dict[str, Any]) -> str:
    """The pod's first DRA resource claim (spec.resourceClaims), described ("" when none)."""
    spec = body.get("spec")
    claims = spec.get("resourceClaims") if isinstance(spec, dict) else None
    for claim in claims if isinstance(claims, list) else ():
        if not isinstance(claim, dict):
            continue
        source = claim.get("resourceClaimName") or claim.get("resourceClaimTemplateName") or ""
        return f'resource claim "{claim.get("name", "")}"' + (f" ({source})" if source else "")
    return ""


def why_refused(body: dict[str, Any]) -> str:
    """Why berth will not schedule this pending pod of its own ("" when it will)."""
    volume = claim_volume(body)
    if volume:
        return (
            f"berth does not schedule pods with volumes to bind: the pod uses {volume} "
            "(berth has no VolumeBinding, VolumeZone or volume limits); "
            "use a scheduler that binds volumes for it"
        )
    devices = claim_devices(body)
    if devices:
        return (
            f"berth does not schedule pods with dynamic resource claims: the pod uses "
            f"{devices} (berth has no DynamicResources plugin to allocate it, so the pod "
            "would wait on its node for ever); use a scheduler that allocates claims for it"
        )
    return ""


EPOCH_KEY = "kube_epoch"
"""A token the adapter writes in Redis when it lists: gone (Redis lost its data) or written
by another Redis (run_id changed: restarted, failed over), the adapter lists again."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A pending pod of berth's that berth will not schedule, and why."""

    namespace: str
    name: str
    uid: str
    scheduler_name: str
    message: str


@dataclass(frozen=True, slots=True)
class Seen:
    uid: str
    version: str
    digest: str

    def pack(self) -> str:
        return f"{self.uid} {self.version} {self.digest}"

    @classmethod
    def unpack(cls, raw: bytes | str) -> Seen:
        text = raw.decode() if isinstance(raw, bytes) else raw
        uid, version, digest = ([*text.split(" "), "", "", ""])[:3]
        return cls(uid, version, digest)


def admit_pod(pod: Pod, scheduler_names: Collection[str]) -> bool:
    """Whether the store should hold this pod (see the module docstring)."""
    if pod.status.phase in TERMINAL_PHASES:
        return False
    if pod.spec.node_name:
        return True
    if pod.metadata.deletion_timestamp is not None:
        return False
    return pod.spec.scheduler_name in scheduler_names


def digest(obj: KubeObject) -> str:
    """What berth stores of the object, hashed; the resourceVersion left out (it changes on
    every write, including writes that change nothing berth models)."""
    version = obj.metadata.resource_version
    obj.metadata.resource_version = 0
    try:
        return hashlib.blake2b(encode(obj), digest_size=12).hexdigest()
    finally:
        obj.metadata.resource_version = version


_NO_SEEN = Seen("", "", "")


@dataclass(frozen=True, slots=True)
class _Decision:
    """What `put` will do with one object: invalid, ignored, drop, unchanged or apply."""

    verdict: str
    key: str
    obj: KubeObject | None
    new: Seen
    previous: Seen | None


def older(version: str, than: Seen) -> bool:
    """Whether an API resourceVersion is older than the stored one (they are etcd
    revisions, compared as integers; anything else is never called older)."""
    try:
        return int(version) < int(than.version)
    except ValueError:
        return False


def key_of(kind: str, body: dict[str, Any]) -> str:
    """The store key of an object the API served."""
    meta = body.get("metadata") or {}
    return object_key(kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))


class StoreSink:
    """Applies API objects of every watched kind to the store; see the module docstring."""

    def __init__(self, store: ClusterStore, scheduler_names: Collection[str]) -> None:
        self.store = store
        self.redis: Redis = store.redis
        self.scheduler_names = frozenset(scheduler_names)
        self.seen_key = store.keys.base + "kube_seen"
        self.stats: Counter[str] = Counter()
        self.rejected: dict[str, str] = {}
        """key -> why the object could not be decoded (shown by the adapter's log)."""
        self.refusals: asyncio.Queue[Refusal] = asyncio.Queue()
        """Pods berth will not schedule, for the adapter to explain on the pod."""
        self._refused: dict[str, str] = {}
        """key -> the uid of the life already refused (explained once)."""
        self._run_id_readable = True

    async def epoch(self) -> str:
        """The store's epoch (see EPOCH_KEY): the token, created when missing, and the Redis
        server's run_id when the ACL lets the adapter read INFO."""
        key = self.store.keys.base + EPOCH_KEY
        token = await self.redis.get(key)
        if token is None:
            await self.redis.set(key, uuid.uuid4().hex, nx=True)
            token = await self.redis.get(key)
        text = token.decode() if isinstance(token, bytes) else str(token or "")
        if self._run_id_readable:
            try:
                info = await self.redis.info("server")
                text += ":" + str(info.get("run_id", ""))
            except ResponseError:  # NOPERM: the marker alone
                self._run_id_readable = False
        return text

    async def seen(self, kind: str) -> dict[str, Seen]:
        """Every object of `kind` the store holds from the API, by store key."""
        raw = await self.redis.hgetall(self.seen_key)
        out: dict[str, Seen] = {}
        prefix = f"{kind}|"
        for field, value in raw.items():
            name = field.decode() if isinstance(field, bytes) else str(field)
            if name.startswith(prefix):
                out[name[len(prefix) :]] = Seen.unpack(value)
        return out

    async def put(self, kind: str, body: dict[str, Any]) -> str:
        """An object was added or modified. Returns what was done: "applied", "deleted",
        "unchanged", "ignored", "invalid" or "retry" (the binder is binding this pod right
        now; apply it again shortly)."""
        key = key_of(kind, body)
        return await self._carry_out(
            kind, self._decide(kind, key, body, await self._seen_one(kind, key))
        )

    async def put_many(self, kind: str, bodies: Sequence[dict[str, Any]]) -> list[str]:
        """`put` of a whole list (a relist), each answer in order: one read of what the store
        holds, and the objects to write applied APPLY_BATCH per script, not one by one."""
        return await self._put_all(kind, bodies, await self.seen(kind))

    async def put_batch(self, kind: str, bodies: Sequence[dict[str, Any]]) -> list[str]:
        """`put` of watch events of distinct objects, each answer in order: one read of
        their records (not the whole kind's, as put_many), then as put_many."""
        keys = [key_of(kind, body) for body in bodies]
        raw = await self.redis.hmget(self.seen_key, [f"{kind}|{key}" for key in keys])
        seen = {
            key: Seen.unpack(record)
            for key, record in zip(keys, raw, strict=True)
            if record is not None
        }
        return await self._put_all(kind, bodies, seen)

    async def _put_all(
        self, kind: str, bodies: Sequence[dict[str, Any]], seen: dict[str, Seen]
    ) -> list[str]:
        decisions = [
            self._decide(kind, key, body, seen.get(key))
            for body in bodies
            for key in (key_of(kind, body),)
        ]
        answers: list[str] = [""] * len(decisions)
        batch: list[int] = []
        for i, decision in enumerate(decisions):
            plain = decision.verdict == "apply" and (
                decision.previous is None or decision.previous.uid == decision.new.uid
            )
            if plain:
                batch.append(i)
            else:
                answers[i] = await self._carry_out(kind, decision)
        for start in range(0, len(batch), APPLY_BATCH):
            chunk = [decisions[i] for i in batch[start : start + APPLY_BATCH]]
            try:
                await self.store.apply([d.obj for d in chunk if d.obj is not None])
            except ApplyRejectedError:
                # One of them is refused (a pod the binder is binding): each on its own.
                for i in batch[start : start + APPLY_BATCH]:
                    answers[i] = await self._carry_out(kind, decisions[i])
                continue
            await self.redis.hset(
                self.seen_key, mapping={f"{kind}|{d.key}": d.new.pack() for d in chunk}
            )
            self.stats["applied"] += len(chunk)
            for i in batch[start : start + APPLY_BATCH]:
                answers[i] = "applied"
        return answers

    def _decide(
        self, kind: str, key: str, body: dict[str, Any], previous: Seen | None
    ) -> _Decision:
        try:
            obj = decode_object(body, source="api", mode=Mode.API)
        except ManifestError as e:
            self.stats["invalid"] += 1
            if self.rejected.get(key) != str(e):
                log.warning("cannot take %s from the API: %s", key, e)
            self.rejected[key] = str(e)
            return _Decision("invalid", key, None, _NO_SEEN, previous)
        self.rejected.pop(key, None)
        if isinstance(obj, Pod):
            admitted = admit_pod(obj, self.scheduler_names)
            why = why_refused(body) if admitted and not obj.spec.node_name else ""
            if why:
                self._refuse(key, obj, why)
            if not admitted or why:
                # Whatever life of this name the store holds (this one finished or refused,
                # or an older one whose deletion was missed) leaves it.
                verdict = "ignored" if previous is None else "drop"
                return _Decision(verdict, key, obj, _NO_SEEN, previous)
        new = Seen(obj.metadata.uid, str(obj.metadata.resource_version), digest(obj))
        if previous is not None and previous.uid == new.uid and previous.digest == new.digest:
            return _Decision("unchanged", key, obj, new, previous)
        if previous is not None and previous.uid == new.uid and older(new.version, previous):
            # A list served from a lagging watch cache (resourceVersion=0) can show an
            # object older than the one stored: keep the newer.
            self.stats["stale"] += 1
            return _Decision("unchanged", key, obj, previous, previous)
        return _Decision("apply", key, obj, new, previous)

    def _refuse(self, key: str, pod: Pod, why: str) -> None:
        uid = pod.metadata.uid
        if self._refused.get(key) == uid:
            return
        self._refused[key] = uid
        self.stats["refused"] += 1
        message = why
        log.warning("not scheduling %s: %s", key, message)
        meta = pod.metadata
        self.refusals.put_nowait(
            Refusal(meta.namespace, meta.name, uid, pod.spec.scheduler_name, message)
        )

    async def _carry_out(self, kind: str, d: _Decision) -> str:
        if d.verdict in ("invalid", "ignored"):
            return d.verdict
        assert d.obj is not None
        meta = d.obj.metadata
        if d.verdict == "drop":
            assert d.previous is not None
            await self._drop(kind, d.key, meta.namespace, meta.name, d.previous)
            return "deleted"
        if d.verdict == "unchanged":
            assert d.previous is not None
            if d.previous.version != d.new.version:
                await self.redis.hset(self.seen_key, f"{kind}|{d.key}", d.new.pack())
            self.stats["unchanged"] += 1
            return "unchanged"
        if d.previous is not None and d.previous.uid != d.new.uid:
            await self.store.delete(kind, meta.namespace, meta.name)
            self.stats["replaced"] += 1
        try:
            await self.store.apply([d.obj])
        except ApplyRejectedError as e:
            if "being bound by the binder" in str(e):
                self.stats["retry"] += 1
                return "retry"
            # The API server is the truth about a pod's node: start the pod's life in the
            # store again from what the server says.
            log.warning("store refused %s (%s); replacing it with the API's version", d.key, e)
            await self.store.delete(kind, meta.namespace, meta.name)
            await self.store.apply([d.obj])
        await self.redis.hset(self.seen_key, f"{kind}|{d.key}", d.new.pack())
        self.stats["applied"] += 1
        return "applied"

    async def delete(self, kind: str, body: dict[str, Any]) -> str:
        meta = body.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        key = key_of(kind, body)
        self._refused.pop(key, None)
        previous = await self._seen_one(kind, key)
        uid = str(meta.get("uid") or "")
        if previous is None or (uid and previous.uid != uid):
            return "unchanged"  # never stored, or an older life of the name
        await self._drop(kind, key, namespace, name, previous)
        return "deleted"

    async def _drop(self, kind: str, key: str, namespace: str, name: str, seen: Seen) -> None:
        await self.store.delete(kind, namespace, name, uid=seen.uid or None)
        await self.redis.hdel(self.seen_key, f"{kind}|{key}")
        self.stats["deleted"] += 1

    async def forget_missing(self, kind: str, present: Iterable[str]) -> int:
        """After a relist: delete what the store holds of `kind` that the list did not show
        (deleted while nobody watched)."""
        keep = set(present)
        gone = 0
        for key, seen in (await self.seen(kind)).items():
            if key in keep:
                continue
            namespace, _, name = key.rpartition("/")
            await self._drop(kind, key, namespace, name, seen)
            gone += 1
        return gone

    async def _seen_one(self, kind: str, key: str) -> Seen | None:
        raw = await self.redis.hget(self.seen_key, f"{kind}|{key}")
        return None if raw is None else Seen.unpack(raw)
