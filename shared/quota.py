"""Quota arithmetic of Kueue's ClusterQueues and cohorts, exact and pure.

This module is the reference: the queue's admission script (services/queue/lua/admit.lua)
computes the same thing in Redis, and a randomized test compares the two. Kueue's model
(pkg/cache resource nodes, KEP-1224 lendingLimit), one level of cohort:

- A ClusterQueue has, per (flavor, resource), a nominal quota, an optional borrowingLimit and an
  optional lendingLimit. `guaranteed = nominal - lendingLimit` (0 without a lendingLimit) is
  never lent; the rest, `nominal - guaranteed`, is put into the cohort.
- A cohort's quota is what its queues put in; its usage is what its queues use beyond their
  guaranteed part.
- What a queue may still take (`available`): its unused guaranteed part, plus what the cohort
  has left, capped by borrowingLimit (it may use at most nominal + borrowingLimit). A queue
  without a cohort has exactly its nominal quota.
- Fair sharing (DRF): a queue's share is the largest, over resources, of what it borrows
  (usage above nominal) over what the cohort can lend for that resource, divided by its weight
  (weight 0: infinite). Kueue reports it x1000 as an integer; so does `share`.

Amounts are integers in berth's units (milli-CPU, bytes, counts), as `kueue.quota_value` makes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from shared.models.kueue import ClusterQueue, quota_value
from shared.models.quantity import parse_quantity

FlavorResource = tuple[str, str]
"""(flavor name, resource name)."""

INFINITE_SHARE = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Limits:
    nominal: int
    borrowing: int | None = None
    lending: int | None = None

    @property
    def guaranteed(self) -> int:
        return 0 if self.lending is None else max(0, self.nominal - self.lending)

    @property
    def lendable(self) -> int:
        """What this queue puts into its cohort."""
        return self.nominal - self.guaranteed


@dataclass(frozen=True, slots=True)
class QueueQuota:
    """One ClusterQueue's quota, in berth's units."""

    name: str
    cohort: str
    limits: Mapping[FlavorResource, Limits]
    flavors_of: Mapping[str, tuple[str, ...]]
    """resource -> the flavors that cover it, in the order admission tries them."""
    weight: Fraction = Fraction(1)

    @classmethod
    def of(cls, cq: ClusterQueue) -> QueueQuota:
        limits: dict[FlavorResource, Limits] = {}
        flavors_of: dict[str, tuple[str, ...]] = {}
        for group in cq.spec.resource_groups:
            for resource in group.covered_resources:
                flavors_of[resource] = tuple(f.name for f in group.flavors)
            for flavor in group.flavors:
                for q in flavor.resources:
                    limits[(flavor.name, q.name)] = Limits(
                        quota_value(q.name, q.nominal_quota),
                        None
                        if q.borrowing_limit is None
                        else quota_value(q.name, q.borrowing_limit),
                        None if q.lending_limit is None else quota_value(q.name, q.lending_limit),
                    )
        weight = Fraction(parse_quantity(cq.spec.fair_sharing.weight))
        return cls(cq.metadata.name, cq.spec.cohort, limits, flavors_of, weight)


@dataclass
class Cohort:
    """The queues sharing one cohort (or one queue alone) and their usage."""

    queues: dict[str, QueueQuota]
    usage: dict[str, dict[FlavorResource, int]] = field(default_factory=dict)

    def used(self, queue: str, fr: FlavorResource) -> int:
        return self.usage.get(queue, {}).get(fr, 0)

    def cohort_quota(self, fr: FlavorResource) -> int:
        return sum(q.limits[fr].lendable for q in self.queues.values() if fr in q.limits)

    def cohort_usage(self, fr: FlavorResource) -> int:
        return sum(
            max(0, self.used(name, fr) - q.limits[fr].guaranteed)
            for name, q in self.queues.items()
            if fr in q.limits
        )

    def available(self, queue: str, fr: FlavorResource) -> int:
        """What `queue` may still take of `fr` (see the module docstring)."""
        q = self.queues[queue]
        limits = q.limits.get(fr)
        if limits is None:
            return 0
        used = self.used(queue, fr)
        if not q.cohort:
            return max(0, limits.nominal - used)
        local = max(0, limits.guaranteed - used)
        parent = self.cohort_quota(fr) - self.cohort_usage(fr)
        if limits.borrowing is not None:
            in_parent = limits.lendable - max(0, used - limits.guaranteed)
            parent = min(parent, in_parent + limits.borrowing)
        return max(0, local + parent)

    def potential(self, queue: str, fr: FlavorResource) -> int:
        """The most `queue` could hold of `fr` were every other queue idle (Kueue's
        PotentialAvailable, the "maximum capacity" of its reasons): its guaranteed part plus
        what the cohort puts in, within its borrowingLimit."""
        q = self.queues[queue]
        limits = q.limits.get(fr)
        if limits is None:
            return 0
        if not q.cohort:
            return limits.nominal
        parent = self.cohort_quota(fr)
        if limits.borrowing is not None:
            parent = min(parent, limits.lendable + limits.borrowing)
        return limits.guaranteed + parent

    def charge(self, queue: str, request: Mapping[str, int], flavors: Mapping[str, str]) -> None:
        usage = self.usage.setdefault(queue, {})
        for resource, amount in request.items():
            if resource in flavors:
                fr = (flavors[resource], resource)
                usage[fr] = usage.get(fr, 0) + amount

    def release(self, queue: str, request: Mapping[str, int], flavors: Mapping[str, str]) -> None:
        self.charge(queue, {r: -a for r, a in request.items()}, flavors)

    def borrowed(self, queue: str, fr: FlavorResource) -> int:
        limits = self.queues[queue].limits.get(fr)
        return 0 if limits is None else max(0, self.used(queue, fr) - limits.nominal)

    def share(self, queue: str, extra: Mapping[FlavorResource, int] | None = None) -> int:
        """Kueue's weighted dominant resource share x1000 (with `extra` usage added)."""
        q = self.queues[queue]
        if not q.cohort:
            return 0
        extra = extra or {}
        best = Fraction(0)
        for fr, limits in q.limits.items():
            lendable = self.cohort_quota(fr)
            used = self.used(queue, fr) + extra.get(fr, 0)
            borrowed = max(0, used - limits.nominal)
            if borrowed and lendable:
                best = max(best, Fraction(borrowed * 1000, lendable))
            elif borrowed:
                return INFINITE_SHARE
        if best == 0:
            return 0
        if q.weight == 0:
            return INFINITE_SHARE
        return math.floor(best / q.weight)


def cohorts_of(queues: Iterable[ClusterQueue]) -> dict[str, Cohort]:
    """One Cohort per cohort name; a queue without a cohort is a cohort of its own, keyed
    "/<queue name>" (no cohort name starts with "/")."""
    out: dict[str, Cohort] = {}
    for cq in queues:
        quota = QueueQuota.of(cq)
        key = quota.cohort or f"/{quota.name}"
        out.setdefault(key, Cohort({})).queues[quota.name] = quota
    return out
