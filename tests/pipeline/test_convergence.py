"""Randomized convergence stress: random clusters near full, host ports, anti-affinity, spread,
gangs and priorities, through 1-3 scheduler workers and 1-2 binders (real Redis and broker,
services as processes).

Each seeded run must settle (no pod left active, backing off or in flight) within a bound, and
then: the placement validator finds nothing, the stored usage equals the bound pods, every pod
is bound, preempted or held by the queue, every gang is whole or absent, every pod the queue
parks carries a reason, and no pod needed more than a handful of attempts (a livelock shows up
as hundreds). With one worker and one binder and no gangs the placements equal `berth schedule`.

`BERTH_STRESS_RUNS=N` runs N seeds per shape instead of the default (CI keeps it small).
"""

from __future__ import annotations

import copy
import os
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any, cast

import pytest

from cli.run import Pipeline, pipeline
from cli.servers import DevServers
from scheduling.dryrun import run_dry_async, to_json
from services.queue.views import PendingPod
from shared.models import (
    POD_GROUP_LABEL,
    Manifests,
    Namespace,
    ObjectMeta,
    Pod,
    PriorityClass,
    cluster_meta,
)
from tests.builders import label_selector, make_node, make_pod, make_pod_group
from tests.pipeline.final_state import final_state, kill_mid_run

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
RUNS = int(os.environ.get("BERTH_STRESS_RUNS", "1"))
SETTLE_SECONDS = 120.0
MAX_ATTEMPTS = 12
"""Attempts any one pod may take: each failure backs off, so a pod that needs more is looping."""
MAX_GANG_ATTEMPTS = 40
"""A gang that cannot fit whole retries on every cluster event after each Permit timeout (as
upstream Coscheduling does without podGroupBackoffSeconds): still backed off, but more tries."""


@dataclass
class StressWorkload:
    manifests: Manifests
    gangs: dict[str, int]
    """"namespace/group" -> minMember."""


def stress_workload(seed: int, *, gangs: bool = True) -> StressWorkload:
    """A small cluster filled to ~70-90% by running pods, then pending pods that contend:
    host ports on few nodes, hostname anti-affinity, zone spread (DoNotSchedule), gangs,
    and high-priority pods that can only run by preempting. Pending low-priority pods never
    preempt (their class has preemptionPolicy Never), so the only victims are running "idle"
    pods and the final state can be checked for spread and anti-affinity as if pods were only
    added."""
    rng = random.Random(seed)
    zones = ["zone-a", "zone-b", "zone-c"]
    node_count = rng.randint(6, 12)
    nodes = []
    for i in range(node_count):
        cpu = rng.choice([4, 8])
        nodes.append(
            make_node(f"node-{i}")
            .capacity(cpu=str(cpu), memory=f"{cpu * 4}Gi", pods=rng.choice([10, 20]))
            .label(HOST, f"node-{i}")
            .label(ZONE, zones[i % len(zones)])
            .obj()
        )
    namespaces = ["team-a", "team-b"]
    pods: list[Pod] = []
    # Running pods: fill each node to 70-90% of its CPU, some of them holding host ports.
    for i, node in enumerate(nodes):
        capacity = node.status.allocatable["cpu"]
        target = capacity * rng.uniform(0.7, 0.9)
        used, j, has_port = 0, 0, False
        slots = node.status.allocatable["pods"] - 2
        while used + 500 <= target and j < slots:
            cpu = rng.choice([250, 500, 1000])
            builder = (
                make_pod(f"run-{i}-{j}")
                .namespace(rng.choice(namespaces))
                .priority_class("idle")
                .req(cpu=f"{cpu}m", memory="512Mi")
                .label("app", "running")
                .node(node.metadata.name)
            )
            if not has_port and rng.random() < 0.3:
                builder.host_port(9100)  # one per node: the starting state itself is valid
                has_port = True
            pods.append(builder.obj())
            used += cpu
            j += 1
    pending: list[Pod] = []
    for i in range(rng.randint(15, 30)):
        pending.append(
            make_pod(f"batch-{i}")
            .namespace(rng.choice(namespaces))
            .priority_class("low")
            .req(cpu=f"{rng.choice([100, 250, 500])}m", memory="256Mi")
            .obj()
        )
    for i in range(rng.randint(3, 2 + node_count)):
        pending.append(
            make_pod(f"exporter-{i}")
            .namespace(namespaces[i % 2])
            .priority_class("low")
            .req(cpu="100m", memory="64Mi")
            .host_port(9100 + rng.randint(0, 1))
            .obj()
        )
    for i in range(rng.randint(3, node_count + 2)):
        pending.append(
            make_pod(f"db-{i}")
            .namespace("team-a")
            .priority_class("low")
            .req(cpu="250m", memory="512Mi")
            .label("app", "db")
            .pod_affinity(HOST, label_selector({"app": "db"}), anti=True)
            .obj()
        )
    for i in range(rng.randint(3, 9)):
        pending.append(
            make_pod(f"web-{i}")
            .namespace("team-b")
            .priority_class("low")
            .req(cpu="250m", memory="256Mi")
            .label("app", "web")
            .spread_constraint(1, ZONE, "DoNotSchedule", label_selector({"app": "web"}))
            .obj()
        )
    groups = []
    gang_sizes: dict[str, int] = {}
    if gangs:
        for g in range(rng.randint(1, 2)):
            size = rng.randint(2, 4)
            name = f"train-{g}"
            groups.append(
                make_pod_group(name, size, namespace="team-a", schedule_timeout_seconds=5)
            )
            gang_sizes[f"team-a/{name}"] = size
            for m in range(size):
                pending.append(
                    make_pod(f"{name}-{m}")
                    .namespace("team-a")
                    .priority_class("low")
                    .req(cpu=rng.choice(["500m", "1", "2"]), memory="1Gi")
                    .label(POD_GROUP_LABEL, name)
                    .obj()
                )
    for i in range(rng.randint(1, 3)):
        pending.append(
            make_pod(f"urgent-{i}")
            .namespace("team-b")
            .priority_class("high")
            .req(cpu=rng.choice(["2", "3"]), memory="1Gi")
            .obj()
        )
    rng.shuffle(pending)
    manifests = Manifests(
        nodes=nodes,
        pods=[*pods, *pending],
        namespaces=[Namespace(metadata=ObjectMeta(name=n)) for n in namespaces],
        priority_classes=[
            PriorityClass(metadata=cluster_meta("idle"), value=1),
            PriorityClass(metadata=cluster_meta("low"), value=10, preemption_policy="Never"),
            PriorityClass(metadata=cluster_meta("high"), value=10_000),
        ],
        pod_groups=groups,
    )
    return StressWorkload(manifests, gang_sizes)


