"""Schedule requests assembled from bytes: the dispatcher's hot path.

A pop (lua/pop.lua) returns pod keys; the request blob of each pod is in the tenant's `rq`
hash, kept there by `request_blob` (lua/prelude.lua) whenever its state changes:

    msgpack [body field, {uid, key, attempt, prio, ts, its, nnn, redispatches, fp, rv}]

the body field naming the pod's body in `pod` (key#resourceVersion), the map holding 10 of
the 14 fields of a schedule request (in any order). This module adds the 4 others (tenant,
lease, cycle, pod), so a request is the header of a 14-entry map, the 10 entries as Redis
holds them, the 4 appended here and the body's bytes, and wraps the requests in a
ScheduleBatch envelope (`ScheduleBatch.encode_raw`): a dispatched pod costs a few byte copies
instead of a ScheduleRequest object, a dict and a msgpack encoding. Every request is a
`ScheduleRequest.to_body()` map (tests/queue/test_wire.py checks it), so `decode_message` and
the workers read it as before.
"""

from __future__ import annotations

import functools
import itertools
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import msgpack

from services.queue.keys import body_field
from services.queue.state import PodState
from shared.messaging.messages import ScheduleBatch, ScheduleRequest

LUA_FIELDS = ("uid", "key", "attempt", "prio", "ts", "its", "nnn", "redispatches", "fp", "rv")
"""The request fields the blob's map carries."""
PYTHON_FIELDS = ("tenant", "lease", "cycle", "pod")
"""The request fields appended here, in this order."""

MAX_BODY_BYTES = 128 * 1024
"""A pod body larger than this is not sent: the request refers to the pod (key, uid,
resourceVersion) and the worker reads it from its view. Messages stay far under any broker's
limit (Kafka's default message.max.bytes is 1 MB) whatever a pod holds."""
MAX_MESSAGE_BYTES = 1024 * 1024
"""A schedule message's pods' bytes (one pod alone may be larger: objects are admitted up to
shared.models.admission.MAX_OBJECT_BYTES, well under the producer's max_request_size)."""

_MAP14 = b"\x8e"  # a fixmap of the 14 ScheduleRequest fields
_MAP10 = b"\x8a"  # the blob's map of 10
# "pod" and the header of a bin 32 (any length is valid msgpack; a fixed one keeps it simple).
_POD_BIN32 = b"\xa3pod\xc6"


class BlobError(ValueError):
    """A request blob that is not what lua/prelude.lua writes."""


def _packb(value: Any) -> bytes:
    return cast(bytes, msgpack.packb(value, use_bin_type=True))


@functools.lru_cache(maxsize=64)
def _tail_struct(prefix_length: int) -> struct.Struct:
    # prefix (tenant, lease, "cycle" and a uint 64 header), the cycle, "pod" + bin 32 header,
    # the body's length.
    return struct.Struct(f">{prefix_length}sQ{len(_POD_BIN32)}sI")


def split_blobs(blobs: Sequence[bytes]) -> tuple[list[bytes], list[bytes]]:
    """The body fields and the map entries (without the map's header) of request blobs."""
    fields: list[bytes] = []
    entries: list[bytes] = []
    for blob in blobs:
        # fixarray 2, then the field as a msgpack str (fix, 8 or 16 bit length), then fixmap 10.
        head = blob[1]
        if 0xA0 <= head <= 0xBF:
            start, n = 2, head & 0x1F
        elif head == 0xD9:
            start, n = 3, blob[2]
        elif head == 0xDA:
            start, n = 4, (blob[2] << 8) | blob[3]
        else:
            raise BlobError(f"unexpected request blob {blob[:8]!r}")
        end = start + n
        if blob[0] != 0x92 or len(blob) <= end or blob[end] != 0x8A:
            raise BlobError(f"unexpected request blob {blob[:8]!r}")
        fields.append(blob[start:end])
        entries.append(blob[end + 1 :])
    return fields, entries


def request_blob(key: str, state: PodState, ended_attempts: int) -> bytes:
    """What `request_blob` in lua/prelude.lua writes (for pods stored before it did)."""
    values = (
        state.uid,
        key,
        ended_attempts + 1,
        state.priority,
        state.timestamp / 1_000_000,
        state.initial_attempt_timestamp / 1_000_000,
        state.nominated_node_name,
        state.redispatches,
        state.fingerprint,
        state.resource_version,
    )
    field = body_field(key, state.resource_version)
    return _packb([field, dict(zip(LUA_FIELDS, values, strict=True))])


