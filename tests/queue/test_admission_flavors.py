"""Quota admission on a real Redis with Kueue's flavor rules (issue 22's two defects): a pod's
own nodeSelector picks among the flavors and is never overwritten; one flavor serves a whole
resource group, so usage never splits across flavors nor exceeds a lone queue's nominal. And
ClusterQueue.spec.stopPolicy."""

from __future__ import annotations

from dataclasses import replace

import redis.asyncio as aioredis

from services.queue.quota.admission import Admission
from services.queue.records import PodRecord
from shared.models import Pod
from shared.models.kueue import QUEUE_NAME_LABEL
from shared.models.taints import Toleration
from shared.observability.metrics import BerthMetrics
from tests.builders import make_pod
from tests.queue.test_admission import eviction_samples, setup, usage_in_redis
from tests.queue.test_admission import submit as gate

FLAVORS = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: on-demand}
spec: {nodeLabels: {pool: on-demand}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeLabels: {pool: spot}
  nodeTaints: [{key: spot, value: "true", effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: team}
spec: {clusterQueue: q}
"""


def queue(groups: str) -> str:
    return (
        FLAVORS
        + """---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  resourceGroups:
"""
        + groups
    )


ON_DEMAND_THEN_SPOT = queue("""  - coveredResources: [cpu]
    flavors:
    - {name: on-demand, resources: [{name: cpu, nominalQuota: 4}]}
    - {name: spot, resources: [{name: cpu, nominalQuota: 4}]}
""")

SMALL_THEN_BIG = queue("""  - coveredResources: [cpu, memory]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 4}, {name: memory, nominalQuota: 1Gi}]
    - name: spot
      resources: [{name: cpu, nominalQuota: 4}, {name: memory, nominalQuota: 8Gi}]
