"""Quota admission (services/queue/quota/admission.py) on a real Redis: what is admitted, in which
order (DRF across a cohort), with which reason the rest waits, and that usage in Redis is
always the sum of what is admitted."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import msgpack
import redis.asyncio as aioredis

from services.queue.quota.admission import Admission
from services.queue.records import PodRecord
from shared.models import POD_GROUP_LABEL, Namespace, Pod, load_manifest_text
from shared.models.kueue import QUEUE_NAME_LABEL
from shared.models.meta import ObjectMeta
from shared.observability.metrics import BerthMetrics
from shared.store import ClusterStore
from tests.builders import label_selector, make_pdb, make_pod, make_pod_group


def queues(*specs: tuple[str, str, int, int | None, Any]) -> str:
    """ClusterQueues (name, cohort, nominal cpu, borrowingLimit, weight), one LocalQueue "lq"
    per queue in the namespace of the queue's name, and a flavor "default"."""
    docs = ["apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: default}"]
    for name, cohort, nominal, borrowing, weight in specs:
        limit = "" if borrowing is None else f", borrowingLimit: {borrowing}"
        docs.append(
            f"""apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  cohort: "{cohort}"
  namespaceSelector: {{}}
  fairSharing: {{weight: {weight}}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: {nominal}{limit}}}]}}]"""
        )
        docs.append(
            f"apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
            f"metadata: {{name: lq, namespace: {name}}}\nspec: {{clusterQueue: {name}}}"
        )
    return "\n---\n".join(docs)


def pod(name: str, namespace: str, cpu: str = "1", *, created: float = 0.0, **kw: Any) -> Pod:
    builder = make_pod(name).namespace(namespace).req(cpu=cpu).label(QUEUE_NAME_LABEL, "lq")
    if "priority" in kw:
        builder = builder.priority(kw["priority"])
    if "group" in kw:
        builder = builder.label(POD_GROUP_LABEL, kw["group"])
    p = builder.obj()
    p.metadata.creation_timestamp = created
    return p


async def setup(
    redis_client: aioredis.Redis, redis_prefix: str, text: str, *extra: Any
) -> Admission:
    store = ClusterStore(redis_client, prefix=redis_prefix)
    await store.apply([*load_manifest_text(text).queue_objects, *extra])
    admission = Admission(redis_client, store, redis_prefix + "q:")
    await admission.load()
    return admission


async def submit(admission: Admission, *pods: Pod) -> dict[str, PodRecord]:
    out = {}
    for p in pods:
        record = PodRecord.from_pod(p)
        gated = await admission.gate(record, "add")
        assert gated.quota_wait == "waiting for quota"
        out[p.metadata.name] = record
    return out


async def usage_in_redis(admission: Admission) -> dict[str, int]:
    raw = await admission.redis.hgetall(admission.usage_key)
    return {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in raw.items() if int(v)}


