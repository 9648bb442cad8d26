"""Redis key names of the queue, all in one place.

Per tenant, every key carries the hash tag ``{<tenant>}`` so one script touches one slot
(Redis Cluster). Per-pod state lives in "column" hashes keyed by pod key (namespace/name):
one HMGET/HSET moves a whole batch, which is what makes 100k-pod wakes cheap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Sorted sets and small hashes of a tenant queue, in the order the Lua prelude expects.
QUEUES = ("active", "backoff", "unsched", "gated", "inflight")
META = ("ctr", "stats", "aff")
# Column hashes: field = pod key.
COLUMNS = (
    "loc",  # a=active b=backoff u=unschedulable g=gated i=in flight
    "pod",  # the encoded Pod
    "uid",
    "rv",  # resourceVersion of the stored pod
    "prio",
    "ts",  # QueuedPodInfo.Timestamp (us)
    "its",  # InitialAttemptTimestamp (us)
    "att",  # Attempts
    "cyc",  # scheduling cycle the pod was last popped in
    "am",  # member in the active sorted set (timestamp, sequence, key)
    "plg",  # unschedulable + pending plugins, comma-separated (for hint matching)
    "why",  # msgpack {plugins, pending, msg}: the last failure, for the pending view
    "nom",  # nominated node name (the nominator)
    "snn",  # status.nominatedNodeName of the stored pod
    "red",  # redispatches (expired leases)
    "cfl",  # binder conflicts
    "dirty",  # "1": updated (isPodUpdated) while in flight
    "fp",  # pod fingerprint (isPodUpdated)
    "sched",  # schedulerName
)
ALL = QUEUES + META + COLUMNS

LOCATIONS = {
    "a": "active",
    "b": "backoff",
    "u": "unschedulable",
    "g": "gated",
    "i": "inflight",
}

_BAD_TENANT = re.compile(r"[{}\s*?\[\]]")


class InvalidTenantError(ValueError):
    """A tenant name that cannot be part of a Redis key with a hash tag."""


def check_tenant(tenant: str) -> str:
    if not tenant or _BAD_TENANT.search(tenant):
        raise InvalidTenantError(f"invalid tenant name {tenant!r}")
    return tenant


@dataclass(frozen=True, slots=True)
class QueueKeys:
    prefix: str = "berth:q:"

    def tenant(self, tenant: str) -> list[str]:
        """All keys of a tenant queue, in the order of the Lua prelude (KEYS[1..])."""
        base = f"{self.prefix}{{{check_tenant(tenant)}}}:"
        return [base + name for name in ALL]

    def key(self, tenant: str, name: str) -> str:
        return f"{self.prefix}{{{check_tenant(tenant)}}}:{name}"

    @property
    def tenants(self) -> str:
        """SET of every tenant that ever had a pod (not in a tenant slot: read by Python)."""
        return f"{self.prefix}tenants"
