"""API-initiated eviction (status codes as the Kubernetes docs give them) and the disruption
controller's arithmetic."""

from __future__ import annotations

import pytest

from shared.lifecycle.eviction import (
    INTERNAL_ERROR,
    MSG_MULTIPLE_BUDGETS,
    MSG_RATE_LIMITED,
    OK,
    TOO_MANY_REQUESTS,
    compute_pdb_status,
    evict,
    grace_period_seconds,
    refresh_pdb_statuses,
    scaled_value,
)
from shared.models import Pod, PodDisruptionBudget
from tests.builders import label_selector, make_pdb, make_pod
from tests.preemption.tables import StatusWithDisrupted

NOW = 10_000.0


def app_pods(count: int, *, ready: int | None = None, app: str = "web") -> list[Pod]:
    """`count` bound pods labelled app=<app>; the first `ready` of them Running."""
    ready = count if ready is None else ready
    return [
        make_pod(f"{app}-{i}")
        .uid(f"{app}-{i}")
        .label("app", app)
        .node("n1")
        .phase("Running" if i < ready else "Unknown")
        .obj()
        for i in range(count)
    ]


def budget(
    *, min_available: int | str | None = None, max_unavailable: int | str | None = None
) -> PodDisruptionBudget:
    return make_pdb(
        "web",
        label_selector({"app": "web"}),
        min_available=min_available,
        max_unavailable=max_unavailable,
    )


# ------------------------------------------------------------------ response codes
def test_pod_without_a_budget_is_evicted() -> None:
    pods = app_pods(3)
    result = evict(pods[0], [], pods, now=NOW)
    assert (result.code, result.allowed, result.pdb) == (OK, True, None)


def test_violating_a_budget_is_too_many_requests() -> None:
    pods = app_pods(3)
    result = evict(pods[0], [budget(min_available=3)], pods, now=NOW)
    assert result.code == TOO_MANY_REQUESTS
    assert result.message == (
        "Cannot evict pod as it would violate the pod's disruption budget. The disruption "
        "budget web needs 3 healthy pods and has 3 currently"
    )
    assert result.status is not None
    assert result.status.disruptions_allowed == 0


def test_two_budgets_selecting_the_pod_is_an_internal_error() -> None:
    pods = app_pods(3)
    other = make_pdb("web-too", label_selector(None, ("app", "In", ["web"])), min_available=0)
    result = evict(pods[0], [budget(min_available=0), other], pods, now=NOW)
    assert (result.code, result.message) == (INTERNAL_ERROR, MSG_MULTIPLE_BUDGETS)


class Allowance:
    """A rate limiter that accepts `left` more requests."""

    def __init__(self, left: int) -> None:
        self.left = left

    def try_accept(self) -> bool:
        self.left -= 1
        return self.left >= 0


def test_rate_limiting_is_too_many_requests() -> None:
    limiter = Allowance(2)
    pods = app_pods(1)
    codes = [evict(pods[0], [], pods, rate_limiter=limiter).code for _ in range(3)]
    assert codes == [OK, OK, TOO_MANY_REQUESTS]
    assert evict(pods[0], [], pods, rate_limiter=limiter).message == MSG_RATE_LIMITED
    limiter.left = 1
    assert evict(pods[0], [], pods, rate_limiter=limiter).code == OK


# ------------------------------------------------------------------ budgets that do not apply
@pytest.mark.parametrize(
    ("pod", "code"),
    [
        pytest.param(make_pod("x").label("app", "web").phase("Succeeded").obj(), OK, id="done"),
        pytest.param(make_pod("x").label("app", "web").phase("Failed").obj(), OK, id="failed"),
        pytest.param(make_pod("x").label("app", "web").phase("Pending").obj(), OK, id="pending"),
        pytest.param(
            make_pod("x").label("app", "web").node("n1").terminating().obj(),
            OK,
            id="already terminating",
        ),
        pytest.param(
            make_pod("x").label("app", "web").node("n1").phase("Running").obj(),
            TOO_MANY_REQUESTS,
            id="running: the budget applies",
        ),
    ],
)
def test_pods_that_can_ignore_budgets(pod: Pod, code: int) -> None:
    pods = [*app_pods(2), pod]
    assert evict(pod, [budget(min_available=3)], pods, now=NOW).code == code


@pytest.mark.parametrize(
    "pdb",
    [
        pytest.param(make_pdb("other", label_selector({"app": "db"})), id="another app"),
        pytest.param(make_pdb("empty", label_selector({})), id="empty selector matches nothing"),
        pytest.param(make_pdb("nil", None), id="nil selector matches nothing"),
        pytest.param(
            make_pdb("elsewhere", label_selector({"app": "web"}), namespace="other"),
            id="another namespace",
        ),
    ],
)
def test_a_pod_no_budget_covers_always_gets_200(pdb: PodDisruptionBudget) -> None:
    pdb.spec.min_available = 100
    pods = app_pods(2)
    assert evict(pods[0], [pdb], pods, now=NOW).code == OK