""")

TOLERATE_SPOT = Toleration(key="spot", operator="Equal", value="true", effect="NoSchedule")


async def submit(admission: Admission, *pods: Pod) -> None:
    """Stored (admission rewrites the pod's node selector in the store), then gated."""
    await admission.store.apply(list(pods))
    await gate(admission, *pods)


def pod(name: str, cpu: str = "1", memory: str = "", **selector: str) -> Pod:
    builder = make_pod(name).namespace("team").label(QUEUE_NAME_LABEL, "lq")
    builder = builder.req(cpu=cpu, memory=memory) if memory else builder.req(cpu=cpu)
    p = builder.obj()
    p.spec.node_selector = dict(selector)
    p.spec.tolerations = [TOLERATE_SPOT]
    return p


async def test_pod_node_selector_picks_the_flavor_and_is_kept(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    admission = await setup(redis_client, redis_prefix, ON_DEMAND_THEN_SPOT)
    await submit(admission, pod("wants-spot", pool="spot"), pod("any"))
    verdict = await admission.admit()
    assert not verdict.waiting
    assert await usage_in_redis(admission) == {"q|spot|cpu": 1000, "q|on-demand|cpu": 1000}
    stored = await admission.store.get_pod("team", "wants-spot")
    assert stored is not None
    assert stored.spec.node_selector == {"pool": "spot"}
    other = await admission.store.get_pod("team", "any")
    assert other is not None
    assert other.spec.node_selector == {"pool": "on-demand"}


async def test_a_pod_contradicting_every_flavor_waits_with_each_flavor_named(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    admission = await setup(redis_client, redis_prefix, ON_DEMAND_THEN_SPOT)
    untolerated = pod("no-toleration", pool="spot")
    untolerated.spec.tolerations = []
    await submit(admission, pod("gpu-pool", pool="gpu"), untolerated)
    verdict = await admission.admit()
    assert not verdict.admitted
    assert verdict.waiting["team/gpu-pool"][1].endswith(
        "flavor on-demand doesn't match node affinity, flavor spot doesn't match node affinity"
    )
    assert verdict.waiting["team/no-toleration"][1].endswith(
        "flavor on-demand doesn't match node affinity, "
        "untolerated taint {spot true NoSchedule <nil>} in flavor spot"
    )
    assert await usage_in_redis(admission) == {}


async def test_one_flavor_per_resource_group_and_usage_within_nominal(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    admission = await setup(redis_client, redis_prefix, SMALL_THEN_BIG)
    await submit(admission, pod("big-memory", cpu="1", memory="2Gi"), pod("small", memory="1Gi"))
    verdict = await admission.admit()
    assert not verdict.waiting
    assert await usage_in_redis(admission) == {
        "q|spot|cpu": 1000,
        "q|spot|memory": 2 << 30,
        "q|on-demand|cpu": 1000,
        "q|on-demand|memory": 1 << 30,
    }
    stored = await admission.store.get_pod("team", "big-memory")
    assert stored is not None
    assert stored.spec.node_selector == {"pool": "spot"}
    # on-demand's memory is full: the next small pod goes to spot, cpu and memory together.
    await submit(admission, pod("next", memory="512Mi"))
    await admission.admit()
    usage = await usage_in_redis(admission)
    assert usage["q|on-demand|memory"] == 1 << 30
    assert usage["q|on-demand|cpu"] == 1000
    assert usage["q|spot|cpu"] == 2000


async def test_stop_policy_hold_then_drain_then_resume(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """ClusterQueue.spec.stopPolicy: Hold admits nothing more, HoldAndDrain also evicts what
    it admitted (once), None admits again."""
    admission = await setup(redis_client, redis_prefix, ON_DEMAND_THEN_SPOT)
    admission.metrics = metrics = BerthMetrics()
    first = pod("first")
    await submit(admission, first)
    await admission.admit()
    assert admission.is_admitted(PodRecord.from_pod(first))
    status = metrics.registry.get_sample_value
    assert status("kueue_cluster_queue_status", {"cluster_queue": "q", "status": "active"}) == 1

    async def stop(policy: str) -> None:
        (cq,) = [q for q in admission.queues.values() if q.metadata.name == "q"]
        cq.spec.stop_policy = policy
        await admission.store.apply([cq])
        await admission.load()

    await stop("Hold")
    await submit(admission, pod("second"))
    held = await admission.admit()
    assert not held.admitted
    assert held.waiting["team/second"][1].endswith("ClusterQueue q is inactive (Hold)")
    assert admission.is_admitted(PodRecord.from_pod(first))  # Hold keeps it running
    assert admission.evicted == 0
    # Kueue: a stopped ClusterQueue is pending, its LocalQueues not active.
    assert status("kueue_cluster_queue_status", {"cluster_queue": "q", "status": "pending"}) == 1
    assert status("kueue_cluster_queue_status", {"cluster_queue": "q", "status": "active"}) == 0
    lq = {"name": "lq", "namespace": "team"}
    assert status("kueue_local_queue_status", {**lq, "active": "False"}) == 1

    await stop("HoldAndDrain")
    await admission.admit()
    await admission.admit()  # evicted once, not again while it leaves
    assert admission.evicted == 1
    assert eviction_samples(metrics) == {
        ("kueue_evicted_workloads_total", "q", "ClusterQueueStopped"): 1,
        ("kueue_local_queue_evicted_workloads_total", "team/lq", "ClusterQueueStopped"): 1,
    }
    stored = await admission.store.get_pod("team", "first")
    assert stored is not None
    assert stored.spec.node_name == ""
    await admission.gate(PodRecord.from_pod(first), "delete")  # the informer's events
    await admission.gate(PodRecord.from_pod(stored), "add")
    drained = await admission.admit()
    assert not drained.admitted
    assert await usage_in_redis(admission) == {}

    await stop("None")
    await admission.admit()
    assert await usage_in_redis(admission) == {"q|on-demand|cpu": 2000}


async def test_a_pod_bound_after_its_eviction_is_evicted_again_not_charged(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """An evicted pod that a proposal already in flight binds anyway (a stale binding) would
    be charged on sight, above the quota; admission evicts it again instead."""
    admission = await setup(redis_client, redis_prefix, ON_DEMAND_THEN_SPOT)
    first = pod("first")
    await submit(admission, first)
    await admission.admit()
    (cq,) = admission.queues.values()
    cq.spec.stop_policy = "HoldAndDrain"
    await admission.store.apply([cq])
    await admission.load()
    await admission.admit()
    assert admission.evicted == 1
    await admission.gate(PodRecord.from_pod(first), "delete")  # the eviction's own events
    stored = await admission.store.get_pod("team", "first")
    assert stored is not None
    await admission.gate(PodRecord.from_pod(stored), "add")
    stale = PodRecord.from_pod(stored)
    await admission.gate(replace(stale, node_name="n1"), "update")  # the stale binding
    await admission.flush()  # as the informer's batch ends
    assert await usage_in_redis(admission) == {}
    again = await admission.store.get_pod("team", "first")
    assert again is not None
    assert again.spec.node_name == ""