def first_uid(entries: bytes) -> bytes:
    """The uid in a blob's map entries (the Kafka key of the message it starts)."""
    values = msgpack.unpackb(_MAP10 + entries, raw=True)
    return cast(bytes, values[b"uid"])


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """One `berth.schedule` message, ready to send."""

    tenant: str
    payload: bytes
    count: int
    key: bytes
    """The uid of its first pod (the message key, as ScheduleBatch messages always had)."""


@dataclass(slots=True)
class PoppedPods:
    """One tenant's pop: the fragments and bodies of its pods, in queue order."""

    tenant: str
    lease_expires_at: float
    fragments: list[bytes]
    cycles: list[int]
    bodies: list[bytes]

    def __len__(self) -> int:
        return len(self.fragments)

    def _tails(self, bodies: Sequence[bytes]) -> list[bytes]:
        prefix = b"".join(
            (
                _packb("tenant"),
                _packb(self.tenant),
                _packb("lease"),
                _packb(float(self.lease_expires_at)),
                _packb("cycle"),
                b"\xcf",  # uint 64
            )
        )
        pack = _tail_struct(len(prefix)).pack
        return [
            pack(prefix, cycle, _POD_BIN32, len(body))
            for cycle, body in zip(self.cycles, bodies, strict=True)
        ]

    def encoded(self) -> list[bytes]:
        """Every request's bytes (one `ScheduleRequest.to_body()` map each)."""
        return [
            b"".join((_MAP14, *parts))
            for parts in zip(self.fragments, self._tails(self.bodies), self.bodies, strict=True)
        ]

    def requests(self) -> list[ScheduleRequest]:
        """As ScheduleRequest objects (the store's `pop`; not the dispatcher's path)."""
        return [
            ScheduleRequest.from_body(msgpack.unpackb(data, raw=False)) for data in self.encoded()
        ]

    def batches(self, size: int, max_bytes: int = MAX_MESSAGE_BYTES) -> list[EncodedBatch]:
        """The ScheduleBatch messages of at most `size` requests each, in queue order, each
        under `max_bytes` unless one request alone is larger (it then travels alone: a large
        pod never holds back the small ones popped with it)."""
        # A large pod travels by reference: the worker takes it from its view, which holds
        # every stored pod (services/scheduler/cycle.request_pod).
        bodies = [b"" if len(body) > MAX_BODY_BYTES else body for body in self.bodies]
        tails = self._tails(bodies)
        fragments = self.fragments
        out: list[EncodedBatch] = []
        start = 0
        while start < len(fragments):
            end, total = start, 0
            while end < len(fragments) and end - start < size:
                weight = len(fragments[end]) + len(tails[end]) + len(bodies[end])
                if end > start and total + weight > max_bytes:
                    break
                total += weight
                end += 1
            parts = itertools.chain.from_iterable(
                zip(
                    itertools.repeat(_MAP14, end - start),
                    fragments[start:end],
                    tails[start:end],
                    bodies[start:end],
                    strict=True,
                )
            )
            payload = ScheduleBatch.encode_raw(end - start, parts)
            out.append(EncodedBatch(self.tenant, payload, end - start, first_uid(fragments[start])))
            start = end
        return out


@dataclass(slots=True)
class TenantPop:
    """One tenant's pop while `QueueStore.pop_raw` reads it: parallel lists, in pop order."""

    tenant: str
    revoked: int
    keys: list[bytes]
    cycles: list[int]
    fields: list[bytes] = field(default_factory=list)
    fragments: list[bytes] = field(default_factory=list)
    bodies: list[bytes | None] = field(default_factory=list)

    @classmethod
    def of(cls, tenant: str, reply: list[Any]) -> TenantPop:
        if not reply:
            return cls(tenant, 0, [], [])
        first_cycle, revoked, *keys = reply
        return cls(tenant, revoked, keys, list(range(first_cycle, first_cycle + len(keys))))

    def keep(self, indexes: Sequence[int]) -> None:
        """Only these pods (the others are gone or no longer leased by this pop)."""
        if len(indexes) == len(self.keys):
            return
        for name in ("keys", "cycles", "fields", "fragments", "bodies"):
            values = getattr(self, name)
            if values:
                setattr(self, name, [values[i] for i in indexes])
