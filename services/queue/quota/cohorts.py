"""Quota arithmetic of Kueue's ClusterQueues and cohorts, exact and pure.

Kueue's model (pkg/cache resource nodes, KEP-1224 lendingLimit, KEP-79 hierarchical cohorts):
ClusterQueues and cohorts form trees. A cohort is named by its queues' `spec.cohort`; a Cohort
object of that name adds quota of its own (resource groups as a ClusterQueue's) and a parent
cohort. Per node and (flavor, resource):

- `subtree` quota: a queue's nominal quota; a cohort's own nominal plus what each child puts
  in (its subtree minus its guaranteed part);
- `guaranteed = subtree - lendingLimit` (0 without a lendingLimit) is never lent to the parent;
- usage: a queue's; a cohort's, what its children use beyond their guaranteed parts;
- what a node may still take (`available`): its unused guaranteed part, plus what its parent
  has available, capped by borrowingLimit (at most subtree + borrowingLimit in all); a root
  has its subtree quota minus its usage. A queue without a cohort has exactly its nominal.
- `potential`: the same with every other queue idle (Kueue's PotentialAvailable).
- Fair sharing (DRF): a queue's share is the largest, over resources, of what it borrows
  (usage above nominal) over what the root can lend for that resource, divided by its weight
  (weight 0: infinite). Kueue reports it x1000 as an integer; so does `share`.

With one level (no Cohort objects), this is the cohort of Kueue's first versions: a cohort's
quota is what its queues lend, its usage what they use beyond their guaranteed parts.
Amounts are integers in berth's units (milli-CPU, bytes, counts), as `kueue.quota_value` makes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, cast

from shared.models.kueue import ClusterQueue, ResourceGroup, quota_value
from shared.models.kueue import Cohort as KueueCohort
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
        flavors_of: dict[str, tuple[str, ...]] = {}
        for group in cq.spec.resource_groups:
            for resource in group.covered_resources:
                flavors_of[resource] = tuple(f.name for f in group.flavors)
        weight = Fraction(parse_quantity(cq.spec.fair_sharing.weight))
        limits = limits_of(cq.spec.resource_groups)
        return cls(cq.metadata.name, cq.spec.cohort, limits, flavors_of, weight)


def limits_of(groups: Iterable[ResourceGroup]) -> dict[FlavorResource, Limits]:
    limits: dict[FlavorResource, Limits] = {}
    for group in groups:
        for flavor in group.flavors:
            for q in flavor.resources:
                limits[(flavor.name, q.name)] = Limits(
                    quota_value(q.name, q.nominal_quota),
                    None if q.borrowing_limit is None else quota_value(q.name, q.borrowing_limit),
                    None if q.lending_limit is None else quota_value(q.name, q.lending_limit),
                )
    return limits


@dataclass(frozen=True, slots=True)
class CohortQuota:
    """A Cohort object's own quota and its parent cohort."""

    name: str
    parent: str
    limits: Mapping[FlavorResource, Limits]
    weight: Fraction = Fraction(1)

    @classmethod
    def of(cls, cohort: KueueCohort) -> CohortQuota:
        weight = Fraction(parse_quantity(cohort.spec.fair_sharing.weight))
        return cls(
            cohort.metadata.name, cohort.spec.parent, limits_of(cohort.spec.resource_groups), weight
        )


Node = tuple[bool, str]
"""(is a ClusterQueue, name): a node of a cohort tree."""


class _Walk:
    """One (flavor, resource) over a tree: subtree quota, guaranteed part and usage of each
    node, computed once."""

    def __init__(self, tree: Cohort, fr: FlavorResource) -> None:
        self.tree = tree
        self.fr = fr
        self.kids = tree.children()
        self._subtree: dict[Node, int] = tree._cache().setdefault(("subtree", fr), {})
        self._usage: dict[Node, int] = {}

    def limits(self, node: Node) -> Limits | None:
        is_queue, name = node
        if is_queue:
            return self.tree.queues[name].limits.get(self.fr)
        own = self.tree.nodes.get(name)
        return None if own is None else own.limits.get(self.fr)

    def subtree(self, node: Node) -> int:
        found = self._subtree.get(node)
        if found is None:
            limits = self.limits(node)
            found = 0 if limits is None else limits.nominal
            if not node[0]:
                found += sum(
                    self.subtree(kid) - self.guaranteed(kid) for kid in self.kids.get(node[1], ())
                )
            self._subtree[node] = found
        return found

    def guaranteed(self, node: Node) -> int:
        limits = self.limits(node)
        if limits is None or limits.lending is None:
            return 0
        return max(0, self.subtree(node) - limits.lending)

    def usage(self, node: Node) -> int:
        found = self._usage.get(node)
        if found is None:
            if node[0]:
                found = self.tree.used(node[1], self.fr)
            else:
                found = sum(
                    max(0, self.usage(kid) - self.guaranteed(kid))
                    for kid in self.kids.get(node[1], ())
                )
            self._usage[node] = found
        return found

    def available(self, node: Node) -> int:
        parent = self.tree.parent(node)
        subtree, usage = self.subtree(node), self.usage(node)
        if parent is None:
            return subtree - usage
        guaranteed = self.guaranteed(node)
        local = max(0, guaranteed - usage)
        above = self.available(parent)
        limits = self.limits(node)
        if limits is not None and limits.borrowing is not None:
            in_parent = subtree - guaranteed - max(0, usage - guaranteed)
            above = min(above, in_parent + limits.borrowing)
        return local + above

    def potential(self, node: Node) -> int:
        parent = self.tree.parent(node)
        if parent is None:
            return self.subtree(node)
        most = self.guaranteed(node) + self.potential(parent)
        limits = self.limits(node)
        if limits is not None and limits.borrowing is not None:
            most = min(most, self.subtree(node) + limits.borrowing)
        return most


