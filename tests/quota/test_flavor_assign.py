"""services.queue.quota.flavor_assign: Kueue's flavor assignment, table-driven with Kueue's own
cases
(pkg/scheduler/flavorassigner/flavorassigner_test.go, TestAssignFlavors: the same flavors,
ClusterQueues, usage, pod sets and expected flavors, modes, reasons, borrowing and usage). Pod
set names are Kueue's; "pods" is requested where the queue covers it, as admission does.
Left out: TAS, DRA, partial admission, workload slices and the Reclaim oracle mode."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from services.queue.quota.cohorts import FlavorResource, cohorts_of
from services.queue.quota.flavor_assign import FIT, NO_FIT, PREEMPT_MODE, PodSet, assign_flavors
from shared.models import load_manifest_text
from shared.models.kueue import ClusterQueue, ResourceFlavor, quota_value
from shared.models.selectors import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from shared.models.taints import Taint, Toleration

SPOT = Taint(key="instance", value="spot", effect="NoSchedule")
TOLERATE_SPOT = Toleration(key="instance", operator="Equal", value="spot", effect="NoSchedule")


def _flavor(name: str, labels: str = "", taint: bool = False, tolerate: bool = False) -> str:
    spec = [f"nodeLabels: {{{labels}}}"]
    if taint:
        spec.append("nodeTaints: [{key: instance, value: spot, effect: NoSchedule}]")
    if tolerate:
        spec.append(
            "tolerations: [{key: instance, operator: Equal, value: spot, effect: NoSchedule}]"
        )
    return (
        f"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {{name: {name}}}\n"
        f"spec: {{{', '.join(spec)}}}"
    )


FLAVORS: dict[str, ResourceFlavor] = {
    f.metadata.name: f
    for f in load_manifest_text(
        "\n---\n".join(
            [
                _flavor("default"),
                _flavor("one", "type: one"),
                _flavor("two", "type: two"),
                _flavor("b-one", "b_type: one"),
                _flavor("b-two", "b_type: two"),
                _flavor("tainted", taint=True),
                _flavor("taint-and-toleration", taint=True, tolerate=True),
            ]
        )
    ).queue_objects
    if isinstance(f, ResourceFlavor)
}

Quota = str | tuple[str, str | None, str | None]
"""nominalQuota, or (nominalQuota, borrowingLimit, lendingLimit)."""


def cq(
    name: str,
    *groups: list[tuple[str, dict[str, Quota]]],
    cohort: str = "",
    fungibility: str = "",
    preemption: str = "",
) -> ClusterQueue:
    """A ClusterQueue: each group a list of (flavor, {resource: quota})."""
    rgs = []
    for group in groups:
        covered = list(dict.fromkeys(r for _, res in group for r in res))
        flavors = []
        for flavor, res in group:
            items = []
            for r, q in res.items():
                nominal, borrowing, lending = (q, None, None) if isinstance(q, str) else q
                text = f"{{name: {r}, nominalQuota: '{nominal}'"
                text += f", borrowingLimit: '{borrowing}'" if borrowing is not None else ""
                text += f", lendingLimit: '{lending}'" if lending is not None else ""
                items.append(text + "}")
            flavors.append(f"{{name: {flavor}, resources: [{', '.join(items)}]}}")
        rgs.append(
            f"  - coveredResources: [{', '.join(covered)}]\n    flavors: [{', '.join(flavors)}]"
        )
    text = f"""apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  cohort: "{cohort}"
  namespaceSelector: {{}}
  preemption: {{{preemption}}}
  flavorFungibility: {{{fungibility}}}
  resourceGroups:
