"""services.queue.quota.cohorts: Kueue's quota arithmetic, table-driven with the behaviour Kueue
documents
(borrowing within a cohort, borrowingLimit, lendingLimit keeping a guaranteed part, flavor
order, DRF share)."""

from __future__ import annotations

from typing import Any

import pytest

from services.queue.quota.cohorts import INFINITE_SHARE, Cohort, cohorts_of
from services.queue.quota.flavor_assign import FIT, PodSet, assign_flavors
from shared.models import load_manifest_text
from shared.models.kueue import ClusterQueue, ResourceFlavor


def queue(name: str, cohort: str = "", weight: Any = 1, **cpu: Any) -> ClusterQueue:
    """A ClusterQueue with one flavor "default" covering cpu (nominal, borrowing, lending)."""
    limits = {"nominalQuota": cpu.get("nominal", 0)}
    if "borrowing" in cpu:
        limits["borrowingLimit"] = cpu["borrowing"]
    if "lending" in cpu:
        limits["lendingLimit"] = cpu["lending"]
    limits_text = ", ".join(f"{k}: {v}" for k, v in limits.items())
    text = f"""apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  cohort: "{cohort}"
  fairSharing: {{weight: {weight}}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{{name: cpu, {limits_text}}}]
"""
    (cq,) = load_manifest_text(text).queue_objects
    assert isinstance(cq, ClusterQueue)
    return cq


def cohort(*queues: ClusterQueue, **usage_cpu: int) -> Cohort:
    (c,) = cohorts_of(queues).values()
    for name, cores in usage_cpu.items():
        c.usage[name] = {("default", "cpu"): cores * 1000}
    return c


CPU = ("default", "cpu")


@pytest.mark.parametrize(
    ("queues", "usage", "who", "available_cores"),
    [
        pytest.param([queue("a", nominal=9)], {}, "a", 9, id="alone: its nominal quota"),
        pytest.param([queue("a", nominal=9)], {"a": 4}, "a", 5, id="alone, partly used"),
        pytest.param(
            [queue("a", "c", nominal=9), queue("b", "c", nominal=12)],
            {},
            "a",
            21,
            id="cohort: borrows all of b's unused quota",
        ),
        pytest.param(
            [queue("a", "c", nominal=9), queue("b", "c", nominal=12)],
            {"b": 12},
            "a",
            9,
            id="cohort: b uses its own, a keeps its nominal",
        ),
        pytest.param(
            [queue("a", "c", nominal=9, borrowing=6), queue("b", "c", nominal=12)],
            {},
            "a",
            15,
            id="borrowingLimit caps a at nominal + 6",
        ),
        pytest.param(
            [queue("a", "c", nominal=9), queue("b", "c", nominal=12, lending=4)],
            {},
            "a",
            13,
            id="lendingLimit: b lends at most 4",
        ),
        pytest.param(
            [queue("a", "c", nominal=9), queue("b", "c", nominal=12, lending=4)],
            {"a": 13},
            "b",
            8,
            id="lendingLimit: b's guaranteed 8 stays b's when a borrowed all",
        ),
        pytest.param(
            [queue("a", "c", nominal=9), queue("b", "c", nominal=12, lending=4)],
            {"a": 13},
            "a",
            0,
            id="a used everything it may",
        ),
        pytest.param(
            [queue("a", "c", nominal=9), queue("b", "c", nominal=12)],
            {"a": 15, "b": 6},
            "b",
            0,
            id="b's unused quota is lent out: b must reclaim it",
        ),
    ],
)
def test_available(
    queues: list[ClusterQueue], usage: dict[str, int], who: str, available_cores: int
) -> None:
    c = cohort(*queues, **usage)
    assert c.available(who, CPU) == available_cores * 1000


def test_flavors_are_tried_in_order_one_per_resource_group() -> None:
    text = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: on-demand}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: spot}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 5}, {name: memory, nominalQuota: 10Gi}]
    - name: spot
      resources: [{name: cpu, nominalQuota: 10}, {name: memory, nominalQuota: 40Gi}]
"""
    objects = load_manifest_text(text).queue_objects
    queues = [o for o in objects if isinstance(o, ClusterQueue)]
    flavors = {o.metadata.name: o for o in objects if isinstance(o, ResourceFlavor)}
    (c,) = cohorts_of(queues).values()

    def assign(request: dict[str, int]) -> dict[str, str] | None:
        got = assign_flavors(c, queues[0], flavors, [PodSet("main", request)])
        return got.podsets[0].flavors if got.mode == FIT else None

    assert assign({"cpu": 4000}) == {"cpu": "on-demand"}
    assert assign({"cpu": 6000}) == {"cpu": "spot"}
    assert assign({"cpu": 11000}) is None
    # The memory fits only spot: the cpu goes there too (one flavor per resource group).
    assert assign({"cpu": 1000, "memory": 20 << 30}) == {"cpu": "spot", "memory": "spot"}
    c.charge("q", {"cpu": 4000}, {"cpu": "on-demand"})
    assert assign({"cpu": 2000}) == {"cpu": "spot"}
    c.release("q", {"cpu": 4000}, {"cpu": "on-demand"})
    assert assign({"cpu": 2000}) == {"cpu": "on-demand"}
    assert assign({"nvidia.com/gpu": 1}) is None  # not covered: inadmissible


@pytest.mark.parametrize(
    ("weight", "used", "share"),
    [
        pytest.param(1, 9, 0, id="within nominal: 0"),
        pytest.param(1, 13, 4000 * 1000 // 13000, id="borrows 4 of 13 lendable"),
        pytest.param(2, 13, 4000 * 1000 // 13000 // 2, id="weight 2 halves it"),
        pytest.param('"0.5"', 13, 4000 * 1000 * 2 // 13000, id="weight 0.5 doubles it"),
        pytest.param(0, 13, INFINITE_SHARE, id="weight 0: infinite"),
    ],
)
def test_weighted_dominant_resource_share(weight: Any, used: int, share: int) -> None:
    c = cohort(
        queue("a", "c", weight=weight, nominal=9), queue("b", "c", nominal=12, lending=4), a=used
    )
    assert c.share("a") == share


def test_share_counts_a_candidate_workload() -> None:
    c = cohort(queue("a", "c", nominal=9), queue("b", "c", nominal=12), a=9)
    assert c.share("a") == 0
    assert c.share("a", {CPU: 3000}) == 3000 * 1000 // 21000