SHAPES = [(1, 1), (2, 1), (3, 2), (2, 2)]


@pytest.mark.parametrize(
    ("workers", "binders", "seed"),
    [
        pytest.param(w, b, 1000 * w + 100 * b + run, id=f"{w}w-{b}b-seed{run}")
        for w, b in SHAPES
        for run in range(RUNS)
    ],
)
async def test_random_contention_settles_validly(
    dev_servers: DevServers, workers: int, binders: int, seed: int
) -> None:
    workload = stress_workload(seed)
    async with pipeline(
        workers=workers, binders=binders, servers=dev_servers, ordered=False, single_tenant=None
    ) as run:
        await run.apply(workload.manifests)
        settled = await run.settle(SETTLE_SECONDS)
        state = await final_state(run)
        queued = (await run.client.queue.pending()).pods
        snapshot = await run.client.store.load_snapshot()
    assert settled, "the pipeline did not settle"
    assert state.problems() == []
    bound_in_group: Counter[str] = Counter()
    for pod in snapshot.pods:
        group = pod.metadata.labels.get(POD_GROUP_LABEL)
        if group and pod.spec.node_name:
            bound_in_group[f"{pod.metadata.namespace}/{group}"] += 1
    broken = {
        g: bound_in_group[g] for g, size in workload.gangs.items() if 0 < bound_in_group[g] < size
    }
    assert broken == {}, f"gangs partly bound: {broken}"
    silent = [p.key for p in queued if p.queue == "unschedulable" and not p.message]
    assert silent == [], "pods parked without a reason"
    members = {
        f"{p.metadata.namespace}/{p.metadata.name}"
        for p in workload.manifests.pods
        if POD_GROUP_LABEL in p.metadata.labels
    }
    looping = {
        p.key: p.attempts
        for p in queued
        if p.attempts > (MAX_GANG_ATTEMPTS if p.key in members else MAX_ATTEMPTS)
    }
    assert looping == {}, "pods that kept retrying"


