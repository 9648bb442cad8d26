"""Redis key names of the queue, all in one place.

Per tenant, every key carries the hash tag ``{<tenant>}`` so one script touches one slot
(Redis Cluster). A pod's queue is the one sorted set holding it; moving a pod rewrites no
per-pod hash, which is what makes a 100k-pod wake cheap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Sorted sets and small hashes of a tenant queue, in the order the Lua prelude expects.
QUEUES = ("active", "backoff", "unsched", "gated", "inflight")
META = ("ctr", "stats", "aff")
# Per-pod hashes, field = pod key: packed state (services/queue/state.py), the encoded Pod,
# and the last failure (msgpack {plugins, pending, msg}).
PODS = ("st", "pod", "why")
ALL = QUEUES + META + PODS

LOCATIONS = {
    "a": "active",
    "b": "backoff",
    "u": "unschedulable",
    "g": "gated",
    "i": "inflight",
}
# Sorted set name -> queue name (the active set is keyed by member, the others by pod key).
QUEUE_OF_SET = {
    "active": "active",
    "backoff": "backoff",
    "unsched": "unschedulable",
    "gated": "gated",
    "inflight": "inflight",
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
