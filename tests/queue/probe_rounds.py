"""Probe (not collected: run it by path): CPU cost of quota admission rounds at a large
backlog, Kueue's baseline shape (5 cohorts x 6 ClusterQueues of 20 cpu, borrowingLimit 100),
each round after one admitted pod finishes.

    PYTHONPATH=$PWD PROBE_PROFILE=/tmp/rounds.prof pytest -q -s tests/queue/probe_rounds.py
"""

from __future__ import annotations

import cProfile
import os
import random
import time

import redis.asyncio as aioredis

from services.queue.keys import QueueKeys
from shared.models.kueue import QUEUE_NAME_LABEL
from tests.builders import make_pod
from tests.queue.test_admission import setup, submit


def _queues() -> str:
    docs = ["apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: default}"]
    for c in range(5):
        for q in range(6):
            name = f"cq-{c}-{q}"
            docs.append(
                f"""apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  cohort: "cohort-{c}"
  namespaceSelector: {{}}
  preemption: {{reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{{name: cpu, nominalQuota: 20, borrowingLimit: 100}}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: lq, namespace: {name}}}
spec: {{clusterQueue: {name}}}"""
            )
    return "\n---\n".join(docs)


async def test_probe(redis_client: aioredis.Redis, redis_prefix: str) -> None:
    backlog = int(os.environ.get("PROBE_BACKLOG", "7000"))
    rounds = int(os.environ.get("PROBE_ROUNDS", "40"))
    rng = random.Random(1)
    admission = await setup(redis_client, redis_prefix, _queues())
    if hasattr(admission, "reasons_every"):
        admission.reasons_every = float(os.environ.get("PROBE_REASONS_EVERY", "1.0"))
    classes = [("1", 50), ("5", 100), ("20", 200)]
    pods = []
    for i in range(backlog):
        cpu, prio = rng.choice(classes)
        ns = f"cq-{rng.randrange(5)}-{rng.randrange(6)}"
        builder = make_pod(f"p{i}").namespace(ns).req(cpu=cpu).label(QUEUE_NAME_LABEL, "lq")
        made = builder.priority(prio).obj()
        made.metadata.creation_timestamp = float(i)
        pods.append(made)
    records = await submit(admission, *pods)
    keys = QueueKeys(redis_prefix + "q:")

    async def settle(verdict: object) -> None:
        await verdict.write_whys(redis_client, keys, lambda pod: "t")  # type: ignore[attr-defined]

    await settle(await admission.admit())
    profile = cProfile.Profile()
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    if os.environ.get("PROBE_PROFILE"):
        profile.enable()
    admitted = 0
    for _ in range(rounds):
        key = rng.choice(sorted(admission.admitted))
        name = key.split("/", 1)[1]
        await admission.gate(records[name], "delete")
        verdict = await admission.admit()
        admitted += len(verdict.admitted)
        await settle(verdict)
    profile.disable()
    cpu_s, wall_s = time.process_time() - cpu_start, time.perf_counter() - wall_start
    waiting = len(admission.pending)
    print(
        f"\nPROBE backlog={waiting} rounds={rounds} admitted={admitted} "
        f"cpu/round={cpu_s / rounds * 1000:.1f} ms wall/round={wall_s / rounds * 1000:.1f} ms"
    )
    if out := os.environ.get("PROBE_PROFILE"):
        profile.dump_stats(out)
