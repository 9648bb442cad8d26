"""`berth bench --mode kueue`: Kueue's scheduler performance harness, run on the whole stack.

    berth bench --mode kueue --generator FILE [--rangespec FILE] [--time-scale K]
                [--runtime-from admission|start] [--timeout S] [--workers N] [--binders M]
                [-o json]

The generator's ResourceFlavor ("rf"), ClusterQueues (one flavor, cpu), namespaces and
LocalQueues are applied to a fresh stack (queue, workers, binders as processes on Redis and
the broker), with nodes sized so that quota, not nodes, decides (twice the total nominal quota,
each node big enough for the largest request). Each workload is one pod with the config's cpu
request, priority and class, created on the config's schedule; the harness watches admissions
(the queue's admitted records). A workload finishes as Kueue's runner finishes it
(test/performance/scheduler/runner/controller): `runtimeMs` after its admission, re-admitted
after an eviction from the new admission; the harness completes its pod then, as the node
agent's `pod-complete` stage does (Succeeded, recorded, gone from the store: its quota goes
back), but never before the pod is bound (`finish_due`). `--runtime-from start` is the
stricter measure: each pod carries KWOK's `pod-complete` stage delay of its `runtimeMs`, and
the node agent (services/agent) ends it that long after it is bound, so the quota is held
for the pipeline's admission -> start as well. A workload's finish time is then read from
the agent's completion record (`lifecycle:finished`); from admission, the harness records it
as it ends the workload.

`--time-scale K` runs the config K times faster (every interval and runtime divided by K); the
figures are reported in the config's time (measured x K), so the rangespec applies as it is
(the scheduler's own latencies are multiplied by K too: a compressed run is pessimistic).
The summary is Kueue's (cli/bench/kueue_summary.py) plus `lowerBoundWallMs` (what the quotas
and runtimes allow, cli/bench/kueue_config.py) and the stack's CPU; with `--rangespec` the
checker's failures, and exit code 1 when there are any.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import Mapping
from typing import Any

from cli.bench.distributed import cpu_seconds, redis_command_usec, redis_us_per_pod
from cli.bench.kueue_config import Plan, PlannedWorkload, lower_bound_ms
from cli.bench.kueue_summary import summarize
from cli.bench.kueue_tracker import Tracker, uid_of
from cli.run import Pipeline, pipeline
from cli.servers import DevServers
from services.queue.client import QueueClient
from shared.lifecycle import actions
from shared.lifecycle.kwok import COMPLETE, delay_annotation
from shared.lifecycle.state import LifecycleState
from shared.models import (
    Container,
    Manifests,
    Namespace,
    Node,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodSpec,
    ResourceRequirements,
    load_manifest_text,
)
from shared.models.kueue import QUEUE_NAME_LABEL
from shared.runtime.env import ENV_PROFILE_DIR
from shared.store import ClusterStore
from shared.store.objects import read_heartbeats

FLAVOR = "rf"
CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"
"""Kueue's generator labels its objects with their class; so does this one."""
POLL_S = 0.02
"""How often the admitted records and the agent's completions are read."""
ESTIMATES_POLL_S = 0.5
"""How often the waiting pods' reasons are read for their estimates."""
RUNTIME_FROM = ("admission", "start")
"""When a workload's runtime starts: at its admission (Kueue's runner) or at its pod's start."""
FINISH_MIN_SLEEP_S = 0.005
"""The finisher's shortest sleep: workloads due within it finish together (one round trip)."""
UNBOUND_RETRY_S = 0.005
"""A workload due whose pod is not bound yet is looked at again this much later."""
NODE_CPU_MILLI = 64_000


def quota_objects(plan: Plan) -> Manifests:
    """The ResourceFlavor, ClusterQueues, namespaces and LocalQueues of the plan."""
    docs = [
        f"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {{name: {FLAVOR}}}"
    ]
    for q in plan.queues:
        limits = f"nominalQuota: {q.spec.nominal_milli}m"
        if q.spec.borrowing_milli is not None:
            limits += f", borrowingLimit: {q.spec.borrowing_milli}m"
        if q.spec.lending_milli is not None:
            limits += f", lendingLimit: {q.spec.lending_milli}m"
        docs.append(
            f"""apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {q.name}, labels: {{{CLASS_LABEL}: {q.class_name}}}}}
spec:
  cohort: {q.cohort}
  namespaceSelector: {{}}
  preemption:
    reclaimWithinCohort: {q.spec.reclaim_within_cohort}
    withinClusterQueue: {q.spec.within_cluster_queue}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: {FLAVOR}, resources: [{{name: cpu, {limits}}}]}}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: {q.name}, namespace: {q.name}}}
spec: {{clusterQueue: {q.name}}}"""
        )
    manifests = load_manifest_text("\n---\n".join(docs))
    manifests.namespaces = [Namespace(metadata=ObjectMeta(name=q.name)) for q in plan.queues]
    return manifests


