"""Redis key names of the queue, all in one place.

Per tenant, every key carries the hash tag ``{<tenant>}`` so one script touches one slot
(Redis Cluster). Layout (see services/queue/lua/prelude.lua):

- ``a:<prio>``: active pods of one priority level (score = Timestamp); ``prios`` lists the
  levels (score = -priority).
- ``backoff`` (score = expiry), ``gated`` (score = Timestamp).
- leases, one per pop: ``cyc`` (pod key -> the cycle its pop opened; present iff in flight),
  ``lq:<first cycle>`` (the pop's pod keys), ``leases`` (member ``first:last``, score = lease
  expiry), ``ext`` (pods whose lease an ``extend`` outcome renewed, score = their expiry).
- ``u:<sig>|<prio>|<attempts>``: unschedulable pods by failed-plugin signature, priority and
  attempts class (score = Timestamp), ``buckets`` the bucket names.
- per pod hashes (field = pod key): ``st`` state, ``att`` Attempts, ``why`` last failure,
  ``rq`` what a pop hands out (the body's field and the pre-encoded request fields, see
  services/queue/wire.py); ``pod`` bodies (field = key#resourceVersion).
- ``ctr`` (scycle, mrc) and ``stats`` counters; ``aff`` pods with required pod affinity.
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
