"""API-initiated eviction (policy/v1 Eviction) as a library.

`evict(pod, pdbs, pods)` answers what POST .../pods/{name}/eviction answers upstream
(pkg/registry/core/pod/storage/eviction.go):

- 200: the pod may go. No PodDisruptionBudget covers it, the covering budget allows one more
  disruption, or the pod can ignore budgets (terminal, Pending, or already being deleted).
- 429: the covering budget would be violated, or the caller's rate limiter refused the request.
- 500: more than one budget selects the pod (misconfiguration), or a budget is invalid.

The budget's status is recomputed from `pods` the way the disruption controller does
(pkg/controller/disruption/disruption.go) before the check, so the answer is "against currently
healthy pods" and never against a stale status. Inputs are never mutated: an allowed eviction
returns the covering budget's new status (disruptionsAllowed decremented, the pod added to
disruptedPods); the caller stores it and deletes the pod.

Berth decisions where the API has no equivalent:
- A pod is healthy when it is Ready. Berth pods carry no conditions unless a kubelet-like source
  sets them, so a bound pod in phase Running or with no phase yet counts as Ready (see
  `is_pod_ready`); a pod with a Ready condition uses it.
- expectedPods for a percentage or maxUnavailable is the number of pods the selector matches
  (upstream asks the pods' controllers for their scale; berth has no controllers).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from shared.models import (
    LabelSelector,
    Pod,
    PodDisruptionBudget,
    PodDisruptionBudgetStatus,
)

OK = 200
TOO_MANY_REQUESTS = 429
INTERNAL_ERROR = 500

MSG_EVICTED = "pod evicted"
MSG_VIOLATES_BUDGET = "Cannot evict pod as it would violate the pod's disruption budget."
MSG_MULTIPLE_BUDGETS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)
MSG_RATE_LIMITED = "Too many requests, please try again later."

UNHEALTHY_POD_EVICTION_ALWAYS_ALLOW = "AlwaysAllow"
DELETION_TIMEOUT_SECONDS = 120.0
"""Upstream disruption.DeletionTimeout: a pod in disruptedPods stops counting as healthy for
this long after its eviction was granted (the controller expects its deletion by then)."""

DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30
"""The API default of spec.terminationGracePeriodSeconds."""

_TERMINAL_OR_PENDING = frozenset({"Succeeded", "Failed", "Pending"})


class InvalidBudgetError(ValueError):
    """minAvailable / maxUnavailable is neither an integer nor a percentage string."""


class RateLimiter(Protocol):
    """Admission of eviction requests (API priority and fairness stands in upstream)."""

    def try_accept(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class EvictionResult:
    code: int
    message: str
    pdb: PodDisruptionBudget | None = None
    """The budget covering the pod, if exactly one does."""
    status: PodDisruptionBudgetStatus | None = None
    """That budget's status after this request (recomputed, and decremented when allowed)."""
    disrupted_pods: dict[str, float] = field(default_factory=dict)
    """Pod name -> eviction time: the budget's disruptedPods after this request."""

    @property
    def allowed(self) -> bool:
        return self.code == OK


# ------------------------------------------------------------------------------ health
def is_pod_ready(pod: Pod) -> bool:
    """Upstream podutil.IsPodReady, with berth's default for pods without conditions."""
    conditions: Any = getattr(pod.status, "conditions", None)
    if conditions:
        for condition in conditions:
            if getattr(condition, "type", "") == "Ready":
                return bool(getattr(condition, "status", "") == "True")
    if not pod.spec.node_name:
        return False
    return pod.status.phase in ("", "Running")


def grace_period_seconds(pod: Pod) -> int:
    """How long an evicted or preempted pod gets to stop before it is killed."""
    seconds = pod.spec.termination_grace_period_seconds
    return DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS if seconds is None else seconds


def can_ignore_pdb(pod: Pod) -> bool:
    """Upstream canIgnorePDB: a terminal, Pending or terminating pod is deleted directly."""
    return pod.status.phase in _TERMINAL_OR_PENDING or pod.metadata.deletion_timestamp is not None


# --------------------------------------------------------------------------- selection
def _non_empty_selector_matches(selector: LabelSelector | None, labels: dict[str, str]) -> bool:
    # The eviction subresource and preemption: a nil or empty selector matches nothing.
    return selector is not None and not selector.is_empty() and selector.matches(labels)


def pdbs_covering(pod: Pod, pdbs: Iterable[PodDisruptionBudget]) -> list[PodDisruptionBudget]:
    """Budgets in the pod's namespace whose (non-empty) selector matches the pod's labels."""
    return [
        pdb
        for pdb in pdbs
        if pdb.metadata.namespace == pod.metadata.namespace
        and _non_empty_selector_matches(pdb.spec.selector, pod.metadata.labels)
    ]


def pods_selected_by(pdb: PodDisruptionBudget, pods: Iterable[Pod]) -> list[Pod]:
    """The disruption controller's getPodsForPdb: nil selects nothing, {} the whole namespace."""
    selector = pdb.spec.selector
    if selector is None:
        return []
    namespace = pdb.metadata.namespace
    return [
        p for p in pods if p.metadata.namespace == namespace and selector.matches(p.metadata.labels)
    ]