def nodes_for(plan: Plan) -> list[Node]:
    """Nodes with twice the plan's total nominal cpu, each fitting the largest request."""
    total = sum(q.spec.nominal_milli for q in plan.queues)
    per_node = max(NODE_CPU_MILLI, 2 * plan.max_request_milli)
    count = max(1, math.ceil(2 * total / per_node))
    capacity = {"cpu": per_node, "memory": 1 << 40, "pods": 5000}
    return [
        Node(
            metadata=ObjectMeta(name=f"kueue-node-{i}", namespace="", uid=f"uid-kueue-node-{i}"),
            spec=NodeSpec(),
            status=NodeStatus(capacity=dict(capacity), allocatable=dict(capacity)),
        )
        for i in range(count)
    ]


def pod_of(w: PlannedWorkload, scale: float = 1.0, *, stage: bool = True) -> Pod:
    """The workload's pod; with `stage`, it runs `runtimeMs / scale` once bound (KWOK's
    pod-complete stage, carried out by the node agent); without, until the harness ends it."""
    runtime = f"{max(1, round(w.runtime_ms / scale))}ms"
    return Pod(
        metadata=ObjectMeta(
            name=w.name,
            namespace=w.queue,
            uid=uid_of(w),
            labels={QUEUE_NAME_LABEL: w.queue, CLASS_LABEL: w.class_name},
            annotations={delay_annotation(COMPLETE): runtime} if stage else {},
            creation_timestamp=time.time(),
        ),
        spec=PodSpec(
            containers=[
                Container(
                    name="main", resources=ResourceRequirements(requests={"cpu": w.cpu_milli})
                )
            ],
            priority=w.priority,
        ),
    )


async def _wait_for_workers(run: Pipeline) -> None:
    target = await run.client.store.resource_version()
    settings = run.client.settings
    while True:
        beats = await read_heartbeats(run.client.redis, settings.store_prefix, settings.cluster)
        if beats and all(b.resource_version >= target for b in beats.values()):
            return
        await asyncio.sleep(0.1)


def _stack_cpu(run: Pipeline) -> dict[str, float]:
    out = {name: cpu_seconds(p.pid) for name, p in run.stack.processes.items()}
    servers = run.running.servers
    if servers is not None:
        for process in servers.processes:
            out[process.name.split(":")[0]] = cpu_seconds(process.popen.pid)
    return out


async def _create(run: Pipeline, tracker: Tracker) -> None:
    """Apply each workload's pod at its time (the ones due together in one batch)."""
    pending = list(tracker.plan.workloads)
    i = 0
    while i < len(pending):
        due_at = tracker.started + pending[i].at_ms / 1000 / tracker.scale
        delay = due_at - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        now = time.time()
        batch = []
        while i < len(pending) and tracker.started + pending[i].at_ms / 1000 / tracker.scale <= now:
            batch.append(pending[i])
            i += 1
        for w in batch:
            tracker.created(w, time.time())
        stage = not tracker.finish_after_admission
        await run.apply(Manifests(pods=[pod_of(w, tracker.scale, stage=stage) for w in batch]))


