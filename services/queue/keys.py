"""Redis key names of the queue, all in one place.

Per tenant, every key carries the hash tag ``{<tenant>}`` so one script touches one slot
(Redis Cluster). The scripts get the tenant's keys as KEYS (`QueueKeys.tenant`: the base, then
TENANT_KEYS in order) and build the per-level, per-bucket and per-pop names from the base;
see services/queue/lua/prelude.lua. tests/queue/test_lua_keys.py checks the prelude, this
layout and the Python names against each other.

    <base> = <prefix>{<tenant>}:
    <base>a:<prio>                     zset    active pods of one priority level, score =
                                               Timestamp
    <base>prios                        zset    the levels with active pods, score = -priority
    <base>backoff                      zset    pods backing off, score = backoff expiry
    <base>gated                        zset    gated pods, score = Timestamp
    <base>u:<sig>|<prio>|<attempts>    zset    unschedulable pods by failed-plugin signature,
                                               priority and attempts class, score = Timestamp
    <base>buckets                      set     the names of the u: buckets
    <base>cyc                          hash    pod key -> the cycle its pop opened (present
                                               iff in flight)
    <base>lq:<first cycle>             list    one pop's pod keys
    <base>leases                       zset    "first:last" (one per pop), score = its lease
                                               expiry
    <base>ext                          zset    pods whose lease an `extend` outcome renewed,
                                               score = their own expiry
    <base>st                           hash    pod key -> state (msgpack,
                                               services/queue/state.py FIELDS)
    <base>att                          hash    pod key -> Attempts of the attempts that ended
    <base>why                          hash    pod key -> last failure (plugins, message)
    <base>rq                           hash    pod key -> what a pop hands out (the body's
                                               field and the pre-encoded request fields,
                                               services/queue/wire.py)
    <base>pod                          hash    key#resourceVersion -> pod body
    <base>ctr                          hash    scycle, mrc, revoked (counters)
    <base>stats                        hash    event counters (added, dispatched, ...)
    <base>aff                          set     pods with required pod affinity
    <prefix>tenants                    set     every tenant that ever had a pod (no tenant
                                               slot: only Python reads and writes it)
    <prefix>{informer}:lease           string  the replica tailing the store's change stream
                                               (services/queue/informer.py), with a TTL
    <prefix>{informer}:cursor          string  the last resourceVersion the informer applied
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# KEYS[2..] of every script, after the tenant base prefix (KEYS[1]).
TENANT_KEYS = (
    "prios",
    "backoff",
    "gated",
    "leases",
    "ctr",
    "stats",
    "aff",
    "st",
    "att",
    "cyc",
    "pod",
    "why",
    "buckets",
    "rq",
    "ext",
)

LOCATIONS = {
    "a": "active",
    "b": "backoff",
    "u": "unschedulable",
    "g": "gated",
    "i": "inflight",
}

_BAD_TENANT = re.compile(r"[{}\s*?\[\]|#]")


class InvalidTenantError(ValueError):
    """A tenant name that cannot be part of a Redis key with a hash tag."""


def check_tenant(tenant: str) -> str:
    if not tenant or _BAD_TENANT.search(tenant):
        raise InvalidTenantError(f"invalid tenant name {tenant!r}")
    return tenant


def body_field(key: str, resource_version: int) -> str:
    """Field of a pod body in the `pod` hash: bodies are versioned so a stale event never
    overwrites a newer body (the script drops the ones it does not keep)."""
    return f"{key}#{resource_version}"


@dataclass(frozen=True, slots=True)
class QueueKeys:
    prefix: str = "berth:q:"

    @property
    def quota_admitted(self) -> str:
        """Quota admission's records: pod key -> {uid, cq, charge, group, prio, at}."""
        return f"{self.prefix}{{quota}}:admitted"

    @property
    def quota_usage(self) -> str:
        """What admission charged: "queue|flavor|resource" -> amount."""
        return f"{self.prefix}{{quota}}:usage"

    def base(self, tenant: str) -> str:
        return f"{self.prefix}{{{check_tenant(tenant)}}}:"

    def tenant(self, tenant: str) -> list[str]:
        """KEYS of every script for a tenant: the base prefix, then TENANT_KEYS."""
        base = self.base(tenant)
        return [base] + [base + name for name in TENANT_KEYS]

    def key(self, tenant: str, name: str) -> str:
        return self.base(tenant) + name

    def active(self, tenant: str, priority: int | str) -> str:
        return f"{self.base(tenant)}a:{priority}"

    def bucket(self, tenant: str, bucket: str) -> str:
        return f"{self.base(tenant)}u:{bucket}"

    @property
    def tenants(self) -> str:
        """SET of every tenant that ever had a pod (not in a tenant slot: read by Python)."""
        return f"{self.prefix}tenants"

    # The informer's two keys share a slot of their own ({informer}); a tenant named
    # "informer" shares it too, harmlessly: no tenant key is named "lease" or "cursor".
    @property
    def informer_lease(self) -> str:
        """The informer's tailer lease: the holder's replica id, with a TTL."""
        return f"{self.prefix}{{informer}}:lease"

    @property
    def informer_cursor(self) -> str:
        """The last resourceVersion the informer applied (written only under the lease)."""
        return f"{self.prefix}{{informer}}:cursor"