# ------------------------------------------------------------------- budget arithmetic
@pytest.mark.parametrize(
    ("pdb", "total", "ready", "code", "status"),
    [
        pytest.param(budget(min_available=2), 3, 3, OK, (0, 3, 2, 3), id="minAvailable 2 of 3"),
        pytest.param(budget(min_available=3), 3, 3, 429, (0, 3, 3, 3), id="minAvailable 3 of 3"),
        pytest.param(budget(min_available="50%"), 3, 3, OK, (0, 3, 2, 3), id="50% of 3 is 2"),
        pytest.param(
            budget(min_available="34%"),
            3,
            2,
            429,
            (0, 2, 2, 3),
            id="minAvailable percentage rounds up (34% of 3 is 2)",
        ),
        pytest.param(budget(max_unavailable=1), 3, 3, OK, (0, 3, 2, 3), id="maxUnavailable 1"),
        pytest.param(budget(max_unavailable=0), 3, 3, 429, (0, 3, 3, 3), id="maxUnavailable 0"),
        pytest.param(
            budget(max_unavailable="34%"),
            3,
            2,
            OK,
            (0, 2, 1, 3),
            id="maxUnavailable percentage rounds up (34% of 3 is 2)",
        ),
        pytest.param(
            budget(max_unavailable="100%"), 3, 3, OK, (2, 3, 0, 3), id="maxUnavailable 100%"
        ),
        pytest.param(
            budget(min_available=2),
            3,
            2,
            429,
            (0, 2, 2, 3),
            id="counted against currently healthy pods",
        ),
    ],
)
def test_budget_arithmetic(
    pdb: PodDisruptionBudget,
    total: int,
    ready: int,
    code: int,
    status: tuple[int, int, int, int],
) -> None:
    pods = app_pods(total, ready=ready)
    result = evict(pods[0], [pdb], pods, now=NOW)
    assert result.code == code
    assert result.status is not None
    got = result.status
    assert (
        got.disruptions_allowed,
        got.current_healthy,
        got.desired_healthy,
        got.expected_pods,
    ) == status
    assert ("web-0" in result.disrupted_pods) is (code == OK)


def test_inputs_are_not_mutated_and_the_caller_applies_the_result() -> None:
    pods = app_pods(3)
    pdb = budget(min_available=2)
    first = evict(pods[0], [pdb], pods, now=NOW)
    assert first.code == OK
    assert pdb.status.disruptions_allowed == 0  # untouched: still the manifest's status
    assert pods[0].metadata.deletion_timestamp is None
    pods[0].metadata.deletion_timestamp = NOW  # the caller deletes the evicted pod
    second = evict(pods[1], [pdb], pods, now=NOW)
    assert second.code == TOO_MANY_REQUESTS


def test_recently_evicted_pods_do_not_count_as_healthy() -> None:
    pods = app_pods(3)
    pdb = budget(min_available=2)
    pdb.status = StatusWithDisrupted(disrupted_pods={"web-1": NOW - 10})
    assert evict(pods[0], [pdb], pods, now=NOW).code == TOO_MANY_REQUESTS
    # After the deletion timeout (2 minutes) the controller counts it again.
    assert evict(pods[0], [pdb], pods, now=NOW + 200).code == OK


@pytest.mark.parametrize(
    ("policy", "ready", "code"),
    [
        pytest.param(None, 2, OK, id="IfHealthyBudget: budget met, the unready pod may go"),
        pytest.param(None, 1, TOO_MANY_REQUESTS, id="IfHealthyBudget: budget not met"),
        pytest.param("AlwaysAllow", 1, OK, id="AlwaysAllow: an unready pod may always go"),
    ],
)
def test_unhealthy_pod_eviction_policy(policy: str | None, ready: int, code: int) -> None:
    pods = app_pods(3, ready=ready)
    pdb = budget(min_available=2)
    pdb.spec.unhealthy_pod_eviction_policy = policy
    unready = pods[-1]
    result = evict(unready, [pdb], pods, now=NOW)
    assert result.code == code
    if code == OK:
        assert result.disrupted_pods == {}  # an unready pod spends no disruption


def test_invalid_budget_is_an_internal_error() -> None:
    pods = app_pods(2)
    result = evict(pods[0], [budget(min_available="half")], pods, now=NOW)
    assert result.code == INTERNAL_ERROR


@pytest.mark.parametrize(
    ("value", "total", "up", "down"),
    [
        pytest.param(2, 10, 2, 2, id="integers are absolute"),
        pytest.param("50%", 3, 2, 1, id="50% of 3"),
        pytest.param("10%", 5, 1, 0, id="10% of 5"),
        pytest.param("0%", 5, 0, 0, id="0%"),
        pytest.param("100%", 7, 7, 7, id="100%"),
    ],
)
def test_scaled_value(value: int | str, total: int, up: int, down: int) -> None:
    assert scaled_value(value, total, round_up=True) == up
    assert scaled_value(value, total, round_up=False) == down


def test_controller_status_ignores_terminating_and_foreign_pods() -> None:
    pods = [*app_pods(4), *app_pods(2, app="db")]
    pods[0].metadata.deletion_timestamp = NOW
    status = compute_pdb_status(budget(max_unavailable=1), pods, NOW)
    assert (status.expected_pods, status.current_healthy, status.desired_healthy) == (4, 3, 3)
    assert status.disruptions_allowed == 0


def test_refresh_writes_statuses_for_preemption() -> None:
    pods = app_pods(4)
    pdb = budget(min_available=1)
    refresh_pdb_statuses([pdb], pods, NOW)
    assert pdb.status.disruptions_allowed == 3


@pytest.mark.parametrize(
    ("pod", "seconds"),
    [
        pytest.param(make_pod("v").obj(), 30, id="F19: the default grace period is 30 s"),
        pytest.param(make_pod("v").grace_period(0).obj(), 0, id="D11: a 0 s grace period"),
        pytest.param(make_pod("v").grace_period(5).obj(), 5, id="a short grace period"),
    ],
)
def test_victim_grace_period(pod: Pod, seconds: int) -> None:
    assert grace_period_seconds(pod) == seconds