async def finish_due(
    store: ClusterStore,
    state: LifecycleState,
    tracker: Tracker,
    started_at: Mapping[str, float],
    now: float,
) -> int:
    """End the workloads due now (`Tracker.due_now`), as Kueue's runner marks them Finished:
    each one's pod completes as the agent's pod-complete stage would complete it (Succeeded,
    recorded with `started_at[uid]`, its binding as the observer saw it when that came after
    the admission, then deleted: its quota goes back), the ones due together in three round
    trips (their nodes read; the end records with the deletions; the Events). A pod not bound
    yet is looked at again UNBOUND_RETRY_S later: a workload never ends before its pod
    started. The workloads ended are finished in `tracker` at once (no completion record
    needs reading back). Returns how many pods completed."""
    due = tracker.due_now(now)
    if not due:
        return 0
    nodes = await store.redis.hmget(store.keys.pod_node, [key for key, _ in due])
    ending: list[tuple[Pod, float | None]] = []
    for (key, at), node in zip(due, nodes, strict=True):
        if node is None:
            tracker.due_again(key, at, now + UNBOUND_RETRY_S)
            continue
        w = tracker.planned[key]
        pod = Pod(
            metadata=ObjectMeta(name=w.name, namespace=w.queue, uid=uid_of(w)),
            spec=PodSpec(node_name=node.decode() if isinstance(node, bytes) else node),
        )
        started = started_at.get(uid_of(w))
        # the observer keeps a pod's first binding: one before this admission was of an
        # earlier one (evicted since), and this one's start is not known
        ending.append((pod, started if started is not None and started >= at else None))
    keys = [pod.key for pod, _ in ending]
    tracker.finishing.update(keys)
    try:
        done = await actions.complete_all(store, state, ending, now=now)
    finally:
        tracker.finishing.difference_update(keys)
    for (pod, started), ended in zip(ending, done, strict=True):
        if ended and pod.key in tracker.admitted_at:
            tracker.finish(pod.key, now, started)
    return sum(done)


async def _finishing(run: Pipeline, tracker: Tracker) -> None:
    """`finish_due` whenever a workload falls due (its admission seen by `_drive`)."""
    store = run.client.store
    state = LifecycleState(run.client.redis, store.keys)
    while True:
        await finish_due(store, state, tracker, run.observer.bound_at, time.time())
        wake = tracker.next_due()
        pause = POLL_S if wake is None else min(POLL_S, wake - time.time())
        await asyncio.sleep(max(FINISH_MIN_SLEEP_S, pause))


async def _read_finished(
    run: Pipeline, tracker: Tracker, admitted: Mapping[bytes | str, bytes | str] | None = None
) -> None:
    """The agent's completion records of the workloads running now (their pod's uid); with
    `admitted` (the admitted records just read), of the ones not seen admitted too
    (`Tracker.finish_unseen`): without that, a workload that came and went between two reads
    would never finish for the harness (it waited for it until the timeout)."""
    running = list(tracker.admitted_at)
    keys = running + (tracker.unseen(admitted) if admitted is not None else [])
    if not keys:
        return
    finished_key = LifecycleState(run.client.redis, run.client.store.keys).keys.finished
    records = await run.client.redis.hmget(finished_key, keys)
    for i, (key, raw) in enumerate(zip(keys, records, strict=True)):
        if raw is None:
            continue
        record = json.loads(raw)
        if record.get("uid") != uid_of(tracker.planned[key]):
            continue
        if i < len(running):
            started = record.get("started")
            tracker.finish(key, float(record["time"]), None if started is None else float(started))
        else:
            tracker.finish_unseen(key, float(record["time"]))


async def _drive(run: Pipeline, tracker: Tracker, timeout_s: float) -> bool:
    """Create, watch and finish until every workload is finished (True) or the timeout."""
    queue = QueueClient(run.client.redis, run.client.settings.queue_prefix)
    creator = asyncio.create_task(_create(run, tracker), name="kueue-create")
    tasks = [creator]
    if tracker.finish_after_admission:
        tasks.append(asyncio.create_task(_finishing(run, tracker), name="kueue-finish"))
    deadline = time.time() + timeout_s
    total = len(tracker.plan.workloads)
    next_estimates = 0.0
    try:
        while tracker.finished < total and time.time() < deadline:
            for task in tasks:
                if task.done() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            now = time.time()
            admitted, usage = await queue.admission_records()
            # Finished first (the agent records a completion before the pod leaves the
            # store): a workload gone from admission without one was evicted. The workloads
            # the harness ends itself are finished as it ends them (`finish_due`).
            slow_poll = now >= next_estimates
            if not tracker.finish_after_admission:
                await _read_finished(run, tracker, admitted if slow_poll else None)
            tracker.observe(admitted, now)
            tracker.sample(usage)
            if slow_poll:  # the queue's reasons, for how good its estimates are
                next_estimates = now + ESTIMATES_POLL_S
                whys = await queue.why_records(tracker.awaiting_estimates())
                tracker.read_estimates(whys, now)
            await asyncio.sleep(POLL_S)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
    return tracker.finished == total


