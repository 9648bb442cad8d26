"""Leader election through a Lease (client-go's rules) against the API emulator, and the
tables that turn API answers into outcomes and API writes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.adapter.leader import LeaderElector, LeaseSettings
from services.adapter.status import report_for
from services.binder.kube_api import ApiAnswer, bind_answer, evict_answer
from shared.kube.client import KubeApi, KubeApiError, KubeUnavailableError, load_config
from shared.messaging.messages import Outcome, OutcomeResult
from tests.kube.conftest import ApiServer

SETTINGS = LeaseSettings(
    namespace="kube-system", lease_duration=1.0, renew_deadline=0.6, retry_period=0.1
)


async def test_one_leader_at_a_time_and_takeover_after_the_lease_expires(
    api_server: ApiServer,
) -> None:
    api = KubeApi(load_config(str(api_server.kubeconfig)))
    a = LeaderElector(api, "a", SETTINGS)
    b = LeaderElector(api, "b", SETTINGS)
    try:
        await a.acquire()
        holding = asyncio.create_task(a.hold())
        assert await b.try_acquire_or_renew() is False
        # b keeps trying for longer than a lease: a renews, so b never gets it.
        b_acquires = asyncio.create_task(b.acquire())
        await asyncio.sleep(2.5 * SETTINGS.lease_duration)
        assert not b_acquires.done()
        lease = api_server.emulator.object("leases", "kube-system", "berth-adapter")
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "a"
        # a stops renewing (a crash): b takes over once the lease ran out, as observed by b.
        holding.cancel()
        await asyncio.wait_for(b_acquires, 5 * SETTINGS.lease_duration)
        lease = api_server.emulator.object("leases", "kube-system", "berth-adapter")
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "b"
        assert lease["spec"]["leaseTransitions"] == 1
        # a comes back: it cannot renew any more, and notices within renew_deadline.
        await asyncio.wait_for(a.hold(), 5 * SETTINGS.renew_deadline)
        assert a.lost.is_set()
        # b stops cleanly and releases: a takes it at once, without waiting out the lease.
        await b.release()
        a2 = LeaderElector(api, "a2", SETTINGS)
        assert await a2.try_acquire_or_renew() is True
    finally:
        await api.close()


async def test_a_write_race_has_one_winner(api_server: ApiServer) -> None:
    """Both candidates read the empty Lease, then both write: the compare-and-swap on the
    resourceVersion lets one through."""
    api = KubeApi(load_config(str(api_server.kubeconfig)))
    try:
        first = LeaderElector(api, "first", SETTINGS)
        await first.acquire()
        await first.release()
        racers = [LeaderElector(api, name, SETTINGS) for name in ("x", "y", "z")]
        results = await asyncio.gather(*(r.try_acquire_or_renew() for r in racers))
        assert sum(results) == 1
    finally:
        await api.close()


@pytest.mark.parametrize(
    ("error", "bind", "evict"),
    [
        pytest.param(None, "ok", "ok", id="success"),
        pytest.param(KubeApiError(409, "Conflict", "already assigned"), "conflict", "error"),
        pytest.param(KubeApiError(404, "NotFound", "gone"), "gone", "ok"),
        pytest.param(KubeApiError(429, "TooManyRequests", "budget"), "retry", "retry"),
        pytest.param(KubeApiError(500, "InternalError", "etcd"), "retry", "retry"),
        pytest.param(KubeApiError(403, "Forbidden", "rbac"), "error", "error"),
        pytest.param(KubeUnavailableError("refused"), "retry", "retry", id="unreachable"),
    ],
)
def test_api_answers(error: Exception | None, bind: str, evict: str) -> None:
    assert bind_answer(error).result == bind
    assert evict_answer(error).result == evict
    if isinstance(error, KubeApiError) and bind != "gone":
        assert error.message in bind_answer(error).message


def test_a_pod_gone_before_its_eviction_counts_as_evicted() -> None:
    assert evict_answer(KubeApiError(404, "NotFound", "x")) == ApiAnswer(
        "ok", "the victim is gone already"
    )


def outcome(result: OutcomeResult, **kw: Any) -> Outcome:
    return Outcome(tenant="t", pod_key="ns/web", uid="u1", attempt=1, result=result, **kw)


def test_what_each_outcome_writes() -> None:
    scheduled = report_for(outcome("scheduled", node_name="n7"))
    assert scheduled is not None
    assert scheduled.patch is None
    assert (scheduled.event_type, scheduled.reason) == ("Normal", "Scheduled")
    assert scheduled.message == "Successfully assigned ns/web to n7"

    fit = "0/3 nodes are available: 3 Insufficient cpu."
    parked = report_for(outcome("unschedulable", message=fit, nominated_node_name="n2"))
    assert parked is not None
    assert parked.patch is not None
    (cond,) = parked.patch["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
        fit,
    )
    assert parked.patch["status"]["nominatedNodeName"] == "n2"
    assert (parked.event_type, parked.reason, parked.message) == (
        "Warning",
        "FailedScheduling",
        fit,
    )

    cleared = report_for(outcome("unschedulable", message=fit, nominated_node_name=""))
    assert cleared is not None
    assert cleared.patch is not None
    assert cleared.patch["status"]["nominatedNodeName"] is None  # removes the field
    untouched = report_for(outcome("unschedulable", message=fit))
    assert untouched is not None
    assert untouched.patch is not None
    assert "nominatedNodeName" not in untouched.patch["status"]

    error = report_for(outcome("error", message="binder: boom"))
    assert error is not None
    assert error.patch is not None
    assert error.patch["status"]["conditions"][0]["reason"] == "SchedulerError"
    assert report_for(outcome("conflict")) is None
    assert report_for(outcome("extend")) is None
