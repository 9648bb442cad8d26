"""Kueue's flavor assignment (pkg/scheduler/flavorassigner), pure: which ResourceFlavor each
resource of a workload is charged to, and why the other flavors were not.

A workload is one or more pod sets (identical pods, `count` of them, requests summed). For
each pod set, for each resource group of the ClusterQueue it requests something from, one
flavor serves *all* the group's resources (never cpu from one flavor and memory from another).
The group's flavors are tried in the queue's order; a flavor is skipped, with its reason,
when:

- it does not exist ("flavor F not found");
- one of its nodeTaints (NoSchedule / NoExecute) is tolerated neither by the pod nor by the
  flavor's own tolerations ("untolerated taint {key value effect <nil>} in flavor F");
- its nodeLabels contradict the pod's nodeSelector or required node affinity ("flavor F
  doesn't match node affinity"). Only the label keys the group's flavors use are compared: a
  selector on another key is left to the scheduler, and an affinity term left empty by that
  matches every flavor (the terms are ORed).

Otherwise each resource of the group is checked against the quota (the earlier pod sets'
assignments added): above what the queue could ever hold ("insufficient quota for R in
flavor F, request > maximum capacity (A > B)") it does not fit; within what is unused it fits
(borrowing when it takes the queue above its nominal quota); between the two it fits only by
preemption ("insufficient unused quota for R in flavor F, N more needed"), when the request
is within the nominal quota or the queue may preempt while borrowing. A flavor's mode is its
worst resource's.

flavorFungibility decides when to stop: at a flavor that fits without borrowing; at one that
fits by borrowing when whenCanBorrow is Borrow (the default); at one that needs preemption
when whenCanPreempt is Preempt (the default is TryNextFlavor). Past the last flavor, the best
mode seen wins (the first flavor with it). Reasons are kept unless the group fits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from services.queue.quota.cohorts import Cohort, FlavorResource
from shared.models.kueue import PREEMPTION_NEVER, TRY_NEXT_FLAVOR, ClusterQueue, ResourceFlavor
from shared.models.quantity import format_resource
from shared.models.selectors import NodeSelector, NodeSelectorTerm
from shared.models.taints import Taint, Toleration, tolerates_taint

NO_FIT = 0
PREEMPT_MODE = 1
FIT = 2
MODE_NAMES = {NO_FIT: "NoFit", PREEMPT_MODE: "Preempt", FIT: "Fit"}
"""Kueue's FlavorAssignmentMode, ordered from worst to best."""


@dataclass(frozen=True, slots=True)
class PodSet:
    """Identical pods of a workload: their summed requests and placement constraints."""

    name: str
    requests: Mapping[str, int]
    count: int = 1
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: NodeSelector | None = None
    """The pods' required node affinity."""
    tolerations: Sequence[Toleration] = ()


@dataclass(slots=True)
class PodSetAssignment:
    name: str
    flavors: dict[str, str] = field(default_factory=dict)
    """resource -> flavor (empty when the pod set does not fit)."""
    modes: dict[str, int] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)

    @property
    def mode(self) -> int:
        return min(self.modes.values(), default=FIT) if self.flavors else NO_FIT


@dataclass(slots=True)
class Assignment:
    podsets: list[PodSetAssignment] = field(default_factory=list)
    borrowing: bool = False
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    """What admission charges, per (flavor, resource), when the assignment fits."""

    @property
    def mode(self) -> int:
        return min((ps.mode for ps in self.podsets), default=FIT)

    @property
    def needs_preemption(self) -> frozenset[FlavorResource]:
        return frozenset(
            (ps.flavors[r], r) for ps in self.podsets for r, m in ps.modes.items() if m != FIT
        )

    @property
    def reasons(self) -> list[str]:
        return [r for ps in self.podsets for r in ps.reasons]

    def message(self) -> str:
        """Kueue's "couldn't assign flavors to pod set P: reason, reason" (the reasons alone
        for a workload of one pod set)."""
        failed = [ps for ps in self.podsets if ps.mode != FIT and ps.reasons]
        if len(self.podsets) == 1 and failed:
            return ", ".join(failed[0].reasons)
        return "; ".join(
            f"couldn't assign flavors to pod set {ps.name}: {', '.join(ps.reasons)}"
            for ps in failed
        )


def taint_text(taint: Taint) -> str:
    """A taint as Kueue's reasons print it (Go's %s of a v1.Taint)."""
    return f"{{{taint.key} {taint.value} {taint.effect} <nil>}}"


