"""Quota admission looks at heads only and parks what does not fit (services/queue/quota/heads.py,
backlog.py): it must stay exact. Randomized streams of events (pods arriving, admitted pods
finishing, waiting pods deleted, quotas changed) on a real Redis; after every round, no waiting
workload of a BestEffortFIFO queue fits, and a StrictFIFO queue's head does not fit. Also: a
round after one release looks at a few heads, not the backlog; reasons are written on their
period."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from services.queue.quota import rounds as rounds_module
from services.queue.quota.admission import REASONS_BUDGET, Admission
from services.queue.quota.admission_fair import LocalQueueUsage
from services.queue.quota.assign import assign_pods
from services.queue.quota.backlog import sort_key
from services.queue.quota.flavor_assign import FIT
from services.queue.quota.ready import Readiness
from services.queue.records import PodRecord
from shared.models import load_manifest_text
from tests.builders import make_pod_group
from tests.queue.test_admission import pod, setup, submit, usage_in_redis


def _local_queue(queue: str, namespace: str) -> str:
    """A LocalQueue "lq" in `namespace` for the ClusterQueue `queue`."""
    return (
        f"apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
        f"metadata: {{name: lq, namespace: {namespace}}}\nspec: {{clusterQueue: {queue}}}"
    )


def _queues(quotas: dict[str, tuple[str, int, int | None, str]]) -> str:
    """name -> (cohort, nominal cpu, borrowingLimit, queueingStrategy)."""
    docs = ["apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: default}"]
    for name, (cohort, nominal, borrowing, strategy) in quotas.items():
        limit = "" if borrowing is None else f", borrowingLimit: {borrowing}"
        if name.startswith("f"):  # admission fair sharing, and a second LocalQueue
            strategy += "\n  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}"
            docs.append(_local_queue(name, f"{name}-b"))
        docs.append(
            f"""apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  cohort: "{cohort}"
  queueingStrategy: {strategy}
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: {nominal}{limit}}}]}}]"""
        )
        docs.append(_local_queue(name, name))
    return "\n---\n".join(docs)


def _check_nothing_that_fits_waits(admission: Admission) -> int:
    """The invariant; returns how many workloads wait."""
    backlog = admission.backlog
    waiting = 0
    for name, cq in admission.queues.items():
        heads = backlog.queues.get(name)
        if heads is None:
            continue
        cohort = admission.cohorts[admission.cohort_of[name]]
        keys = sorted(
            (k for k in heads if k in backlog.workloads),
            key=lambda k: sort_key(admission, name)(backlog.workloads[k]),
        )
        waiting += len(keys)
        if cq.spec.queueing_strategy == "StrictFIFO":
            keys = keys[:1]  # only the head may not be skipped
        for key in keys:
            wl = backlog.workloads[key]
            group = key.removeprefix("podgroup:")
            members = sum(1 for r in admission.admitted.values() if r.get("group") == group)
            if key.startswith("podgroup:") and wl.min_member - members - len(wl.pods) > 0:
                continue  # a gang still waiting for its pods
            assignment, _ = assign_pods(
                cohort, cq, admission.flavors, wl.requests, wl.placements, fair_sharing=False
            )
            assert assignment.mode != FIT, f"{key} fits {name} but waits"
    # every pending pod is in exactly one workload or has a reason for having none
    for key in admission.pending:
        assert (key in backlog.of_pod) != (key in backlog.unqueued), key
    return waiting


QUOTAS: dict[str, tuple[str, int, int | None, str]] = {
    "a1": ("one", 4, 4, "BestEffortFIFO"),
    "a2": ("one", 3, None, "BestEffortFIFO"),
    "a3": ("one", 2, 0, "StrictFIFO"),
    "b1": ("two", 5, 2, "BestEffortFIFO"),
    "b2": ("two", 2, None, "StrictFIFO"),
    "c1": ("", 3, None, "BestEffortFIFO"),
    "f1": ("two", 3, 2, "BestEffortFIFO"),
}
NAMESPACES = [*QUOTAS, "f1-b"]
"""Where pods are made: each queue's namespace, and f1's second LocalQueue's."""