@dataclass
class Cohort:
    """One tree: the queues under one root cohort (or one queue alone), the Cohort objects
    among its cohorts, and the queues' usage."""

    queues: dict[str, QueueQuota]
    usage: dict[str, dict[FlavorResource, int]] = field(default_factory=dict)
    nodes: dict[str, CohortQuota] = field(default_factory=dict)
    """The tree's Cohort objects (a cohort only named by queues has no quota of its own)."""
    static: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    """What depends on quotas only (children, subtree quotas), computed once per shape."""

    def with_usage(self, usage: dict[str, dict[FlavorResource, int]]) -> Cohort:
        return Cohort(self.queues, usage, self.nodes, self.static)

    def _cache(self) -> dict[Any, Any]:
        shape = (len(self.queues), len(self.nodes))
        if self.static.get("shape") != shape:  # queues or cohorts added since: start again
            self.static.clear()
            self.static["shape"] = shape
        return self.static

    def parent(self, node: Node) -> Node | None:
        is_queue, name = node
        if is_queue:
            cohort = self.queues[name].cohort
        else:
            own = self.nodes.get(name)
            cohort = "" if own is None else own.parent
        return (False, cohort) if cohort else None

    def children(self) -> dict[str, list[Node]]:
        """cohort name -> its queues and cohorts."""
        cache = self._cache()
        if "kids" in cache:
            return cast(dict[str, list[Node]], cache["kids"])
        kids: dict[str, list[Node]] = {}
        cache["kids"] = kids
        for name, q in self.queues.items():
            if q.cohort:
                kids.setdefault(q.cohort, []).append((True, name))
        for name, c in self.nodes.items():
            if c.parent:
                kids.setdefault(c.parent, []).append((False, name))
        return kids

    def root(self) -> Node | None:
        """The root cohort (None for a queue alone)."""
        node: Node | None = None
        for name in self.queues:
            node = (True, name)
            break
        if node is None:
            return None
        seen = set()
        while (up := self.parent(node)) is not None and up not in seen:
            seen.add(up)
            node = up
        return None if node[0] else node

    def used(self, queue: str, fr: FlavorResource) -> int:
        return self.usage.get(queue, {}).get(fr, 0)

    def cohort_quota(self, fr: FlavorResource) -> int:
        """What the root cohort holds of `fr` (all the tree can lend)."""
        root = self.root()
        return 0 if root is None else _Walk(self, fr).subtree(root)

    def cohort_usage(self, fr: FlavorResource) -> int:
        root = self.root()
        return 0 if root is None else _Walk(self, fr).usage(root)

    def available(self, queue: str, fr: FlavorResource) -> int:
        """What `queue` may still take of `fr` (see the module docstring)."""
        if fr not in self.queues[queue].limits:
            return 0
        return max(0, _Walk(self, fr).available((True, queue)))

    def potential(self, queue: str, fr: FlavorResource) -> int:
        """The most `queue` could hold of `fr` were every other queue idle (Kueue's
        PotentialAvailable, the "maximum capacity" of its reasons)."""
        if fr not in self.queues[queue].limits:
            return 0
        return _Walk(self, fr).potential((True, queue))

    def charge(self, queue: str, request: Mapping[str, int], flavors: Mapping[str, str]) -> None:
        self.add_usage(queue, {(flavors[r], r): a for r, a in request.items() if r in flavors})

    def add_usage(self, queue: str, amounts: Mapping[FlavorResource, int], sign: int = 1) -> None:
        """`amounts` added to the queue's usage (taken off with `sign` -1)."""
        usage = self.usage.setdefault(queue, {})
        for fr, amount in amounts.items():
            usage[fr] = usage.get(fr, 0) + sign * amount

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


def cohorts_of(
    queues: Iterable[ClusterQueue], cohorts: Iterable[KueueCohort] = ()
) -> dict[str, Cohort]:
    """One Cohort (tree) per root cohort, keyed by its name; a queue without a cohort is a
    tree of its own, keyed "/<queue name>" (no cohort name starts with "/"). A parent loop
    is cut where it closes (the cohort whose parent would close it is a root)."""
    objects = {c.metadata.name: CohortQuota.of(c) for c in cohorts}
    parent = {name: c.parent for name, c in objects.items()}
    for name in sorted(parent):  # cut each parent loop where it closes
        seen = [name]
        while parent.get(seen[-1]):
            up = parent[seen[-1]]
            if up in seen:
                parent[seen[-1]] = ""
                break
            seen.append(up)

    def root_of(name: str) -> str:
        while parent.get(name):
            name = parent[name]
        return name

    out: dict[str, Cohort] = {}
    for cq in queues:
        quota = QueueQuota.of(cq)
        key = root_of(quota.cohort) if quota.cohort else f"/{quota.name}"
        out.setdefault(key, Cohort({})).queues[quota.name] = quota
    for name, c in objects.items():
        tree = out.get(root_of(name))
        if tree is not None:
            tree.nodes[name] = replace(c, parent=parent.get(name, ""))
    return out