async def run_kueue_async(
    plan: Plan,
    *,
    time_scale: float = 1.0,
    timeout_s: float = 3600.0,
    workers: int = 1,
    binders: int = 1,
    servers: DevServers | None = None,
    profile_dir: str | None = None,
    runtime_from: str = "admission",
) -> dict[str, Any]:
    """See the module docstring; `servers` reuses a running Redis and broker (tests);
    `profile_dir` gets a cProfile dump per service process; `runtime_from`: RUNTIME_FROM."""
    if time_scale <= 0:
        raise ValueError("--time-scale must be positive")
    if runtime_from not in RUNTIME_FROM:
        raise ValueError(f"--runtime-from must be one of {', '.join(RUNTIME_FROM)}")
    nodes = nodes_for(plan)
    profile = await asyncio.to_thread(os.path.abspath, profile_dir) if profile_dir else None
    async with pipeline(
        workers=workers,
        binders=binders,
        servers=servers,
        single_tenant=None,
        ordered=False,
        session_ms=3000,
        extra_env={ENV_PROFILE_DIR: profile} if profile else None,
    ) as run:
        objects = quota_objects(plan)
        objects.nodes = nodes
        await run.apply(objects)
        await _wait_for_workers(run)
        cpu_before = _stack_cpu(run)
        redis_before = await redis_command_usec(run.client.redis)
        harness_before = time.process_time()
        tracker = Tracker(
            plan,
            time_scale,
            started=time.time(),
            finish_after_admission=runtime_from == "admission",
        )
        settled = await _drive(run, tracker, timeout_s)
        harness_cpu = time.process_time() - harness_before
        redis_after = await redis_command_usec(run.client.redis)
        cpu = {
            name: round(used - cpu_before.get(name, 0.0), 2)
            for name, used in _stack_cpu(run).items()
        }
    measured_s = max(tracker.last_end - tracker.started, 1e-9)
    wall_ms = int(measured_s * 1000 * time_scale)
    bound = lower_bound_ms(plan)
    total_cpu = sum(cpu.values())
    records = list(tracker.records.values())
    summary = summarize(plan, records)
    observer = run.observer
    for name, hops in tracker.stages(
        observer.dispatched_at, observer.proposed_at, observer.bound_at
    ).items():
        summary["workloadClasses"].setdefault(name, {})["admissionToStartStagesMs"] = hops
    return {
        "mode": "kueue",
        "timeScale": time_scale,
        "runtimeFrom": runtime_from,
        "workloads": len(plan.workloads),
        "clusterQueues": len(plan.queues),
        "nodes": len(nodes),
        "settled": settled,
        "created": len(records),
        "admitted": sum(1 for r in records if r.admitted_ms is not None),
        "finished": tracker.finished,
        # Admissions no read of the admitted records saw (admitted and finished between two):
        # counted as admitted their runtime before their finish.
        "admissionsInferred": tracker.inferred,
        "wallMs": wall_ms,
        "measuredWallMs": int(measured_s * 1000),
        "lowerBoundWallMs": bound,
        "wallToLowerBound": round(wall_ms / bound, 3) if bound else None,
        **summary,
        # What admission held (its usage in Redis), sampled every POLL_S: per ClusterQueue
        # within nominal + borrowingLimit, per cohort within its nominal quota.
        "peakUsage": dict(sorted(tracker.peak.items())),
        "peakCohortUsage": dict(sorted(tracker.cohort_peak.items())),
        # The queue's estimated admission times (in waiting pods' reasons), against the
        # admissions that followed: admitted minus predicted.
        "admissionEstimates": tracker.estimates(),
        "cpuSeconds": cpu,
        "cpuSecondsTotal": round(total_cpu, 2),
        # This process (creating the pods, reading admissions, completions and reasons, the
        # topics' observer): it shares the machine's cores with the stack.
        "harnessCpuSeconds": round(harness_cpu, 2),
        "cpuMsPerWorkload": round(total_cpu * 1000 / max(len(records), 1), 2),
        # What Redis spent per workload, by command (as the distributed bench's
        # redis_us_per_pod: a script's EVALSHA includes the commands it runs), and its reads
        # of client requests ("(reads)": one per request batch any client sent).
        "redisUsPerWorkload": redis_us_per_pod(
            redis_before, redis_after, max(len(records), 1), top=16
        ),
        "mCPU": int(total_cpu * 1000 / measured_s),
    }


def run_kueue(plan: Plan, **options: Any) -> dict[str, Any]:
    return asyncio.run(run_kueue_async(plan, **options))
