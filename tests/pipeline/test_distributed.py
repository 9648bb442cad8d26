"""The distributed pipeline with several replicas, and with services killed mid-run.

Every final state is checked by cli/audit.py (no node over-committed, no violated
taint, affinity, anti-affinity or DoNotSchedule spread constraint, no pod bound twice) plus the
store's usage bookkeeping and the queue: every pod ends bound or held by the queue (parked
unschedulable or gated).

The fault runs use BERTH_FAULT_PODS pods (400 by default; the issue's 5,000-pod run is
`BERTH_FAULT_PODS=5000 pytest tests/pipeline/test_distributed.py`).
"""

from __future__ import annotations

import os
import random

import pytest

from cli.demo_workload import demo_workload
from cli.run import pipeline
from cli.servers import DevServers
from tests.pipeline.final_state import final_state, kill_mid_run

FAULT_PODS = int(os.environ.get("BERTH_FAULT_PODS", "400"))
SETTLE_SECONDS = 240.0


async def test_several_workers_and_binders_place_validly(dev_servers: DevServers) -> None:
    workload = demo_workload(nodes=45, pods=600, seed=3)
    async with pipeline(
        workers=3, binders=2, servers=dev_servers, ordered=False, single_tenant=None
    ) as run:
        await run.apply(workload.base)
        assert await run.settle(SETTLE_SECONDS)
        await run.apply(workload.preemptors)
        assert await run.settle(SETTLE_SECONDS)
        state = await final_state(run)
        victims = sum(len(v) for v in run.observer.victims.values())
        urgent = [p.key for p in workload.preemptors.pods]
        report = {p["pod"]: p for p in (await run.report())["pods"]}
    assert state.problems() == []
    assert state.bound >= len(workload.base.pods) * 9 // 10
    assert victims >= 1
    assert [report[key]["status"] for key in urgent] == ["Scheduled"] * len(urgent)


@pytest.mark.parametrize("target", ["worker", "binder", "queue"])
async def test_kill_9_mid_run_loses_and_duplicates_nothing(
    dev_servers: DevServers, target: str
) -> None:
    rng = random.Random(f"{target}-{FAULT_PODS}")
    workload = demo_workload(nodes=max(30, FAULT_PODS // 10), pods=FAULT_PODS, seed=7)
    async with pipeline(
        workers=2, binders=1, servers=dev_servers, ordered=False, single_tenant=None
    ) as run:
        await run.apply(workload.base)
        # A random moment while pods are still being placed.
        before, victim = await kill_mid_run(run, target, rng)
        assert await run.settle(SETTLE_SECONDS)
        state = await final_state(run)
        restarts = run.stack.processes[victim].restarts
    assert before.bound < before.total, "the kill came after the work was done"
    assert restarts >= 1
    assert state.problems() == []
    assert state.bound >= len(workload.base.pods) * 9 // 10