async def test_nominal_quota_then_reasons_and_positions(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    admission = await setup(redis_client, redis_prefix, queues(("team-a", "", 4, None, 1)))
    admission.metrics = metrics = BerthMetrics()
    await submit(admission, *(pod(f"p{i}", "team-a", created=i) for i in range(6)))
    verdict = await admission.admit()
    assert sorted(p.name for p in verdict.admitted) == ["p0", "p1", "p2", "p3"]
    sample = metrics.registry.get_sample_value
    quota = {"cohort": "", "cluster_queue": "team-a", "flavor": "default", "resource": "cpu"}
    assert sample("kueue_cluster_queue_nominal_quota", quota) == 4.0
    assert sample("kueue_cluster_queue_resource_usage", quota) == 4.0
    assert sample("kueue_admitted_active_workloads", {"cluster_queue": "team-a"}) == 4
    assert sample("kueue_admitted_workloads_total", {"cluster_queue": "team-a"}) == 4
    waiting = {"cluster_queue": "team-a", "status": "inadmissible"}
    assert sample("kueue_pending_workloads", waiting) == 2
    assert sample("kueue_pending_workloads", {**waiting, "status": "active"}) == 0
    # the rest of Kueue's families, by their upstream names
    team_a = {"cluster_queue": "team-a"}
    assert sample("kueue_quota_reserved_workloads_total", team_a) == 4
    assert sample("kueue_admission_wait_time_seconds_count", team_a) == 4
    assert sample("kueue_reserving_active_workloads", team_a) == 4
    assert sample("kueue_cluster_queue_resource_reservation", quota) == 4.0
    assert sample("kueue_cluster_queue_status", {**team_a, "status": "active"}) == 1
    assert sample("kueue_cluster_queue_status", {**team_a, "status": "pending"}) == 0
    assert sample("kueue_admission_attempts_total", {"result": "success"}) == 1
    assert sample("kueue_admission_attempt_duration_seconds_count", {"result": "success"}) == 1
    # and per LocalQueue (its name and namespace)
    lq = {"name": "lq", "namespace": "team-a"}
    assert local_queue_samples(metrics, lq) == {
        "kueue_local_queue_admitted_workloads_total": 4,
        "kueue_local_queue_quota_reserved_workloads_total": 4,
        "kueue_local_queue_admitted_active_workloads": 4,
        "kueue_local_queue_reserving_active_workloads": 4,
        "kueue_local_queue_admission_wait_time_seconds_count": 4,
        "kueue_local_queue_quota_reserved_wait_time_seconds_count": 4,
        "kueue_local_queue_pending_workloads:active": 0,
        "kueue_local_queue_pending_workloads:inadmissible": 2,
        "kueue_local_queue_status:True": 1,
        "kueue_local_queue_status:False": 0,
    }
    assert all(p.quota_wait == "" for p in verdict.admitted)
    assert {k: m for k, (_, m) in verdict.waiting.items()} == {
        "team-a/p4": "Waiting for quota in ClusterQueue team-a (position 1 of 2): "
        "insufficient unused quota for cpu in flavor default, 1 more needed",
        "team-a/p5": "Waiting for quota in ClusterQueue team-a (position 2 of 2): "
        "insufficient unused quota for cpu in flavor default, 1 more needed",
    }
    assert await usage_in_redis(admission) == {"team-a|default|cpu": 4000}
    # A pod deleted gives its quota back: the next in line is admitted.
    await admission.gate(verdict.admitted[0], "delete")
    again = await admission.admit()
    assert [p.name for p in again.admitted] == ["p4"]
    assert await usage_in_redis(admission) == {"team-a|default|cpu": 4000}
    after = local_queue_samples(metrics, lq)
    assert after["kueue_local_queue_admitted_workloads_total"] == 5
    assert after["kueue_local_queue_admitted_active_workloads"] == 4
    assert after["kueue_local_queue_pending_workloads:inadmissible"] == 1
    # A deleted LocalQueue's gauges go (its ClusterQueue stays).
    await admission.store.delete("LocalQueue", "team-a", "lq")
    await admission.load()
    await admission.admit()
    assert sample("kueue_local_queue_admitted_active_workloads", lq) is None
    assert sample("kueue_local_queue_status", {**lq, "active": "True"}) is None


def local_queue_samples(metrics: BerthMetrics, lq: dict[str, str]) -> dict[str, float | None]:
    """The kueue_local_queue_* values of one LocalQueue (`family:label` for status-like ones)."""
    sample = metrics.registry.get_sample_value
    out: dict[str, float | None] = {}
    for name in (
        "admitted_workloads_total",
        "quota_reserved_workloads_total",
        "admitted_active_workloads",
        "reserving_active_workloads",
        "admission_wait_time_seconds_count",
        "quota_reserved_wait_time_seconds_count",
    ):
        out[f"kueue_local_queue_{name}"] = sample(f"kueue_local_queue_{name}", lq)
    for status in ("active", "inadmissible"):
        labels = {**lq, "status": status}
        out[f"kueue_local_queue_pending_workloads:{status}"] = sample(
            "kueue_local_queue_pending_workloads", labels
        )
    for active in ("True", "False"):
        out[f"kueue_local_queue_status:{active}"] = sample(
            "kueue_local_queue_status", {**lq, "active": active}
        )
    return out


async def test_priority_goes_first_and_best_effort_fifo_lets_smaller_ones_pass(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    admission = await setup(redis_client, redis_prefix, queues(("team-a", "", 4, None, 1)))
    await submit(
        admission,
        pod("big-old", "team-a", "3", created=1),
        pod("vip", "team-a", "2", created=2, priority=100),
        pod("small", "team-a", "1", created=3),
    )
    verdict = await admission.admit()
    # vip first (priority), then big-old does not fit (2 left) but small does.
    assert [p.name for p in verdict.admitted] == ["vip", "small"]
    assert "team-a/big-old" in verdict.waiting


async def test_borrowing_within_a_cohort_and_its_limit(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    admission = await setup(
        redis_client,
        redis_prefix,
        queues(("team-a", "c", 2, 1, 1), ("team-b", "c", 4, None, 1)),
    )
    await submit(admission, *(pod(f"a{i}", "team-a", created=i) for i in range(5)))
    verdict = await admission.admit()
    assert len(verdict.admitted) == 3  # nominal 2 + borrowingLimit 1
    message = verdict.waiting["team-a/a3"][1]
    assert "position 1 of 2" in message


async def test_drf_orders_the_queues_of_a_cohort(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """Two queues with nothing nominal borrow everything from a third, idle one: admission
    alternates so that their weighted shares stay level, the heavier weight getting about
    twice as much."""
    admission = await setup(
        redis_client,
        redis_prefix,
        queues(("a", "c", 0, None, 1), ("b", "c", 0, None, 2), ("lender", "c", 9, None, 1)),
    )
    await submit(admission, *(pod(f"a{i}", "a", created=i) for i in range(9)))
    await submit(admission, *(pod(f"b{i}", "b", created=i) for i in range(9)))
    verdict = await admission.admit()
    admitted = [p.namespace for p in verdict.admitted]
    assert len(admitted) == 9
    assert admitted.count("b") == 6
    assert admitted.count("a") == 3


async def test_a_gang_is_admitted_as_one_unit(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    group = make_pod_group("g", min_member=3, namespace="team-a")
    admission = await setup(redis_client, redis_prefix, queues(("team-a", "", 4, None, 1)), group)
    await submit(admission, *(pod(f"g{i}", "team-a", group="g") for i in range(2)))
    verdict = await admission.admit()
    assert verdict.admitted == []
    assert "gang waiting for 1 more pod(s)" in verdict.waiting["team-a/g0"][1]
    await submit(admission, pod("g2", "team-a", group="g"))
    verdict = await admission.admit()
    assert sorted(p.name for p in verdict.admitted) == ["g0", "g1", "g2"]


async def test_why_a_pod_cannot_be_admitted(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    text = queues(("team-a", "", 4, None, 1)).replace(
        "namespaceSelector: {}", ("namespaceSelector: {matchLabels: {tier: batch}}")
    )
    admission = await setup(
        redis_client,
        redis_prefix,
        text,
        Namespace(metadata=ObjectMeta(name="team-a", labels={"tier": "web"})),
    )
    lost = pod("lost", "team-a")
    lost.metadata.labels[QUEUE_NAME_LABEL] = "nope"
    await submit(admission, pod("x", "team-a"), lost)
    waiting = {k: m for k, (_, m) in (await admission.admit()).waiting.items()}
    assert waiting == {
        "team-a/x": "namespace team-a is not selected by ClusterQueue team-a",
        "team-a/lost": "LocalQueue nope doesn't exist in namespace team-a",
    }


async def test_usage_in_redis_is_always_the_sum_of_admissions(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """Random submissions and deletions; after each round the usage hash equals the sum of
    the admitted records, no queue exceeds nominal + borrowingLimit, and a new leader
    (a fresh Admission) loads the same numbers."""
    rng = random.Random(7)
    admission = await setup(
        redis_client,
        redis_prefix,
        queues(("a", "c", 3, 2, 1), ("b", "c", 5, None, 3), ("solo", "", 2, None, 1)),
    )
    live: dict[str, PodRecord] = {}
    for step in range(40):
        ns = rng.choice(["a", "b", "solo"])
        p = pod(f"p{step}", ns, rng.choice(["500m", "1", "2"]), created=step)
        live.update({f"{ns}/p{step}": r for r in (await submit(admission, p)).values()})
        if live and rng.random() < 0.3:
            key = rng.choice(sorted(live))
            await admission.gate(live.pop(key), "delete")
        await admission.admit()
        raw = await redis_client.hgetall(admission.admitted_key)
        totals: dict[str, int] = {}
        for value in raw.values():
            for field, amount in msgpack.unpackb(value, raw=False)["charge"].items():
                totals[field] = totals.get(field, 0) + amount
        assert {k: v for k, v in totals.items() if v} == await usage_in_redis(admission)
        usage = await usage_in_redis(admission)
        assert usage.get("a|default|cpu", 0) <= 5000
        assert usage.get("solo|default|cpu", 0) <= 2000
        assert usage.get("a|default|cpu", 0) + usage.get("b|default|cpu", 0) <= 8000
    fresh = Admission(redis_client, admission.store, admission.admitted_key.split("{")[0])
    await fresh.load()
    assert fresh.cohorts["c"].usage == admission.cohorts["c"].usage


async def test_reclaim_within_cohort_evicts_the_newest_borrowers(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """team-a (reclaimWithinCohort: Any) wants its nominal 2 back from team-b, which borrows
    2 on top of its own 2: team-b's two most recently admitted pods are evicted (back to
    waiting, unbound, same uid), never taking team-b below its nominal quota; team-a is then
    admitted."""
    text = queues(("team-a", "c", 2, None, 1), ("team-b", "c", 2, None, 1)).replace(
        "  fairSharing: {weight: 1}\n  resourceGroups:\n  - coveredResources: [cpu]\n"
        "    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 2}]}]\n---\n"
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, "
        "namespace: team-a}",
        "  fairSharing: {weight: 1}\n  preemption: {reclaimWithinCohort: Any}\n"
        "  resourceGroups:\n  - coveredResources: [cpu]\n"
        "    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 2}]}]\n---\n"
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, "
        "namespace: team-a}",
    )
    assert "reclaimWithinCohort: Any" in text
    b_pods = [pod(f"b{i}", "team-b", created=i) for i in range(4)]
    admission = await setup(redis_client, redis_prefix, text, *b_pods)
    admission.metrics = metrics = BerthMetrics()
    records = await submit(admission, *b_pods)
    first = await admission.admit()
    assert sorted(p.name for p in first.admitted) == ["b0", "b1", "b2", "b3"]  # borrows 2

    await submit(admission, pod("a0", "team-a", created=10), pod("a1", "team-a", created=11))
    second = await admission.admit()
    assert second.admitted == []
    assert second.waiting["team-a/a0"][1].endswith("reclaiming quota: evicted 1 pod(s) of team-b")
    assert admission.evicting == {"team-a/a0": {"team-b/b3"}}  # the newest borrower
    # Evicting again while it has not left would evict twice: a0 waits instead.
    third = await admission.admit()
    assert "waiting for 1 evicted pod(s) to leave" in third.waiting["team-a/a0"][1]
    assert admission.evicted == 1

    async def informer_brings_the_evictions() -> None:
        """The store put each evicted pod back to waiting: the informer brings its deletion
        (quota released) and its return (waiting again)."""
        stored = {p.key: p for p in await admission.store.list("Pod") if isinstance(p, Pod)}
        for keys in admission.evicting.values():
            for key in keys & admission.admitted.keys():
                assert stored[key].spec.node_name == ""
                assert stored[key].metadata.uid == records[key.split("/")[1]].uid
                await admission.gate(records[key.split("/")[1]], "delete")
                assert (await admission.gate(PodRecord.from_pod(stored[key]), "add")).quota_wait

    await informer_brings_the_evictions()
    fourth = await admission.admit()
    assert [p.name for p in fourth.admitted] == ["a0"]
    assert fourth.waiting["team-a/a1"][1].endswith("reclaiming quota: evicted 1 pod(s) of team-b")
    await informer_brings_the_evictions()
    fifth = await admission.admit()
    assert [p.name for p in fifth.admitted] == ["a1"]
    assert "insufficient unused quota" in fifth.waiting["team-b/b2"][1]
    assert admission.evicted == 2  # never below team-b's own nominal 2
    assert await usage_in_redis(admission) == {
        "team-a|default|cpu": 2000,
        "team-b|default|cpu": 2000,
    }
    # Kueue's eviction and preemption counts: the victims' queue, the preemptor's, the reason.
    assert eviction_samples(metrics) == {
        ("kueue_evicted_workloads_total", "team-b", "Preempted"): 2,
        ("kueue_local_queue_evicted_workloads_total", "team-b/lq", "Preempted"): 2,
        ("kueue_preempted_workloads_total", "team-a", "InCohortReclamation"): 2,
    }


def eviction_samples(metrics: BerthMetrics) -> dict[tuple[str, str, str], float]:
    """(family, queue, reason) -> value of every non-zero eviction and preemption count."""
    out: dict[tuple[str, str, str], float] = {}
    for family in metrics.registry.collect():
        for s in family.samples:
            if s.value and s.name in (
                "kueue_evicted_workloads_total",
                "kueue_local_queue_evicted_workloads_total",
                "kueue_preempted_workloads_total",
            ):
                labels = s.labels
                queue = (
                    labels.get("cluster_queue")
                    or labels.get("preempting_cluster_queue")
                    or f"{labels['namespace']}/{labels['name']}"
                )
                out[s.name, queue, labels["reason"]] = s.value
    return out


async def test_reclaim_lower_priority_spares_equal_or_higher_priority_pods(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    text = queues(("team-a", "c", 2, None, 1), ("team-b", "c", 2, None, 1)).replace(
        "fairSharing: {weight: 1}",
        "fairSharing: {weight: 1}\n  preemption: {reclaimWithinCohort: LowerPriority}",
        1,
    )
    b_pods = [pod(f"b{i}", "team-b", created=i, priority=100) for i in range(4)]
    admission = await setup(redis_client, redis_prefix, text, *b_pods)
    await submit(admission, *b_pods)
    await admission.admit()
    await submit(admission, pod("a0", "team-a", priority=100))
    verdict = await admission.admit()
    assert admission.evicted == 0
    assert "insufficient unused quota" in verdict.waiting["team-a/a0"][1]


async def test_an_unreadable_pod_waits_with_its_reason_and_blocks_nobody(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    admission = await setup(redis_client, redis_prefix, queues(("team-a", "", 4, None, 1)))
    good = PodRecord.from_pod(pod("good", "team-a"))
    bad = replace(PodRecord.from_pod(pod("bad", "team-a")), body=b"\x93not a pod")
    for record in (bad, good):
        await admission.gate(record, "add")
    verdict = await admission.admit()
    assert [p.name for p in verdict.admitted] == ["good"]
    assert verdict.waiting["team-a/bad"][1].startswith("cannot read the pod: ")


async def test_a_new_leader_takes_the_waiting_pods_from_the_store(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """The informer resumes after the events that gated them, so a new leader's admission
    must find the waiting pods in the store."""
    pods = [pod(f"p{i}", "team-a", created=i) for i in range(3)]
    other = make_pod("other").namespace("team-a").scheduler_name("volcano")
    foreign = other.label(QUEUE_NAME_LABEL, "lq").req(cpu="1").obj()
    first = await setup(
        redis_client, redis_prefix, queues(("team-a", "", 2, None, 1)), *pods, foreign
    )
    records = await submit(first, *pods)
    assert [p.name for p in (await first.admit()).admitted] == ["p0", "p1"]
    second = Admission(redis_client, first.store, redis_prefix + "q:")
    await second.gate(records["p0"], "delete")  # loads, then frees one core
    assert sorted(second.pending) == ["team-a/p2"]  # not the other scheduler's pod
    assert [p.name for p in (await second.admit()).admitted] == ["p2"]


async def test_the_deletion_of_an_older_life_releases_nothing(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    admission = await setup(redis_client, redis_prefix, queues(("team-a", "", 4, None, 1)))
    old = (await submit(admission, pod("p", "team-a")))["p"]
    assert [p.name for p in (await admission.admit()).admitted] == ["p"]
    # The same name again, another uid (the old pod was deleted and created anew, and the
    # old life's deletion arrives late): the new life's charge stays.
    await admission.gate(replace(old, uid="an-older-life"), "delete")
    assert await usage_in_redis(admission) == {"team-a|default|cpu": 1000}
    assert admission.is_admitted(old)


async def evictions_arrive(admission: Admission, records: dict[str, PodRecord]) -> None:
    """What the informer brings after evictions: each evicted pod's deletion (its quota is
    released) and its return, unbound with the same uid (waiting again)."""
    stored = {p.key: p for p in await admission.store.list("Pod") if isinstance(p, Pod)}
    for keys in admission.evicting.values():
        for key in keys & admission.admitted.keys():
            name = key.split("/")[1]
            assert stored[key].spec.node_name == ""
            assert stored[key].metadata.uid == records[name].uid
            await admission.gate(records[name], "delete")
            assert (await admission.gate(PodRecord.from_pod(stored[key]), "add")).quota_wait


async def test_within_cluster_queue_a_higher_priority_pod_evicts_the_newest_lower_one(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """withinClusterQueue: LowerPriority in a queue of its own (no cohort): the high-priority
    pod evicts the most recently admitted low-priority pod, waits for it to leave, is
    admitted; the evicted pod waits for quota. Equal priority is never evicted."""
    text = queues(("solo", "", 2, None, 1)).replace(
        "fairSharing: {weight: 1}",
        "fairSharing: {weight: 1}\n  preemption: {withinClusterQueue: LowerPriority}",
    )
    low = [pod(f"low{i}", "solo", created=i, priority=0) for i in range(2)]
    high = pod("high", "solo", created=10, priority=100)
    same = pod("same", "solo", created=11, priority=0)
    admission = await setup(redis_client, redis_prefix, text, *low)
    admission.metrics = metrics = BerthMetrics()
    records = await submit(admission, *low)
    assert sorted(p.name for p in (await admission.admit()).admitted) == ["low0", "low1"]
    await admission.store.apply([same, high])
    records |= await submit(admission, same)
    verdict = await admission.admit()
    assert admission.evicted == 0  # equal priority: LowerPriority evicts nobody
    assert "insufficient unused quota" in verdict.waiting["solo/same"][1]

    records |= await submit(admission, high)
    verdict = await admission.admit()
    assert verdict.waiting["solo/high"][1].endswith("preempting: evicted 1 pod(s) of solo")
    assert admission.evicting == {"solo/high": {"solo/low1"}}
    await evictions_arrive(admission, records)
    verdict = await admission.admit()
    assert [p.name for p in verdict.admitted] == ["high"]
    assert "insufficient unused quota" in verdict.waiting["solo/low1"][1]
    assert admission.evicted == 1
    assert await usage_in_redis(admission) == {"solo|default|cpu": 2000}
    assert eviction_samples(metrics) == {
        ("kueue_evicted_workloads_total", "solo", "Preempted"): 1,
        ("kueue_local_queue_evicted_workloads_total", "solo/lq", "Preempted"): 1,
        ("kueue_preempted_workloads_total", "solo", "InClusterQueue"): 1,
    }


async def test_reclaim_spares_pods_a_disruption_budget_protects(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """team-b borrows 2 with four running pods; b1, b2 and b3 (the newest) are under a
    budget with minAvailable 3. Reclaim evicts b0, the one pod it may, although the others
    are newer; then the budget blocks any further reclaim, and the waiting pod says so."""
    text = queues(("team-a", "c", 2, None, 1), ("team-b", "c", 2, None, 1)).replace(
        "fairSharing: {weight: 1}",
        "fairSharing: {weight: 1}\n  preemption: {reclaimWithinCohort: Any}",
        1,
    )
    b_pods = []
    for i in range(4):
        p = pod(f"b{i}", "team-b", created=i)
        p.spec.node_name = "n1"
        if i > 0:
            p.metadata.labels["app"] = "keep"
        b_pods.append(p)
    budget = make_pdb("keep", label_selector({"app": "keep"}), namespace="team-b", min_available=3)
    admission = await setup(redis_client, redis_prefix, text, *b_pods, budget)
    records = {}
    for p in b_pods:  # running pods: charged as the informer sees them bound
        records[p.metadata.name] = PodRecord.from_pod(p)
        await admission.gate(records[p.metadata.name], "add")
    assert await usage_in_redis(admission) == {"team-b|default|cpu": 4000}

    a_pods = [pod("a0", "team-a", created=10), pod("a1", "team-a", created=11)]
    await admission.store.apply(a_pods)
    records |= await submit(admission, a_pods[0])
    verdict = await admission.admit()
    assert verdict.waiting["team-a/a0"][1].endswith("reclaiming quota: evicted 1 pod(s) of team-b")
    assert admission.evicting == {"team-a/a0": {"team-b/b0"}}

    # team-b still borrows 1, but only in pods the budget protects: a1 waits, saying why.
    await evictions_arrive(admission, records)
    assert [p.name for p in (await admission.admit()).admitted] == ["a0"]
    records |= await submit(admission, a_pods[1])
    verdict = await admission.admit()
    assert admission.evicting.get("team-a/a1") in (None, set())
    why = verdict.waiting["team-a/a1"][1]
    assert "insufficient unused quota for cpu in flavor default, 1 more needed; " in why
    assert "preemption blocked: team-b/b3" in why
    assert "disruption budget" in why


async def test_a_pod_that_ends_while_it_is_evicted_stays_gone(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """Eviction puts a pod back to waiting with a delete and an apply; a pod that ran to
    completion (deleted by its node) between the eviction's read and its delete is not put
    back: it came back to life under its old uid, was admitted and bound again, and held its
    quota with no one left to end it (seen on Kueue's baseline: a workload the harness had
    finished, bound again)."""
    from services.queue.quota.effects import requeue

    class EndsAsItIsRead(ClusterStore):
        async def get_pod(self, namespace: str, name: str) -> Pod | None:
            found = await super().get_pod(namespace, name)
            await super().delete("Pod", namespace, name)  # its node ends it meanwhile
            return found

    store = EndsAsItIsRead(redis_client, prefix=redis_prefix)
    running = make_pod("done").namespace("team-a").node("n1").obj()
    [applied] = await store.apply([running])
    await requeue(store, "team-a/done", applied.uid)
    assert await ClusterStore(redis_client, prefix=redis_prefix).get_pod("team-a", "done") is None

    # Without the race, eviction is a delete and a return to waiting, same uid, unbound.
    plain = ClusterStore(redis_client, prefix=redis_prefix)
    [again] = await plain.apply([make_pod("evicted").namespace("team-a").node("n1").obj()])
    await requeue(plain, "team-a/evicted", again.uid)
    back = await plain.get_pod("team-a", "evicted")
    assert back is not None
    assert back.metadata.uid == again.uid
    assert not back.spec.node_name