@pytest.mark.parametrize("seed", range(8))
async def test_no_workload_that_fits_is_left_waiting(
    redis_client: aioredis.Redis, redis_prefix: str, seed: int
) -> None:
    rng = random.Random(seed)
    quotas = dict(QUOTAS)
    admission = await setup(redis_client, redis_prefix, _queues(quotas))
    admission.reasons_every = rng.choice([0.0, 3600.0])
    admission.lq_usage = LocalQueueUsage(half_life_s=60.0, sampling_s=5.0)
    live: dict[str, PodRecord] = {}
    """Every pod not deleted, by key."""
    gangs: dict[str, tuple[str, int]] = {}
    """Gangs still to complete: name -> (namespace, pods still to come)."""
    admitted_total = waited_max = gangs_admitted = 0
    for step in range(60):
        for _ in range(rng.randrange(1, 6)):
            event = rng.random()
            if event < 0.12 or gangs:  # a gang starts (its PodGroup), or one of its pods
                if not gangs or rng.random() < 0.2:
                    name, ns, size = f"gang{step}", rng.choice(list(quotas)), rng.choice([2, 3])
                    group = make_pod_group(name, size, namespace=ns)
                    await admission.store.apply([group])
                    await admission.load()
                    gangs[name] = (ns, size)
                name = rng.choice(sorted(gangs))
                ns, left = gangs[name]
                made = pod(f"{name}-{left}", ns, "1", created=float(step), group=name)
                live.update({r.key: r for r in (await submit(admission, made)).values()})
                gangs[name] = (ns, left - 1)
                if left == 1:
                    del gangs[name]
            elif event < 0.55 or not live:
                i = len(live) + step * 100 + rng.randrange(100)
                made = pod(
                    f"p{step}-{i}",
                    rng.choice(NAMESPACES),
                    rng.choice(["1", "1", "2", "3", "5"]),
                    created=float(step),
                    priority=rng.choice([0, 0, 5, 10]),
                )
                live.update({r.key: r for r in (await submit(admission, made)).values()})
            elif event < 0.85:  # an admitted pod finishes (its deletion releases its quota)
                done = [k for k in live if k in admission.admitted]
                if done:
                    await admission.gate(live.pop(rng.choice(done)), "delete")
            elif event < 0.95:  # a waiting pod is deleted
                gone = [k for k in live if k in admission.pending]
                if gone:
                    await admission.gate(live.pop(rng.choice(gone)), "delete")
            else:  # a quota changes: the objects are applied and loaded again
                name = rng.choice(list(quotas))
                cohort, nominal, borrowing, strategy = quotas[name]
                quotas[name] = (
                    cohort,
                    max(1, nominal + rng.choice([-2, -1, 1, 2])),
                    borrowing,
                    strategy,
                )
                await admission.store.apply(
                    load_manifest_text(_queues({name: quotas[name]})).queue_objects
                )
                await admission.load()
        verdict = await admission.admit()
        admitted_total += len(verdict.admitted)
        gangs_admitted += sum(1 for p in verdict.admitted if "gang" in p.name)
        waited_max = max(waited_max, _check_nothing_that_fits_waits(admission))
    assert any(r.get("group") for r in admission.admitted.values()) or gangs_admitted
    assert admitted_total > 30
    assert waited_max > 10


