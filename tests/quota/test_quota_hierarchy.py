"""Hierarchical cohorts (Kueue's Cohort objects, KEP-79) in services.queue.quota.cohorts,
table-driven: a root
cohort with quota of its own lends to child cohorts, a child's borrowingLimit caps what it
takes from above, a child's lendingLimit keeps a guaranteed part; and on a real Redis,
admission borrows the root's own quota."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from services.queue.quota.cohorts import Cohort, cohorts_of
from shared.models import load_manifest_text
from shared.models.kueue import ClusterQueue
from shared.models.kueue import Cohort as KueueCohort
from tests.queue.test_admission import setup, submit, usage_in_redis
from tests.queue.test_admission_flavors import pod as flavor_pod

CPU = ("default", "cpu")


def cohort_doc(name: str, parent: str = "", nominal: int = 0, extra: str = "") -> str:
    return f"""apiVersion: kueue.x-k8s.io/v1alpha1
kind: Cohort
metadata: {{name: {name}}}
spec:
  parent: "{parent}"
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: {nominal}{extra}}}]}}]"""


def queue_doc(name: str, cohort: str, nominal: int) -> str:
    return f"""apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  cohort: {cohort}
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: {nominal}}}]}}]"""


def tree(right_extra: str = ", borrowingLimit: 2") -> str:
    """root (10 cpu of its own) > left (a: 4, b: 2), right (c: 3)."""
    return "\n---\n".join(
        [
            cohort_doc("root", nominal=10),
            cohort_doc("left", "root"),
            cohort_doc("right", "root", 0, right_extra),
            queue_doc("a", "left", 4),
            queue_doc("b", "left", 2),
            queue_doc("c", "right", 3),
        ]
    )


def load(text: str) -> Cohort:
    objects = load_manifest_text(text).queue_objects
    queues = [o for o in objects if isinstance(o, ClusterQueue)]
    cohorts = [o for o in objects if isinstance(o, KueueCohort)]
    (only,) = cohorts_of(queues, cohorts).values()
    return only


@pytest.mark.parametrize(
    ("text", "usage", "queue", "available", "potential"),
    [
        pytest.param(tree(), {}, "a", 19, 19, id="left borrows the whole tree"),
        pytest.param(tree(), {}, "c", 5, 5, id="right's borrowingLimit caps it at 3 + 2"),
        pytest.param(tree(), {"a": 15}, "c", 4, 5, id="a uses 15 of 19: 4 left"),
        pytest.param(tree(), {"a": 15}, "b", 4, 19, id="b shares left's parent"),
        pytest.param(tree(", lendingLimit: 1"), {}, "a", 17, 17, id="right keeps 2 guaranteed"),
        pytest.param(
            tree(", lendingLimit: 1"), {"a": 17}, "c", 2, 19, id="the guaranteed part stays free"
        ),
        pytest.param(
            tree(", lendingLimit: 1"), {"a": 17}, "b", 0, 17, id="nothing left above left"
        ),
    ],
)
def test_available_and_potential_in_a_tree(
    text: str, usage: dict[str, int], queue: str, available: int, potential: int
) -> None:
    t = load(text)
    t.usage = {q: {CPU: cores * 1000} for q, cores in usage.items()}
    assert t.available(queue, CPU) == available * 1000
    assert t.potential(queue, CPU) == potential * 1000


def test_tree_root_and_cohort_quota() -> None:
    t = load(tree())
    assert t.root() == (False, "root")
    assert t.cohort_quota(CPU) == 19_000
    t.usage = {"a": {CPU: 5000}, "c": {CPU: 4000}}
    assert t.cohort_usage(CPU) == 9000


def test_a_parent_loop_is_cut() -> None:
    text = "\n---\n".join(
        [cohort_doc("x", "y", 1), cohort_doc("y", "x", 1), queue_doc("q", "x", 1)]
    )
    t = load(text)
    assert t.root() is not None
    assert t.available("q", CPU) == 3000  # q's 1 + x's 1 + y's 1, one tree


async def test_admission_borrows_the_root_cohorts_own_quota(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    flavor = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: default}"
    lq = (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
        "metadata: {name: lq, namespace: team}\nspec: {clusterQueue: a}"
    )
    admission = await setup(redis_client, redis_prefix, "\n---\n".join([flavor, tree(), lq]))
    # a's nominal is 4; left lends 6; the root's own 10 and right's 3 (within c's limit) too.
    await submit(admission, *(flavor_pod(f"p{i}", cpu="1") for i in range(20)))
    await admission.admit()
    assert await usage_in_redis(admission) == {"a|default|cpu": 19_000}