def untolerated_taint(flavor: ResourceFlavor, tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule / NoExecute taint of the flavor that neither the pod's nor the
    flavor's tolerations tolerate."""
    every = [*tolerations, *flavor.spec.tolerations]
    for taint in flavor.spec.node_taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not tolerates_taint(every, taint):
            return taint
    return None


def selector_matches_flavor(ps: PodSet, labels: Mapping[str, str], keys: frozenset[str]) -> bool:
    """The pod's nodeSelector and required node affinity, restricted to `keys`, against a
    flavor's nodeLabels (Kueue's flavorSelector)."""
    for key, value in ps.node_selector.items():
        if key in keys and labels.get(key) != value:
            return False
    if ps.affinity is None:
        return True
    terms: list[NodeSelectorTerm] = []
    for term in ps.affinity.node_selector_terms:
        kept = [req for req in term.match_expressions if req.key in keys]
        if not kept:
            return True  # this term matches any flavor, and terms are ORed
        terms.append(NodeSelectorTerm(match_expressions=kept))
    return NodeSelector(node_selector_terms=terms).matches(labels)


@dataclass(slots=True)
class _Quota:
    """One resource check, Kueue's fitsResourceQuota."""

    mode: int
    borrow: bool
    reason: str = ""


def _fits(cohort: Cohort, queue: str, fr: FlavorResource, amount: int, may_borrow: bool) -> _Quota:
    flavor, resource = fr
    q = cohort.queues[queue]
    limits = q.limits.get(fr)
    nominal = limits.nominal if limits is not None else 0
    most = cohort.potential(queue, fr)
    if amount > most:
        return _Quota(
            NO_FIT,
            False,
            f"insufficient quota for {resource} in flavor {flavor}, request > maximum capacity "
            f"({format_resource(resource, amount)} > {format_resource(resource, most)})",
        )
    borrow = bool(q.cohort) and cohort.used(queue, fr) + amount > nominal
    available = cohort.available(queue, fr)
    if amount <= available:
        return _Quota(FIT, borrow)
    mode = PREEMPT_MODE if amount <= nominal or may_borrow else NO_FIT
    more = format_resource(resource, amount - available)
    return _Quota(
        mode,
        borrow,
        f"insufficient unused quota for {resource} in flavor {flavor}, {more} more needed",
    )


def _try_next(mode: int, borrow: bool, cq: ClusterQueue) -> bool:
    """Kueue's shouldTryNextFlavor."""
    fungibility = cq.spec.flavor_fungibility
    if mode == PREEMPT_MODE and fungibility.when_can_preempt != TRY_NEXT_FLAVOR:
        return False  # Preempt, or v1beta2's MayStopSearch
    if mode == FIT and borrow and fungibility.when_can_borrow != TRY_NEXT_FLAVOR:
        return False  # Borrow, or MayStopSearch
    return not (mode == FIT and not borrow)


def assign_flavors(
    cohort: Cohort,
    cq: ClusterQueue,
    flavors: Mapping[str, ResourceFlavor],
    podsets: Sequence[PodSet],
    *,
    fair_sharing: bool = False,
) -> Assignment:
    """The flavors of each pod set of a workload of `cq` (see the module docstring). Stops at
    the first pod set that fits no flavor (its reasons say why)."""
    queue = cq.metadata.name
    pre = cq.spec.preemption
    may_borrow = pre.borrow_within_cohort.policy != PREEMPTION_NEVER or (
        fair_sharing and pre.reclaim_within_cohort != PREEMPTION_NEVER
    )
    groups = [
        (tuple(g.covered_resources), tuple(f.name for f in g.flavors))
        for g in cq.spec.resource_groups
    ]
    out = Assignment()
    for ps in podsets:
        psa = PodSetAssignment(ps.name)
        out.podsets.append(psa)
        requests = {r: a for r, a in ps.requests.items() if a > 0}
        missing = sorted(r for r in requests if not any(r in covered for covered, _ in groups))
        if missing:
            psa.reasons = [f"resource {r} unavailable in ClusterQueue" for r in missing]
            psa.flavors = {}
            return out
        for covered, names in groups:
            wanted = {r: a for r, a in sorted(requests.items()) if r in covered}
            if not wanted:
                continue
            keys = frozenset(k for n in names if n in flavors for k in flavors[n].spec.node_labels)
            best: dict[str, int] | None = None
            best_name, best_mode, best_borrow = "", NO_FIT, False
            reasons: list[str] = []
            for name in names:
                rf = flavors.get(name)
                if rf is None:
                    reasons.append(f"flavor {name} not found")
                    continue
                taint = untolerated_taint(rf, ps.tolerations)
                if taint is not None:
                    reasons.append(f"untolerated taint {taint_text(taint)} in flavor {name}")
                    continue
                if not selector_matches_flavor(ps, rf.spec.node_labels, keys):
                    reasons.append(f"flavor {name} doesn't match node affinity")
                    continue
                mode, borrow, modes = FIT, False, {}
                for resource, amount in wanted.items():
                    fr = (name, resource)
                    check = _fits(cohort, queue, fr, amount + out.usage.get(fr, 0), may_borrow)
                    if check.reason:
                        reasons.append(check.reason)
                    mode = min(mode, check.mode)
                    borrow = borrow or check.borrow
                    if mode == NO_FIT:
                        break
                    modes[resource] = check.mode
                if not _try_next(mode, borrow, cq):
                    best, best_name, best_mode, best_borrow = modes, name, mode, borrow
                    break
                if mode > best_mode:
                    best, best_name, best_mode, best_borrow = modes, name, mode, borrow
            if best is None or best_mode == NO_FIT:
                psa.flavors, psa.modes, psa.reasons = {}, {}, reasons
                return out
            for resource in wanted:
                psa.flavors[resource] = best_name
            psa.modes.update(best)
            out.borrowing = out.borrowing or best_borrow
            if best_mode != FIT:
                psa.reasons += reasons
        for resource, amount in requests.items():
            fr = (psa.flavors[resource], resource)
            out.usage[fr] = out.usage.get(fr, 0) + amount
    return out
