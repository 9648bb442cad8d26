"""Admission fair sharing (Kueue's AdmissionFairSharing): the decayed LocalQueue usage
(services.queue.quota.admission_fair), table-driven, and on a real Redis the order it gives a
ClusterQueue
with admissionScope.admissionMode UsageBasedAdmissionFairSharing."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from services.queue.quota.admission_fair import LocalQueueUsage
from tests.queue.test_admission import pod, setup, submit, usage_in_redis


@pytest.mark.parametrize(
    ("steps", "want"),
    [
        pytest.param([(0, {}), (10, {"a": 100.0})], {"a": 50.0}, id="one half-life: half-way"),
        pytest.param([(0, {}), (10, {"a": 100.0}), (20, {})], {"a": 25.0}, id="then halved again"),
        pytest.param([(0, {}), (30, {"a": 80.0})], {"a": 70.0}, id="three half-lives"),
        pytest.param([(0, {}), (0, {"a": 80.0})], {"a": 0.0}, id="no time, no change"),
    ],
)
def test_usage_decays_with_the_half_life(
    steps: list[tuple[float, dict[str, float]]], want: dict[str, float]
) -> None:
    usage = LocalQueueUsage(half_life_s=10.0)
    for at, current in steps:
        usage.advance(at, current)
    assert usage.usage == pytest.approx(want)


def test_entry_penalty_and_weight() -> None:
    usage = LocalQueueUsage(half_life_s=10.0, sampling_s=10.0, weights={"memory": 0.0})
    usage.penalize("a", {"cpu": 1000, "memory": 1 << 30})
    assert usage.usage == {"a": 500.0}
    assert usage.key("a", 2.0) == 250.0
    assert usage.key("b", 1.0) == 0.0
    assert usage.key("a", 0.0) == float("inf")


def text(mode: str) -> str:
    docs = [
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: default}",
        f"""apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: shared}}
spec:
  namespaceSelector: {{}}
  admissionScope: {{admissionMode: {mode}}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: 4}}]}}]""",
    ]
    for ns in ("x", "y"):
        docs.append(
            f"apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
            f"metadata: {{name: lq, namespace: {ns}}}\nspec: {{clusterQueue: shared}}"
        )
    return "\n---\n".join(docs)


@pytest.mark.parametrize(
    ("mode", "x_history", "admitted"),
    [
        pytest.param("NoAdmissionFairSharing", 0.0, {"x": 4, "y": 0}, id="off: creation order"),
        pytest.param("UsageBasedAdmissionFairSharing", 0.0, {"x": 2, "y": 2}, id="alternates"),
        pytest.param(
            "UsageBasedAdmissionFairSharing", 1e9, {"x": 0, "y": 4}, id="x used a lot lately"
        ),
    ],
)
async def test_least_used_local_queue_goes_first(
    redis_client: aioredis.Redis,
    redis_prefix: str,
    mode: str,
    x_history: float,
    admitted: dict[str, int],
) -> None:
    admission = await setup(redis_client, redis_prefix, text(mode))
    admission.lq_usage = LocalQueueUsage(half_life_s=3600.0, sampling_s=600.0)
    admission.lq_usage.usage["x/lq"] = x_history
    # x's pods were all created first.
    await submit(admission, *(pod(f"x{i}", "x", created=i) for i in range(4)))
    await submit(admission, *(pod(f"y{i}", "y", created=10 + i) for i in range(4)))
    verdict = await admission.admit()
    got = {ns: sum(1 for p in verdict.admitted if p.namespace == ns) for ns in ("x", "y")}
    assert got == admitted
    assert await usage_in_redis(admission) == {"shared|default|cpu": 4000}