@pytest.mark.parametrize("seed", [11 + run for run in range(RUNS)])
async def test_one_worker_one_binder_places_like_the_dry_run(
    dev_servers: DevServers, seed: int
) -> None:
    """Gangs aside (the dry run has no Permit waits across pods), one worker and one binder
    with ordered dispatch make exactly `berth schedule`'s decisions on the same contention."""
    workload = stress_workload(seed, gangs=False)
    expected = to_json(await run_dry_async(copy.deepcopy(workload.manifests), None, seed=seed))
    async with pipeline(workers=1, binders=1, servers=dev_servers, seed=seed) as run:
        await run.apply(copy.deepcopy(workload.manifests))
        assert await run.settle(SETTLE_SECONDS)
        report = await run.report()
    keys = ("pod", "status", "node", "nominatedNode", "victims")
    got = [tuple(p[k] for k in keys) for p in report["pods"]]
    want = [tuple(p[k] for k in keys) for p in cast(list[dict[str, Any]], expected["pods"])]
    assert got == want


KILL_RUNS = int(os.environ.get("BERTH_BINDER_KILL_RUNS", "2"))


@pytest.mark.parametrize("run_index", range(KILL_RUNS))
async def test_kill_9_one_of_two_binders_keeps_cross_node_rules(
    dev_servers: DevServers, run_index: int
) -> None:
    """Two binders split the nodes; one dies (SIGKILL) while anti-affinity and spread pods are
    being bound. The survivor and the restarted binder adopt its reservations: no rule may
    break, nothing may be lost (`BERTH_BINDER_KILL_RUNS=20` for the issue's 20 runs)."""
    rng = random.Random(f"binder-kill-{run_index}")
    workload = stress_workload(500 + run_index, gangs=False)
    async with pipeline(
        workers=2, binders=2, servers=dev_servers, ordered=False, single_tenant=None
    ) as run:
        await run.apply(workload.manifests)
        await kill_mid_run(run, "binder", rng, high=0.5)
        settled = await run.settle(SETTLE_SECONDS)
        state = await final_state(run)
    assert settled
    assert state.problems() == []


async def _held(run: Pipeline, key: str) -> PendingPod | None:
    return next((p for p in (await run.client.queue.pending()).pods if p.key == key), None)


async def _node_of(run: Pipeline, namespace: str, name: str) -> str:
    pod = await run.client.store.get_pod(namespace, name)
    return pod.spec.node_name if pod is not None else ""


@pytest.mark.parametrize("trial", range(3))
async def test_two_workers_two_pods_one_host_port_settle(dev_servers: DevServers, trial: int):
    """The issue's livelock: one node, two pods wanting hostPort 9100 in different
    namespaces, two workers. One binds; the other ends unschedulable with the ports reason
    after a few attempts, not hundreds."""
    node = make_node("n1").capacity(cpu="4", memory="8Gi", pods=10).label(HOST, "n1").obj()
    pods = [
        make_pod("exporter").namespace(ns).req(cpu="100m").host_port(9100).obj()
        for ns in ("team-a", "team-b")
    ]
    namespaces = [Namespace(metadata=ObjectMeta(name=ns)) for ns in ("team-a", "team-b")]
    async with pipeline(
        workers=2, binders=1, servers=dev_servers, ordered=False, single_tenant=None
    ) as run:
        await run.apply(Manifests(nodes=[node], pods=pods, namespaces=namespaces))
        assert await run.settle(60)
        placed = [await _node_of(run, ns, "exporter") for ns in ("team-a", "team-b")]
        queued = (await run.client.queue.pending()).pods
    assert sorted(placed) == ["", "n1"]
    [loser] = queued
    assert loser.queue == "unschedulable"
    assert "didn't have free ports" in loser.message
    assert loser.attempts <= 4


async def test_a_port_two_running_pods_share_stays_taken_after_one_leaves(
    dev_servers: DevServers,
) -> None:
    """Two running pods hold hostPort 9100 on the only node; one is deleted. A new pod
    wanting the port must still be refused (the other holds it), without looping; once the
    second leaves, the new pod binds."""
    node = make_node("n1").capacity(cpu="4", memory="8Gi", pods=10).label(HOST, "n1").obj()
    running = [
        make_pod(f"old-{i}").req(cpu="100m").host_port(9100).node("n1").obj() for i in range(2)
    ]
    async with pipeline(workers=1, binders=1, servers=dev_servers) as run:
        await run.apply(Manifests(nodes=[node], pods=running))
        assert await run.client.delete("Pod", "default", "old-0")
        await run.apply(Manifests(pods=[make_pod("new").req(cpu="100m").host_port(9100).obj()]))
        assert await run.settle(60)
        held = await _held(run, "default/new")
        assert held is not None
        assert held.queue == "unschedulable"
        assert "didn't have free ports" in held.message
        assert held.attempts <= 2
        assert await run.client.delete("Pod", "default", "old-1")
        assert await run.settle(60)
        assert await _node_of(run, "default", "new") == "n1"