async def test_a_round_after_one_release_looks_at_a_few_heads(
    redis_client: aioredis.Redis, redis_prefix: str, monkeypatch: Any
) -> None:
    admission = await setup(redis_client, redis_prefix, _queues(QUOTAS))
    admission.reasons_every = 3600.0
    pods = [
        pod(f"p{i}", name, size, created=float(i))
        for i in range(300)
        for name, size in [(("a1", "a2", "b1")[i % 3], ("1", "2", "3")[i % 3 // 1])]
    ]
    records = await submit(admission, *pods)
    first = await admission.admit()
    assert first.admitted
    assert len(admission.pending) > 250
    looked = 0
    waiting_reason = Readiness.waiting_reason

    def counted(self: Readiness, wl: Any, now: float) -> str:
        nonlocal looked
        looked += 1  # once per head a round looks at
        return waiting_reason(self, wl, now)

    monkeypatch.setattr(Readiness, "waiting_reason", counted)
    done = first.admitted[0]
    await admission.gate(records[done.name], "delete")
    verdict = await admission.admit()
    assert [p.name for p in verdict.admitted]  # the freed core went to the next one
    # the first of each shape parked in the cohort's queues, and the next after an
    # admission: a few heads, not the backlog
    assert looked <= 8, looked
    assert not verdict.waiting  # reasons are not due: the round wrote none
    admission.reasons_every = 0.0
    full = await admission.admit()
    assert len(full.waiting) == len(admission.pending)
    _check_nothing_that_fits_waits(admission)


async def test_a_reload_during_an_admission_does_not_bring_the_admitted_back(
    redis_client: aioredis.Redis, redis_prefix: str, monkeypatch: Any
) -> None:
    """gate() (and so load(), which rebuilds the backlog from the pending pods) runs between
    a round's awaits: a workload admitted across a reload must not wait again (it would be
    admitted and charged twice)."""
    admission = await setup(redis_client, redis_prefix, _queues({"c1": QUOTAS["c1"]}))
    await submit(admission, pod("p0", "c1", "1", created=0.0), pod("p1", "c1", "1", created=1.0))
    commit = admission._commit
    reloaded = 0

    async def reload_then_commit(*args: Any, **kwargs: Any) -> Any:
        nonlocal reloaded
        if not reloaded:
            reloaded += 1
            await admission.load()  # an informer batch with a quota object, mid-write
        return await commit(*args, **kwargs)

    monkeypatch.setattr(admission, "_commit", reload_then_commit)
    first = await admission.admit()
    assert reloaded == 1
    assert sorted(p.name for p in first.admitted) == ["p0", "p1"]
    assert not admission.backlog.workloads
    assert not (await admission.admit()).admitted
    assert await usage_in_redis(admission) == {"c1|default|cpu": 2000}


async def test_a_gang_pod_that_comes_during_its_gangs_admission_waits_on_its_own(
    redis_client: aioredis.Redis, redis_prefix: str, monkeypatch: Any
) -> None:
    """Workloads are kept between rounds now: a pod gate() adds to a gang while the gang's
    admission is being written (the round's flush) is not ungated with it uncharged; it is a
    workload of its own (admitted, and charged, by the next round, as it fits)."""
    admission = await setup(
        redis_client,
        redis_prefix,
        _queues({"c1": QUOTAS["c1"]}),
        make_pod_group("g", 2, namespace="c1"),
    )
    await submit(admission, *(pod(f"g{i}", "c1", "1", created=i, group="g") for i in range(2)))
    commit = admission._commit
    late = pod("g2", "c1", "1", created=2.0, group="g")

    came: list[bool] = []

    async def gate_then_commit(*args: Any, **kwargs: Any) -> Any:
        if not came:
            came.append(True)
            await submit(admission, late)  # the informer's batch, mid-write
        return await commit(*args, **kwargs)

    monkeypatch.setattr(admission, "_commit", gate_then_commit)
    first = await admission.admit()
    assert sorted(p.name for p in first.admitted) == ["g0", "g1"]
    assert "c1/g2" not in admission.admitted
    # g2 came as a workload of its own (its gang's admitted members count): admitted by
    # the next round, and charged
    second = await admission.admit()
    assert [p.name for p in second.admitted] == ["g2"]
    assert sorted(admission.admitted) == ["c1/g0", "c1/g1", "c1/g2"]
    assert await usage_in_redis(admission) == {"c1|default|cpu": 3000}
    assert not admission.backlog.workloads
    assert not admission.backlog.of_pod


async def test_a_round_writes_its_admissions_in_one_call_before_they_are_settled(
    redis_client: aioredis.Redis, redis_prefix: str, monkeypatch: Any
) -> None:
    """Admissions are charged at once and written together at the round's end: no await
    per workload while the round's earlier admissions hold their quota with their pods
    still gated."""
    admission = await setup(redis_client, redis_prefix, _queues({"c1": QUOTAS["c1"]}))
    await submit(admission, *(pod(f"p{i}", "c1", "1", created=i) for i in range(3)))
    commit = admission._commit
    calls: list[int] = []

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(int(kwargs["args"][0]))  # the pods it writes
        return await commit(*args, **kwargs)

    monkeypatch.setattr(admission, "_commit", counted)
    verdict = await admission.admit()
    assert sorted(p.name for p in verdict.admitted) == ["p0", "p1", "p2"]
    assert calls == [3]
    assert await usage_in_redis(admission) == {"c1|default|cpu": 3000}
    assert sorted(await redis_client.hkeys(admission.admitted_key)) == [
        b"c1/p0",
        b"c1/p1",
        b"c1/p2",
    ]


def _fails_once(call: Any) -> Any:
    """`call`, whose first call fails as a lost connection would."""
    failures = [ConnectionError("Redis went away")]

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return await call(*args, **kwargs)

    return flaky


async def test_admissions_redis_did_not_take_are_written_and_settled_by_the_next_round(
    redis_client: aioredis.Redis, redis_prefix: str, monkeypatch: Any
) -> None:
    admission = await setup(redis_client, redis_prefix, _queues({"c1": QUOTAS["c1"]}))
    await submit(admission, *(pod(f"p{i}", "c1", "1", created=i) for i in range(2)))
    monkeypatch.setattr(admission, "_commit", _fails_once(admission._commit))
    with pytest.raises(ConnectionError):
        await admission.admit_pods()
    assert admission.dirty
    assert await usage_in_redis(admission) == {}
    verdict = await admission.admit_pods()
    assert sorted(p.name for p in verdict.admitted) == ["p0", "p1"]
    assert await usage_in_redis(admission) == {"c1|default|cpu": 2000}
    assert not (await admission.admit_pods()).admitted


async def test_a_flush_during_a_flush_writes_nothing_twice(
    redis_client: aioredis.Redis, redis_prefix: str, monkeypatch: Any
) -> None:
    """gate() releases and charges outside the round's lock, and each flushes first: while
    the round's own flush is on its way, theirs must not send the same admissions again
    (usage is counted up in Redis)."""
    admission = await setup(redis_client, redis_prefix, _queues({"c1": QUOTAS["c1"]}))
    await submit(admission, *(pod(f"p{i}", "c1", "1", created=i) for i in range(2)))
    commit = admission._commit
    calls: list[int] = []

    async def meanwhile(*args: Any, **kwargs: Any) -> Any:
        calls.append(int(kwargs["args"][0]))
        if len(calls) == 1:
            await admission.flush()  # another task's, during this one's call
        return await commit(*args, **kwargs)

    monkeypatch.setattr(admission, "_commit", meanwhile)
    verdict = await admission.admit()
    assert sorted(p.name for p in verdict.admitted) == ["p0", "p1"]
    assert calls == [2]
    assert await usage_in_redis(admission) == {"c1|default|cpu": 2000}


async def test_the_releases_of_a_batch_are_written_in_one_call(
    redis_client: aioredis.Redis, redis_prefix: str, monkeypatch: Any
) -> None:
    """Pods that finish give their quota back at once (the next round may use it) and in
    Redis with the informer's batch, one script call for all of them: one await per pod
    kept the informer, and the quota, behind when hundreds finish per second."""
    admission = await setup(redis_client, redis_prefix, _queues({"c1": QUOTAS["c1"]}))
    admitted = await submit(admission, *(pod(f"p{i}", "c1", "1", created=i) for i in range(3)))
    await admission.admit()
    release = admission._release
    calls: list[list[Any]] = []

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(list(kwargs["args"]))
        return await release(*args, **kwargs)

    monkeypatch.setattr(admission, "_release", counted)
    for record in admitted.values():
        await admission.gate(record, "delete")
    assert not admission.admitted  # free for the next round already
    assert calls == []
    await admission.flush()  # the informer's batch ends
    assert [len(args) // 2 for args in calls] == [3]
    assert await usage_in_redis(admission) == {}
    assert await redis_client.hlen(admission.admitted_key) == 0


async def test_a_name_released_and_admitted_again_in_one_flush_keeps_the_new_charge(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """Releases and admissions are written in the order they were made: the old life's
    release must not come after the new life's admission (it would find the new record,
    another uid, and leave the old charge in Redis for good)."""
    admission = await setup(redis_client, redis_prefix, _queues({"c1": QUOTAS["c1"]}))
    (old,) = (await submit(admission, pod("p", "c1", "1"))).values()
    await admission.admit()
    await admission.gate(old, "delete")  # not flushed: the round's flush writes it
    again = pod("p", "c1", "2")
    again.metadata.uid = old.uid + "-again"
    await submit(admission, again)
    verdict = await admission.admit()
    assert [p.uid for p in verdict.admitted] == [again.metadata.uid]
    assert await usage_in_redis(admission) == {"c1|default|cpu": 2000}
    record = await redis_client.hget(admission.admitted_key, "c1/p")
    assert record is not None
    assert again.metadata.uid.encode() in record


async def test_releases_redis_did_not_take_are_written_by_the_next_flush(
    redis_client: aioredis.Redis, redis_prefix: str, monkeypatch: Any
) -> None:
    admission = await setup(redis_client, redis_prefix, _queues({"c1": QUOTAS["c1"]}))
    admitted = await submit(admission, *(pod(f"p{i}", "c1", "1", created=i) for i in range(2)))
    await admission.admit()
    monkeypatch.setattr(admission, "_release", _fails_once(admission._release))
    for record in admitted.values():
        await admission.gate(record, "delete")
    with pytest.raises(ConnectionError):
        await admission.flush()
    assert await usage_in_redis(admission) == {"c1|default|cpu": 2000}
    await admission.flush()
    assert await usage_in_redis(admission) == {}


async def test_reasons_that_cost_much_are_written_less_often(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """Working out and writing the waiting pods' reasons takes at most REASONS_BUDGET of the
    time: a pass of 0.1 s waits 0.1 / REASONS_BUDGET before the next, a cheap one the
    configured interval."""
    admission = await setup(redis_client, redis_prefix, _queues({"c1": QUOTAS["c1"]}))
    admission.reasons_every = 0.5
    await submit(admission, *(pod(f"p{i}", "c1", "1", created=i) for i in range(30)))
    verdict = await admission.admit_pods()
    assert await admission.explain(verdict) > 0  # the first pass is due
    admission.reasons_took(0.1)
    assert await admission.explain(verdict) == 0.0  # not due yet: stale
    due = admission.reasons_due()
    assert due is not None
    assert due - time.monotonic() == pytest.approx(0.1 / REASONS_BUDGET, abs=0.2)
    admission.reasons_took(0.001)
    due = admission.reasons_due()
    assert due is not None
    assert due - time.monotonic() == pytest.approx(0.5, abs=0.2)


def _two_flavor_queues(rng: random.Random) -> str:
    """Four queues of one cohort over flavors "one" then "two" (random quotas, borrowing
    limits and flavorFungibility), and one queue alone."""
    docs = [
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: one}",
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: two}",
    ]
    for name in ["m1", "m2", "m3", "m4", "m5"]:
        flavors = []
        for flavor in ["one", "two"]:
            limit = rng.choice(["", ", borrowingLimit: 0", ", borrowingLimit: 2"])
            limit = "" if name == "m5" else limit  # no cohort, nothing to borrow
            quota = rng.randrange(0, 9)
            flavors.append(
                f"{{name: {flavor}, resources: [{{name: cpu, nominalQuota: {quota}{limit}}}]}}"
            )
        borrow = rng.choice(["Borrow", "TryNextFlavor"])
        preempt = rng.choice(["Preempt", "TryNextFlavor"])
        docs.append(
            f"""apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  cohort: "{"" if name == "m5" else "many"}"
  namespaceSelector: {{}}
  flavorFungibility: {{whenCanBorrow: {borrow}, whenCanPreempt: {preempt}}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{", ".join(flavors)}]"""
        )
        docs.append(_local_queue(name, name))
    return "\n---\n".join(docs)


async def _admissions_of_a_random_run(
    redis_client: aioredis.Redis, prefix: str, seed: int
) -> list[list[tuple[str, ...]]]:
    """Each round's admissions (pod, flavor) in order, for a run of random arrivals and
    completions on `_two_flavor_queues`."""
    rng = random.Random(seed)
    admission = await setup(redis_client, prefix, _two_flavor_queues(rng))
    live: dict[str, PodRecord] = {}
    rounds = []
    for step in range(30):
        for i in range(rng.randrange(1, 10)):
            made = pod(
                f"p{step}-{i}",
                rng.choice(["m1", "m2", "m3", "m4", "m5"]),
                rng.choice(["1", "1", "2", "3"]),
                created=float(step * 10 + i),
                priority=rng.choice([0, 5]),
            )
            live.update({r.key: r for r in (await submit(admission, made)).values()})
        for _ in range(rng.randrange(2, 9)):
            done = sorted(k for k in live if k in admission.admitted)
            if done:
                await admission.gate(live.pop(rng.choice(done)), "delete")
        verdict = await admission.admit_pods()
        rounds.append([(p.key, *admission.admitted[p.key]["charge"]) for p in verdict.admitted])
    return rounds


@pytest.mark.parametrize("seed", range(6))
async def test_kept_candidates_admit_what_working_each_out_again_admits(
    redis_client: aioredis.Redis, redis_prefix: str, monkeypatch: Any, seed: int
) -> None:
    """A round keeps each queue's candidate across admissions while it still fits in the
    same flavors (`_Round.still`): the same workloads, in the same order, in the same flavors
    as a round that works every candidate out again after each admission."""
    kept = await _admissions_of_a_random_run(redis_client, redis_prefix + "kept:", seed)
    monkeypatch.setattr(rounds_module._Round, "still", lambda *_: False)
    again = await _admissions_of_a_random_run(redis_client, redis_prefix + "again:", seed)
    assert kept == again
    assert sum(len(r) for r in kept) > 20


async def test_a_round_works_out_a_few_assignments_per_admission(
    redis_client: aioredis.Redis, redis_prefix: str, monkeypatch: Any
) -> None:
    """With six queues in a cohort, admitting 30 workloads works out about one assignment per
    admission, not six."""
    quotas: dict[str, tuple[str, int, int | None, str]] = {
        f"q{i}": ("six", 10, None, "BestEffortFIFO") for i in range(6)
    }
    admission = await setup(redis_client, redis_prefix, _queues(quotas))
    await submit(admission, *(pod(f"p{i}", f"q{i % 6}", "1", created=i) for i in range(30)))
    calls = 0

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return assign_pods(*args, **kwargs)

    monkeypatch.setattr(rounds_module, "assign_pods", counted)
    verdict = await admission.admit_pods()
    assert len(verdict.admitted) == 30
    assert calls <= 30 + 6


RECLAIM = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: owner}
spec:
  cohort: c
  namespaceSelector: {}
  preemption: {reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: borrower}
spec:
  cohort: c
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 0}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: owner}
spec: {clusterQueue: owner}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: borrower}
spec: {clusterQueue: borrower}"""


async def test_quota_its_first_victims_free_is_held_for_the_preemptor(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """A queue reclaims its nominal quota from a borrower: the quota its first victims free
    is not given to the borrower's other workloads while the last victims are leaving
    (Kueue holds it for the preemptor: resourcesToReserve); once all have left, the
    preemptor is admitted."""
    admission = await setup(redis_client, redis_prefix, RECLAIM)
    borrowed = await submit(admission, *(pod(f"b{i}", "borrower", created=i) for i in range(4)))
    assert len((await admission.admit()).admitted) == 4
    await submit(admission, pod("big", "owner", "4", created=10))
    assert not (await admission.admit()).admitted
    assert admission.evicted == 4
    victims = list(borrowed.values())
    for victim in victims[:2]:  # two of them have left
        await admission.gate(victim, "delete")
    await submit(admission, *(pod(f"late{i}", "borrower", created=20 + i) for i in range(2)))
    assert (await admission.admit()).admitted == []
    for victim in victims[2:]:
        await admission.gate(victim, "delete")
    assert [p.name for p in (await admission.admit()).admitted] == ["big"]
    assert await usage_in_redis(admission) == {"owner|default|cpu": 4000}