# ------------------------------------------------------------------------------ status
def scaled_value(value: int | str, total: int, *, round_up: bool) -> int:
    """Upstream intstr.GetScaledValueFromIntOrPercent."""
    if isinstance(value, bool):
        raise InvalidBudgetError(f"invalid value for IntOrString: {value!r}")
    if isinstance(value, int):
        return value
    text = value.strip()
    if not text.endswith("%"):
        raise InvalidBudgetError(
            f"invalid value for IntOrString: invalid type: string is not a percentage: {value!r}"
        )
    try:
        percent = int(text[:-1])
    except ValueError:
        raise InvalidBudgetError(f"invalid value {value!r}: not an integer percentage") from None
    if round_up:
        return math.ceil(percent * total / 100)
    return math.floor(percent * total / 100)


def disrupted_pods_of(pdb: PodDisruptionBudget) -> dict[str, float]:
    """status.disruptedPods (pod name -> eviction time), when the model carries it."""
    value: Any = getattr(pdb.status, "disrupted_pods", None)
    return dict(value) if value else {}


def expected_and_desired(pdb: PodDisruptionBudget, matched: int) -> tuple[int, int]:
    """Upstream getExpectedPodCount: (expectedPods, desiredHealthy); percentages round up."""
    spec = pdb.spec
    if spec.max_unavailable is not None:
        expected = matched
        max_unavailable = scaled_value(spec.max_unavailable, expected, round_up=True)
        return expected, max(0, expected - max_unavailable)
    if spec.min_available is not None:
        if isinstance(spec.min_available, int):
            return matched, spec.min_available
        expected = matched
        return expected, scaled_value(spec.min_available, expected, round_up=True)
    return 0, 0


def count_healthy(pods: Iterable[Pod], disrupted: dict[str, float], now: float) -> int:
    """Upstream countHealthyPods: Ready pods not being deleted and not just evicted."""
    healthy = 0
    for pod in pods:
        if pod.metadata.deletion_timestamp is not None:
            continue
        evicted_at = disrupted.get(pod.metadata.name)
        if evicted_at is not None and evicted_at + DELETION_TIMEOUT_SECONDS > now:
            continue
        if is_pod_ready(pod):
            healthy += 1
    return healthy


def compute_pdb_status(
    pdb: PodDisruptionBudget, pods: Iterable[Pod], now: float | None = None
) -> PodDisruptionBudgetStatus:
    """The status the disruption controller would write for this budget over `pods`."""
    moment = time.time() if now is None else now
    matched = pods_selected_by(pdb, pods)
    expected, desired = expected_and_desired(pdb, len(matched))
    healthy = count_healthy(matched, disrupted_pods_of(pdb), moment)
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    return PodDisruptionBudgetStatus(
        disruptions_allowed=allowed,
        current_healthy=healthy,
        desired_healthy=desired,
        expected_pods=expected,
    )


def refresh_pdb_statuses(
    pdbs: Iterable[PodDisruptionBudget], pods: Sequence[Pod], now: float | None = None
) -> None:
    """Write each budget's controller-computed status in place (for budgets read from
    manifests, whose status is empty; preemption reads status.disruptionsAllowed)."""
    for pdb in pdbs:
        fresh = compute_pdb_status(pdb, pods, now)
        pdb.status.disruptions_allowed = fresh.disruptions_allowed
        pdb.status.current_healthy = fresh.current_healthy
        pdb.status.desired_healthy = fresh.desired_healthy
        pdb.status.expected_pods = fresh.expected_pods


# ---------------------------------------------------------------------------- eviction
def evict(
    pod: Pod,
    pdbs: Iterable[PodDisruptionBudget],
    pods: Sequence[Pod],
    *,
    now: float | None = None,
    rate_limiter: RateLimiter | None = None,
) -> EvictionResult:
    """Whether the API would evict `pod` now; `pods` are the cluster's pods (for health)."""
    if rate_limiter is not None and not rate_limiter.try_accept():
        return EvictionResult(TOO_MANY_REQUESTS, MSG_RATE_LIMITED)
    if can_ignore_pdb(pod):
        return EvictionResult(OK, MSG_EVICTED)
    covering = pdbs_covering(pod, pdbs)
    if len(covering) > 1:
        return EvictionResult(INTERNAL_ERROR, MSG_MULTIPLE_BUDGETS)
    if not covering:
        return EvictionResult(OK, MSG_EVICTED)
    pdb = covering[0]
    moment = time.time() if now is None else now
    try:
        status = compute_pdb_status(pdb, pods, moment)
    except InvalidBudgetError as exc:
        return EvictionResult(INTERNAL_ERROR, str(exc), pdb)
    disrupted = disrupted_pods_of(pdb)

    if not is_pod_ready(pod):
        # An unready pod does not count towards currentHealthy: deleting it disrupts nothing
        # when the budget is met anyway, or when the budget says so.
        policy = pdb.spec.unhealthy_pod_eviction_policy
        if policy == UNHEALTHY_POD_EVICTION_ALWAYS_ALLOW or (
            status.desired_healthy > 0 and status.current_healthy >= status.desired_healthy
        ):
            return EvictionResult(OK, MSG_EVICTED, pdb, status, disrupted)

    if status.disruptions_allowed <= 0:
        cause = (
            f"The disruption budget {pdb.metadata.name} needs {status.desired_healthy} healthy "
            f"pods and has {status.current_healthy} currently"
        )
        return EvictionResult(
            TOO_MANY_REQUESTS, f"{MSG_VIOLATES_BUDGET} {cause}", pdb, status, disrupted
        )
    status.disruptions_allowed -= 1
    disrupted[pod.metadata.name] = moment
    return EvictionResult(OK, MSG_EVICTED, pdb, status, disrupted)
