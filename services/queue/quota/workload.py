"""What quota admission decides about: a waiting workload (a pod, or a gang's pods), one round's
verdict, the usage field names, and the kinds whose changes make admission reload."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from redis.asyncio import Redis

from services.queue.keys import QueueKeys
from services.queue.quota.assign import Placement
from services.queue.records import PodRecord
from services.queue.store import quota_why

QUOTA_PLUGIN = "Quota"
"""The 'plugin' a quota-waiting pod names (berth get pods: status Quota)."""

QUOTA_KINDS = frozenset(
    {"ClusterQueue", "Cohort", "LocalQueue", "ResourceFlavor", "Namespace", "PodGroup"}
)
"""Kinds whose changes change what admission decides (it reloads them)."""


@dataclass(frozen=True, slots=True)
class QuotaObjectsChanged:
    """The informer saw a change of a QUOTA_KINDS object."""


QUOTA_OBJECTS_CHANGED = QuotaObjectsChanged()


def usage_field(queue: str, flavor: str, resource: str) -> str:
    return f"{queue}|{flavor}|{resource}"


def pod_signature(request: dict[str, int], placement: Placement | None) -> str:
    """A pod's requests and placement, as one text (pods alike in both are one pod set)."""
    text = repr(sorted(request.items()))
    return text if placement is None else text + placement.signature()


@dataclass
class Workload:
    key: str
    queue: str
    priority: int
    created: float
    pods: dict[str, PodRecord] = field(default_factory=dict)
    requests: dict[str, dict[str, int]] = field(default_factory=dict)
    placements: dict[str, Placement] = field(default_factory=dict)
    min_member: int = 1
    admitted_members: int = 0
    local_queue: str = ""
    """Its LocalQueue, "namespace/name"."""
    signatures: dict[str, str] = field(default_factory=dict)
    """Pod key -> its requests and placement as `shape` compares them (admission fills it
    from its decode cache; computed here when missing)."""
    total: dict[str, int] | None = field(default=None, repr=False, compare=False)
    """`request()` computed once (None again whenever its pods change: `changed`)."""

    def request(self) -> dict[str, int]:
        """What its pods request together (do not modify: it is kept)."""
        if self.total is None:
            total: dict[str, int] = defaultdict(int)
            for req in self.requests.values():
                for resource, amount in req.items():
                    total[resource] += amount
            self.total = dict(total)
        return self.total

    def changed(self) -> None:
        """Its pods changed (what it requests with them)."""
        self.total = None

    def shape(self) -> str | None:
        """What its assignment depends on besides quota, when its pods are one pod set (the
        same requests and placement): workloads of one shape in one queue fit or not alike.
        None for several pod sets (their names, from pod keys, appear in the reasons)."""
        shapes = {
            self.signatures.get(key) or pod_signature(req, self.placements.get(key))
            for key, req in self.requests.items()
        }
        return f"{len(self.requests)}x{shapes.pop()}" if len(shapes) == 1 else None

    @property
    def order(self) -> tuple[int, float, str]:
        return (-self.priority, self.created, self.key)


TenantOf = Callable[[PodRecord], str]


@dataclass
class Verdict:
    """One round's answer: pods to ungate, and the reason of every pod still waiting."""

    admitted: list[PodRecord] = field(default_factory=list)
    waiting: dict[str, tuple[PodRecord, str]] = field(default_factory=dict)

    async def write_whys(
        self,
        redis: Redis,
        keys: QueueKeys,
        tenant_of: TenantOf,
        written: dict[str, str] | None = None,
    ) -> None:
        """The waiting pods' reasons, where the queue keeps every pod's (its `why` hash);
        with `written` (pod key -> the message last written, kept by admission), only those
        that changed."""
        whys: dict[str, dict[str, bytes]] = defaultdict(dict)
        changed: dict[str, str] = {}
        for pod, message in self.waiting.values():
            if written is not None and written.get(pod.key) == message:
                continue
            whys[tenant_of(pod)][pod.key] = quota_why(message)
            changed[pod.key] = message
        if whys:
            async with redis.pipeline(transaction=False) as pipe:
                for tenant, blobs in whys.items():
                    pipe.hset(keys.key(tenant, "why"), mapping=dict(blobs))  # type: ignore[arg-type]
                await pipe.execute()
        if written is not None:
            written.update(changed)