""" + "\n".join(rgs)
    (queue,) = load_manifest_text(text).queue_objects
    assert isinstance(queue, ClusterQueue)
    return queue


def req(**amounts: str) -> dict[str, int]:
    return {r.replace("_", "."): quota_value(r.replace("_", "."), a) for r, a in amounts.items()}


GPU = "example.com/gpu"


def gpu(amount: str, **rest: str) -> dict[str, int]:
    return {**req(**rest), GPU: int(amount)}


def affinity(*terms: list[tuple[str, str]]) -> NodeSelector:
    """Required node affinity: each term a list of (key, value) `In` requirements."""
    return NodeSelector(
        node_selector_terms=[
            NodeSelectorTerm(
                match_expressions=[
                    NodeSelectorRequirement(key=k, operator="In", values=[v]) for k, v in term
                ]
            )
            for term in terms
        ]
    )


def fr(flavor: str, resource: str) -> FlavorResource:
    return (flavor, resource)


Mi = 1 << 20
Gi = 1 << 30
MAIN = "main"


@dataclass
class Case:
    podsets: list[PodSet]
    queue: ClusterQueue
    want_mode: int
    want: dict[str, dict[str, tuple[str, int]]] = field(default_factory=dict)
    """pod set -> resource -> (flavor, mode)."""
    want_reasons: dict[str, list[str]] = field(default_factory=dict)
    want_usage: dict[FlavorResource, int] = field(default_factory=dict)
    borrowing: bool = False
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    secondary: ClusterQueue | None = None
    secondary_usage: dict[FlavorResource, int] = field(default_factory=dict)
    fair_sharing: bool = False


TQ = "test-clusterqueue"
SQ = "test-secondary-clusterqueue"
CO = "test-cohort"
TRY_NEXT = "whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor"
BORROW_PREEMPT = "whenCanBorrow: Borrow, whenCanPreempt: Preempt"
BORROW_WITHIN = "reclaimWithinCohort: LowerPriority, borrowWithinCohort: {policy: LowerPriority}"

CASES: dict[str, Case] = {
    "single flavor, fits": Case(
        [PodSet(MAIN, req(cpu="1", memory="1Mi"))],
        cq(TQ, [("default", {"cpu": "1", "memory": "2Mi"})]),
        FIT,
        {MAIN: {"cpu": ("default", FIT), "memory": ("default", FIT)}},
        want_usage={fr("default", "cpu"): 1000, fr("default", "memory"): Mi},
    ),
    "single flavor, fits tainted flavor": Case(
        [PodSet(MAIN, req(cpu="1"), tolerations=[TOLERATE_SPOT])],
        cq(TQ, [("tainted", {"cpu": "4"})]),
        FIT,
        {MAIN: {"cpu": ("tainted", FIT)}},
        want_usage={fr("tainted", "cpu"): 1000},
    ),
    "single flavor, fits tainted flavor with toleration": Case(
        [PodSet(MAIN, req(cpu="1"))],
        cq(TQ, [("taint-and-toleration", {"cpu": "4"})]),
        FIT,
        {MAIN: {"cpu": ("taint-and-toleration", FIT)}},
        want_usage={fr("taint-and-toleration", "cpu"): 1000},
    ),
    "single flavor, used resources, doesn't fit": Case(
        [PodSet(MAIN, req(cpu="2"))],
        cq(TQ, [("default", {"cpu": "4"})]),
        PREEMPT_MODE,
        {MAIN: {"cpu": ("default", PREEMPT_MODE)}},
        {MAIN: ["insufficient unused quota for cpu in flavor default, 1 more needed"]},
        {fr("default", "cpu"): 2000},
        usage={fr("default", "cpu"): 3000},
    ),
    "multiple resource groups, fits": Case(
        [PodSet(MAIN, req(cpu="3", memory="10Mi"))],
        cq(
            TQ,
            [("one", {"cpu": "2"}), ("two", {"cpu": "4"})],
            [("b-one", {"memory": "1Gi"}), ("b-two", {"memory": "5Gi"})],
        ),
        FIT,
        {MAIN: {"cpu": ("two", FIT), "memory": ("b-one", FIT)}},
        want_usage={fr("two", "cpu"): 3000, fr("b-one", "memory"): 10 * Mi},
    ),
    "multiple resource groups, one could fit with preemption, other doesn't fit": Case(
        [PodSet(MAIN, req(cpu="3", memory="10Mi"))],
        cq(TQ, [("one", {"cpu": "3"})], [("b-one", {"memory": "1Mi"})]),
        NO_FIT,
        want_reasons={
            MAIN: [
                "insufficient quota for memory in flavor b-one, request > maximum capacity "
                "(10Mi > 1Mi)"
            ]
        },
        usage={fr("one", "cpu"): 1000},
    ),
    "multiple resource groups with multiple resources, fits": Case(
        [PodSet(MAIN, gpu("3", cpu="3", memory="10Mi"))],
        cq(
            TQ,
            [("one", {"cpu": "2", "memory": "1Gi"}), ("two", {"cpu": "4", "memory": "15Mi"})],
            [("b-one", {GPU: "4"}), ("b-two", {GPU: "2"})],
        ),
        FIT,
        {MAIN: {"cpu": ("two", FIT), "memory": ("two", FIT), GPU: ("b-one", FIT)}},
        want_usage={fr("two", "cpu"): 3000, fr("two", "memory"): 10 * Mi, fr("b-one", GPU): 3},
    ),
    "multiple resource groups with multiple resources, fits with different modes": Case(
        [PodSet(MAIN, gpu("3", cpu="3", memory="10Mi"))],
        cq(
            TQ,
            [("one", {"cpu": "2", "memory": "1Gi"}), ("two", {"cpu": "4", "memory": "15Mi"})],
            [("b-one", {GPU: "4"})],
            cohort=CO,
        ),
        PREEMPT_MODE,
        {
            MAIN: {
                "cpu": ("two", FIT),
                "memory": ("two", PREEMPT_MODE),
                GPU: ("b-one", PREEMPT_MODE),
            }
        },
        {
            MAIN: [
                "insufficient quota for cpu in flavor one, request > maximum capacity (3 > 2)",
                "insufficient unused quota for memory in flavor two, 5Mi more needed",
                f"insufficient unused quota for {GPU} in flavor b-one, 1 more needed",
            ]
        },
        {fr("two", "cpu"): 3000, fr("two", "memory"): 10 * Mi, fr("b-one", GPU): 3},
        borrowing=True,
        usage={fr("two", "memory"): 10 * Mi},
        secondary=cq(SQ, [("b-one", {GPU: "0"})], cohort=CO),
        secondary_usage={fr("b-one", GPU): 2},
    ),
    "multiple resources in a group, doesn't fit": Case(
        [PodSet(MAIN, req(cpu="3", memory="10Mi"))],
        cq(
            TQ,
            [("one", {"cpu": "2", "memory": "1Gi"}), ("two", {"cpu": "4", "memory": "5Mi"})],
        ),
        NO_FIT,
        want_reasons={
            MAIN: [
                "insufficient quota for cpu in flavor one, request > maximum capacity (3 > 2)",
                "insufficient quota for memory in flavor two, request > maximum capacity "
                "(10Mi > 5Mi)",
            ]
        },
    ),
    "multiple flavors, fits while skipping tainted flavor": Case(
        [PodSet(MAIN, req(cpu="3"))],
        cq(TQ, [("tainted", {"cpu": "4"}), ("two", {"cpu": "4"})]),
        FIT,
        {MAIN: {"cpu": ("two", FIT)}},
        want_usage={fr("two", "cpu"): 3000},
    ),
    "multiple flavors, fits a node selector": Case(
        [
            PodSet(
                MAIN,
                req(cpu="1"),
                node_selector={"type": "two", "ignored1": "foo"},
                affinity=affinity([("ignored2", "bar")]),
            )
        ],
        cq(TQ, [("one", {"cpu": "4"}), ("two", {"cpu": "4"})]),
        FIT,
        {MAIN: {"cpu": ("two", FIT)}},
        want_usage={fr("two", "cpu"): 1000},
    ),
    "multiple flavors, fits with node affinity": Case(
        [
            PodSet(
                MAIN,
                req(cpu="1", memory="1Mi"),
                node_selector={"ignored1": "foo"},
                affinity=affinity([("type", "two")]),
            )
        ],
        cq(
            TQ,
            [("one", {"cpu": "4", "memory": "1Gi"}), ("two", {"cpu": "4", "memory": "1Gi"})],
        ),
        FIT,
        {MAIN: {"cpu": ("two", FIT), "memory": ("two", FIT)}},
        want_usage={fr("two", "cpu"): 1000, fr("two", "memory"): Mi},
    ),
    "multiple flavors, node affinity fits any flavor": Case(
        [
            PodSet(
                MAIN,
                req(cpu="1"),
                affinity=affinity([("ignored2", "bar")], [("cpuType", "two")]),
            )
        ],
        cq(TQ, [("one", {"cpu": "4"}), ("two", {"cpu": "4"})]),
        FIT,
        {MAIN: {"cpu": ("one", FIT)}},
        want_usage={fr("one", "cpu"): 1000},
    ),
    "multiple flavors, doesn't fit node affinity": Case(
        [PodSet(MAIN, req(cpu="1"), affinity=affinity([("type", "three")]))],
        cq(TQ, [("one", {"cpu": "4"}), ("two", {"cpu": "4"})]),
        NO_FIT,
        want_reasons={
            MAIN: [
                "flavor one doesn't match node affinity",
                "flavor two doesn't match node affinity",
            ]
        },
    ),
    "multiple specs, fit different flavors": Case(
        [PodSet("driver", req(cpu="5")), PodSet("worker", req(cpu="3"))],
        cq(TQ, [("one", {"cpu": "4"}), ("two", {"cpu": "10"})]),
        FIT,
        {"driver": {"cpu": ("two", FIT)}, "worker": {"cpu": ("one", FIT)}},
        want_usage={fr("one", "cpu"): 3000, fr("two", "cpu"): 5000},
    ),
    "multiple specs, fits borrowing": Case(
        [
            PodSet("driver", req(cpu="4", memory="1Gi")),
            PodSet("worker", req(cpu="6", memory="4Gi")),
        ],
        cq(TQ, [("default", {"cpu": ("2", "98", None), "memory": "2Gi"})], cohort=CO),
        FIT,
        {
            "driver": {"cpu": ("default", FIT), "memory": ("default", FIT)},
            "worker": {"cpu": ("default", FIT), "memory": ("default", FIT)},
        },
        want_usage={fr("default", "cpu"): 10_000, fr("default", "memory"): 5 * Gi},
        borrowing=True,
        secondary=cq(SQ, [("default", {"cpu": "198", "memory": "198Gi"})], cohort=CO),
    ),
    "not enough space to borrow": Case(
        [PodSet(MAIN, req(cpu="2"))],
        cq(TQ, [("one", {"cpu": "1"})], cohort=CO),
        NO_FIT,
        want_reasons={
            MAIN: ["insufficient quota for cpu in flavor one, request > maximum capacity (2 > 1)"]
        },
        secondary=cq(SQ, [("one", {"cpu": ("10", None, "0")})], cohort=CO),
        secondary_usage={fr("one", "cpu"): 9000},
    ),
    "past max, but can preempt in ClusterQueue": Case(
        [PodSet(MAIN, req(cpu="2"))],
        cq(TQ, [("one", {"cpu": ("2", "8", None)})], cohort=CO),
        PREEMPT_MODE,
        {MAIN: {"cpu": ("one", PREEMPT_MODE)}},
        {MAIN: ["insufficient unused quota for cpu in flavor one, 1 more needed"]},
        {fr("one", "cpu"): 2000},
        borrowing=True,
        usage={fr("one", "cpu"): 9000},
        secondary=cq(SQ, [("one", {"cpu": "98"})], cohort=CO),
        secondary_usage={fr("one", "cpu"): 9000},
    ),
    "past min, but can preempt in ClusterQueue": Case(
        [PodSet(MAIN, req(cpu="2"))],
        cq(TQ, [("one", {"cpu": "2"})]),
        PREEMPT_MODE,
        {MAIN: {"cpu": ("one", PREEMPT_MODE)}},
        {MAIN: ["insufficient unused quota for cpu in flavor one, 1 more needed"]},
        {fr("one", "cpu"): 2000},
        usage={fr("one", "cpu"): 1000},
    ),
    "past min, but can preempt in cohort and ClusterQueue": Case(
        [PodSet(MAIN, req(cpu="2"))],
        cq(TQ, [("one", {"cpu": "3"})], cohort=CO),
        PREEMPT_MODE,
        {MAIN: {"cpu": ("one", PREEMPT_MODE)}},
        {MAIN: ["insufficient unused quota for cpu in flavor one, 2 more needed"]},
        {fr("one", "cpu"): 2000},
        borrowing=True,
        usage={fr("one", "cpu"): 2000},
        secondary=cq(SQ, [("one", {"cpu": "7"})], cohort=CO),
        secondary_usage={fr("one", "cpu"): 8000},
    ),
    "can only preempt flavors that match affinity": Case(
        [PodSet(MAIN, req(cpu="2"), node_selector={"type": "two"})],
        cq(TQ, [("one", {"cpu": "4"}), ("two", {"cpu": "4"})]),
        PREEMPT_MODE,
        {MAIN: {"cpu": ("two", PREEMPT_MODE)}},
        {
            MAIN: [
                "flavor one doesn't match node affinity",
                "insufficient unused quota for cpu in flavor two, 1 more needed",
            ]
        },
        {fr("two", "cpu"): 2000},
        usage={fr("one", "cpu"): 3000, fr("two", "cpu"): 3000},
    ),
    "each podset requires preemption on a different flavor": Case(
        [
            PodSet("launcher", req(cpu="2")),
            PodSet("workers", req(cpu="10"), count=10, tolerations=[TOLERATE_SPOT]),
        ],
        cq(TQ, [("one", {"cpu": "4"}), ("tainted", {"cpu": "10"})]),
        PREEMPT_MODE,
        {"launcher": {"cpu": ("one", PREEMPT_MODE)}, "workers": {"cpu": ("tainted", PREEMPT_MODE)}},
        {
            "launcher": [
                "insufficient unused quota for cpu in flavor one, 1 more needed",
                "untolerated taint {instance spot NoSchedule <nil>} in flavor tainted",
            ],
            "workers": [
                "insufficient quota for cpu in flavor one, request > maximum capacity (12 > 4)",
                "insufficient unused quota for cpu in flavor tainted, 3 more needed",
            ],
        },
        {fr("one", "cpu"): 2000, fr("tainted", "cpu"): 10_000},
        usage={fr("one", "cpu"): 3000, fr("tainted", "cpu"): 3000},
    ),
    "resource not listed in clusterQueue": Case(
        [PodSet(MAIN, gpu("2"))],
        cq(TQ, [("one", {"cpu": "4"})]),
        NO_FIT,
        want_reasons={MAIN: [f"resource {GPU} unavailable in ClusterQueue"]},
    ),
    "num pods fit": Case(
        [PodSet(MAIN, {"cpu": 3000, "pods": 3}, count=3)],
        cq(TQ, [("default", {"pods": "3", "cpu": "10"})]),
        FIT,
        {MAIN: {"cpu": ("default", FIT), "pods": ("default", FIT)}},
        want_usage={fr("default", "pods"): 3, fr("default", "cpu"): 3000},
    ),
    "num pods don't fit": Case(
        [PodSet(MAIN, {"cpu": 3000, "pods": 3}, count=3)],
        cq(TQ, [("default", {"pods": "2", "cpu": "10"})]),
        NO_FIT,
        want_reasons={
            MAIN: [
                "insufficient quota for pods in flavor default, request > maximum capacity (3 > 2)"
            ]
        },
    ),
    "preempt before try next flavor": Case(
        [PodSet(MAIN, {"cpu": 9000, "pods": 1})],
        cq(
            TQ,
            [("one", {"pods": "10", "cpu": "10"}), ("two", {"pods": "10", "cpu": "10"})],
            fungibility=BORROW_PREEMPT,
        ),
        PREEMPT_MODE,
        {MAIN: {"cpu": ("one", PREEMPT_MODE), "pods": ("one", FIT)}},
        {MAIN: ["insufficient unused quota for cpu in flavor one, 1 more needed"]},
        {fr("one", "cpu"): 9000, fr("one", "pods"): 1},
        usage={fr("one", "cpu"): 2000},
    ),
    "preempt try next flavor": Case(
        [PodSet(MAIN, {"cpu": 9000, "pods": 1})],
        cq(TQ, [("one", {"pods": "10", "cpu": "10"}), ("two", {"pods": "10", "cpu": "10"})]),
        FIT,
        {MAIN: {"cpu": ("two", FIT), "pods": ("two", FIT)}},
        want_usage={fr("two", "cpu"): 9000, fr("two", "pods"): 1},
        usage={fr("one", "cpu"): 2000},
    ),
    "borrow try next flavor, found the first flavor": Case(
        [PodSet(MAIN, {"cpu": 9000, "pods": 1})],
        cq(
            TQ,
            [
                ("one", {"pods": "10", "cpu": ("10", "1", None)}),
                ("two", {"pods": "10", "cpu": "1"}),
            ],
            cohort=CO,
            fungibility=TRY_NEXT,
        ),
        FIT,
        {MAIN: {"cpu": ("one", FIT), "pods": ("one", FIT)}},
        want_usage={fr("one", "cpu"): 9000, fr("one", "pods"): 1},
        borrowing=True,
        usage={fr("one", "cpu"): 2000},
        secondary=cq(SQ, [("one", {"cpu": "1"})], cohort=CO),
    ),
    "borrow try next flavor, found the second flavor": Case(
        [PodSet(MAIN, {"cpu": 9000, "pods": 1})],
        cq(
            TQ,
            [
                ("one", {"pods": "10", "cpu": ("10", "1", None)}),
                ("two", {"pods": "10", "cpu": "10"}),
            ],
            cohort=CO,
            fungibility=TRY_NEXT,
        ),
        FIT,
        {MAIN: {"cpu": ("two", FIT), "pods": ("two", FIT)}},
        want_usage={fr("two", "cpu"): 9000, fr("two", "pods"): 1},
        usage={fr("one", "cpu"): 2000},
        secondary=cq(SQ, [("one", {"cpu": "1"})], cohort=CO),
    ),
    "borrow before try next flavor": Case(
        [PodSet(MAIN, {"cpu": 9000, "pods": 1})],
        cq(
            TQ,
            [
                ("one", {"pods": "10", "cpu": ("10", "1", None)}),
                ("two", {"pods": "10", "cpu": "10"}),
            ],
            cohort=CO,
        ),
        FIT,
        {MAIN: {"cpu": ("one", FIT), "pods": ("one", FIT)}},
        want_usage={fr("one", "cpu"): 9000, fr("one", "pods"): 1},
        borrowing=True,
        usage={fr("one", "cpu"): 2000},
        secondary=cq(SQ, [("one", {"cpu": "1"})], cohort=CO),
    ),
    "when borrowing while preemption is needed for flavor one; WhenCanBorrow=Borrow": Case(
        [PodSet(MAIN, req(cpu="12"))],
        cq(
            TQ,
            [("one", {"cpu": ("0", "12", None)}), ("two", {"cpu": "12"})],
            cohort=CO,
            fungibility=BORROW_PREEMPT,
            preemption=BORROW_WITHIN,
        ),
        PREEMPT_MODE,
        {MAIN: {"cpu": ("one", PREEMPT_MODE)}},
        {MAIN: ["insufficient unused quota for cpu in flavor one, 10 more needed"]},
        {fr("one", "cpu"): 12_000},
        borrowing=True,
        secondary=cq(SQ, [("one", {"cpu": "12"})], cohort=CO),
        secondary_usage={fr("one", "cpu"): 10_000},
    ),
    "when borrowing while preemption is needed for flavor one, no borrowingLimit": Case(
        [PodSet(MAIN, req(cpu="12"))],
        cq(
            TQ,
            [("one", {"cpu": "0"}), ("two", {"cpu": "12"})],
            cohort=CO,
            fungibility=BORROW_PREEMPT,
            preemption=BORROW_WITHIN,
        ),
        PREEMPT_MODE,
        {MAIN: {"cpu": ("one", PREEMPT_MODE)}},
        {MAIN: ["insufficient unused quota for cpu in flavor one, 10 more needed"]},
        {fr("one", "cpu"): 12_000},
        borrowing=True,
        secondary=cq(SQ, [("one", {"cpu": "12"})], cohort=CO),
        secondary_usage={fr("one", "cpu"): 10_000},
    ),
    "when borrowing while preemption is needed for flavor one; WhenCanBorrow=TryNextFlavor": Case(
        [PodSet(MAIN, req(cpu="12"))],
        cq(
            TQ,
            [("one", {"cpu": ("0", "12", None)}), ("two", {"cpu": "12"})],
            cohort=CO,
            fungibility="whenCanBorrow: TryNextFlavor, whenCanPreempt: Preempt",
            preemption=BORROW_WITHIN,
        ),
        FIT,
        {MAIN: {"cpu": ("two", FIT)}},
        want_usage={fr("two", "cpu"): 12_000},
        secondary=cq(SQ, [("one", {"cpu": "12"})], cohort=CO),
    ),
    "when borrowing while preemption is needed, but borrowingLimit exceeds the cohort": Case(
        [PodSet(MAIN, req(cpu="12"))],
        cq(TQ, [("one", {"cpu": ("0", "12", None)})], cohort=CO, preemption=BORROW_WITHIN),
        NO_FIT,
        want_reasons={
            MAIN: ["insufficient quota for cpu in flavor one, request > maximum capacity (12 > 11)"]
        },
        secondary=cq(SQ, [("one", {"cpu": "11"})], cohort=CO),
        secondary_usage={fr("one", "cpu"): 10_000},
    ),
    "lend try next flavor, found the second flavor": Case(
        [PodSet(MAIN, {"cpu": 9000, "pods": 1})],
        cq(
            TQ,
            [
                ("one", {"pods": "10", "cpu": ("10", None, "1")}),
                ("two", {"pods": "10", "cpu": ("10", None, "0")}),
            ],
            cohort=CO,
            fungibility=TRY_NEXT,
        ),
        FIT,
        {MAIN: {"cpu": ("two", FIT), "pods": ("two", FIT)}},
        want_usage={fr("two", "cpu"): 9000, fr("two", "pods"): 1},
        usage={fr("one", "cpu"): 2000},
        secondary=cq(SQ, [("one", {"cpu": "1"})], cohort=CO),
    ),
    "lend try next flavor, found the first flavor": Case(
        [PodSet(MAIN, {"cpu": 9000, "pods": 1})],
        cq(
            TQ,
            [
                ("one", {"pods": "10", "cpu": ("10", None, "1")}),
                ("two", {"pods": "10", "cpu": ("1", None, "0")}),
            ],
            cohort=CO,
            fungibility=TRY_NEXT,
        ),
        FIT,
        {MAIN: {"cpu": ("one", FIT), "pods": ("one", FIT)}},
        want_usage={fr("one", "cpu"): 9000, fr("one", "pods"): 1},
        borrowing=True,
        usage={fr("one", "cpu"): 2000},
        secondary=cq(SQ, [("one", {"cpu": "1"})], cohort=CO),
    ),
    "quota exhausted, but can preempt in cohort and ClusterQueue": Case(
        [PodSet(MAIN, {"cpu": 9000, "pods": 1})],
        cq(TQ, [("one", {"pods": "10", "cpu": ("10", None, "0")})], cohort=CO),
        PREEMPT_MODE,
        {MAIN: {"cpu": ("one", PREEMPT_MODE), "pods": ("one", FIT)}},
        {MAIN: ["insufficient unused quota for cpu in flavor one, 1 more needed"]},
        {fr("one", "cpu"): 9000, fr("one", "pods"): 1},
        borrowing=True,
        usage={fr("one", "cpu"): 2000},
        secondary=cq(SQ, [("one", {"pods": "0", "cpu": "0"})], cohort=CO),
    ),
    "borrowing while preemption is needed, fair sharing, reclaimWithinCohort=Any": Case(
        [PodSet(MAIN, req(cpu="12"))],
        cq(
            TQ,
            [("one", {"cpu": "0"}), ("two", {"cpu": "12"})],
            cohort=CO,
            fungibility=BORROW_PREEMPT,
            preemption="reclaimWithinCohort: Any",
        ),
        PREEMPT_MODE,
        {MAIN: {"cpu": ("one", PREEMPT_MODE)}},
        {MAIN: ["insufficient unused quota for cpu in flavor one, 10 more needed"]},
        {fr("one", "cpu"): 12_000},
        borrowing=True,
        secondary=cq(SQ, [("one", {"cpu": "12"})], cohort=CO),
        secondary_usage={fr("one", "cpu"): 10_000},
        fair_sharing=True,
    ),
    "borrowing while preemption is needed, fair sharing, reclaimWithinCohort=Never": Case(
        [PodSet(MAIN, req(cpu="12"))],
        cq(
            TQ,
            [("one", {"cpu": "0"}), ("two", {"cpu": "12"})],
            cohort=CO,
            fungibility=BORROW_PREEMPT,
            preemption="reclaimWithinCohort: Never",
        ),
        FIT,
        {MAIN: {"cpu": ("two", FIT)}},
        want_usage={fr("two", "cpu"): 12_000},
        secondary=cq(SQ, [("one", {"cpu": "12"})], cohort=CO),
        secondary_usage={fr("one", "cpu"): 10_000},
        fair_sharing=True,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_assign_flavors(name: str) -> None:
    case = CASES[name]
    queues = [case.queue] + ([case.secondary] if case.secondary else [])
    (cohort,) = [c for c in cohorts_of(queues).values() if TQ in c.queues]
    cohort.usage[TQ] = dict(case.usage)
    if case.secondary is not None:
        cohort.usage[SQ] = dict(case.secondary_usage)
    got = assign_flavors(cohort, case.queue, FLAVORS, case.podsets, fair_sharing=case.fair_sharing)
    assert got.mode == case.want_mode
    flavors: dict[str, Any] = {
        ps.name: {r: (f, ps.modes[r]) for r, f in ps.flavors.items()}
        for ps in got.podsets
        if ps.flavors
    }
    assert flavors == case.want
    reasons = {ps.name: sorted(ps.reasons) for ps in got.podsets if ps.reasons}
    assert reasons == {k: sorted(v) for k, v in case.want_reasons.items()}
    if case.want_mode != NO_FIT:
        assert got.usage == case.want_usage
        assert got.borrowing == case.borrowing


def test_message_names_each_rejected_flavor() -> None:
    case = CASES["can only preempt flavors that match affinity"]
    (cohort,) = cohorts_of([case.queue]).values()
    cohort.usage[TQ] = dict(case.usage)
    got = assign_flavors(cohort, case.queue, FLAVORS, case.podsets)
    assert got.message() == (
        "flavor one doesn't match node affinity, "
        "insufficient unused quota for cpu in flavor two, 1 more needed"
    )
    two = CASES["each podset requires preemption on a different flavor"]
    (cohort,) = cohorts_of([two.queue]).values()
    cohort.usage[TQ] = dict(two.usage)
    message = assign_flavors(cohort, two.queue, FLAVORS, two.podsets).message()
    assert message.startswith("couldn't assign flavors to pod set launcher: insufficient")
    assert "; couldn't assign flavors to pod set workers: insufficient quota" in message
    assert got.needs_preemption == frozenset({("two", "cpu")})


def test_one_flavor_per_resource_group() -> None:
    """The issue's defect: memory fits only `big`, so cpu goes to `big` too (never split)."""
    queue = cq(TQ, [("one", {"cpu": "4", "memory": "1Gi"}), ("two", {"cpu": "4", "memory": "8Gi"})])
    (cohort,) = cohorts_of([queue]).values()
    got = assign_flavors(cohort, queue, FLAVORS, [PodSet(MAIN, req(cpu="1", memory="2Gi"))])
    assert got.podsets[0].flavors == {"cpu": "two", "memory": "two"}
