"""The worker reports Permit's verdict to the binder: gang members "wait" with the Coscheduling
timeout where the pod's profile runs Coscheduling, and are ordinary pods ("allow") where it
does not (in process: `decide` over a cache, no servers)."""

from __future__ import annotations

import pytest

from scheduling.cache.local import LocalCluster
from scheduling.framework.runtime import build_frameworks
from scheduling.plugins.registry import in_tree_registry
from services.scheduler.cycle import decide, request_pod
from shared.config import load_config
from shared.messaging.messages import ScheduleRequest, pod_fingerprint
from shared.models import POD_GROUP_LABEL, Pod, encode
from tests.builders import make_node, make_pod, make_pod_group

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def request(pod: Pod) -> ScheduleRequest:
    return ScheduleRequest(
        tenant=pod.metadata.namespace,
        pod_key=pod.key,
        uid=pod.metadata.uid,
        attempt=1,
        scheduling_cycle=1,
        priority=0,
        timestamp=0.0,
        initial_attempt_timestamp=0.0,
        lease_expires_at=0.0,
        pod=encode(pod),
    )


@pytest.mark.parametrize(
    ("profile_yaml", "permit", "timeout", "plugins"),
    [
        pytest.param("", "wait", 12.0, ("Coscheduling",), id="default profile: the gang waits"),
        pytest.param(
            "profiles:\n- plugins: {multiPoint: {disabled: [{name: Coscheduling}]}}\n",
            "allow",
            0.0,
            (),
            id="coscheduling off: an ordinary pod",
        ),
    ],
)
def test_a_gang_member_proposal(
    profile_yaml: str, permit: str, timeout: float, plugins: tuple[str, ...]
) -> None:
    members = [make_pod(f"m{i}").label(POD_GROUP_LABEL, "g").req(cpu="1").obj() for i in range(2)]
    cache = LocalCluster([make_node("n0").capacity(cpu="4", pods=10).obj()], members)
    group = make_pod_group("g", 2, schedule_timeout_seconds=12)
    cache.objects["PodGroup"] = {group.key: group}
    frameworks = build_frameworks(load_config(HEADER + profile_yaml), in_tree_registry(), cache)
    decision = decide(frameworks, cache, request(members[0]), now=0.0)
    assert decision.proposal is not None, decision.outcome
    p = decision.proposal
    assert (p.kind, p.node_name) == ("bind", "n0")
    assert (p.permit, p.permit_timeout_seconds, p.permit_plugins) == (permit, timeout, plugins)
    # the worker does not wait itself: nothing is left waiting in its framework
    assert len(frameworks["default-scheduler"].waiting_pods) == 0


@pytest.mark.parametrize("sent", ["", "queue-fingerprint"])
def test_the_proposal_carries_the_queues_fingerprint_or_computes_it(sent: str) -> None:
    """The queue computed the fingerprint when it read the pod; the worker echoes it (and
    computes one only for a request without)."""
    pod = make_pod("p").req(cpu="1").obj()
    cache = LocalCluster([make_node("n0").capacity(cpu="4", pods=10).obj()])
    frameworks = build_frameworks(load_config(HEADER), in_tree_registry(), cache)
    asked = request(pod)
    asked.fingerprint = sent
    decision = decide(frameworks, cache, asked, now=0.0)
    assert decision.proposal is not None, decision.outcome
    assert decision.proposal.pod_fingerprint == (sent or pod_fingerprint(pod))


def test_the_worker_takes_the_views_copy_of_the_very_version_it_is_asked_to_schedule() -> None:
    pod = make_pod("p").uid("u1").req(cpu="1").obj()
    pod.metadata.resource_version = 7
    cache = LocalCluster([make_node("n0").capacity(cpu="4", pods=10).obj()], pending=[pod])
    asked = request(pod)
    asked.resource_version = 7
    assert request_pod(asked, cache) is cache.pods[pod.key]
    # Another version (or none named): the request's own bytes are decoded.
    for version in (6, 0):
        asked.resource_version = version
        decoded = request_pod(asked, cache)
        assert decoded is not cache.pods[pod.key]
        assert decoded == pod
