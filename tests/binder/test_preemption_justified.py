"""A preemption proposal is evidence, never an order (issue 19): the binder evicts only when its
own view of the cluster calls for it. Each case is a forged or stale proposal that passes the
older checks (victims on the node, of lower priority, preemptor pending) and must now be
refused, with nothing evicted; the last is a justified one that goes through."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from shared.models import Pod
from tests.binder.conftest import Harness, proposal
from tests.builders import make_node, make_pod


def node(name: str, cpu: str = "4"):
    return make_node(name).capacity(cpu=cpu, memory="16Gi", pods=110).obj()


@dataclass(frozen=True)
class Case:
    name: str
    nodes: tuple[tuple[str, str], ...]
    """(node, cpu)"""
    running: tuple[tuple[str, str, int, str], ...]
    """(pod, cpu, priority, node)"""
    preemptor_cpu: str
    victims: tuple[str, ...]
    refusal: str
    """A part of the refusal's text; "" when the preemption is justified."""


CASES = [
    Case(
        "fits-another-node",
        (("n1", "4"), ("n2", "4")),
        (("low", "3", 0, "n1"),),
        "3",
        ("low",),
        "fits node n2 without preemption",
    ),
    Case(
        "fits-the-node-itself",
        (("n1", "4"),),
        (("low", "1", 0, "n1"),),
        "2",
        ("low",),
        "fits node n1 without preemption",
    ),
    Case(
        "more-victims-than-needed",
        (("n1", "4"),),
        (("a", "2", 0, "n1"), ("b", "2", 0, "n1")),
        "2",
        ("a", "b"),
        "is not needed",
    ),
    Case(
        "victims-do-not-make-room",
        (("n1", "4"),),
        (("low", "1", 0, "n1"), ("high", "3", 500, "n1")),
        "4",
        ("low",),
        "does not fit n1 even without the victims",
    ),
    Case(
        "justified",
        (("n1", "4"),),
        (("a", "2", 0, "n1"), ("b", "2", 0, "n1")),
        "2",
        ("a",),
        "",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_preemption_must_be_justified_by_the_binders_view(harness: Harness, case: Case):
    running: dict[str, Pod] = {
        name: make_pod(name).priority(priority).req(cpu=cpu).node(where).obj()
        for name, cpu, priority, where in case.running
    }
    preemptor = make_pod("vip").priority(100).req(cpu=case.preemptor_cpu).obj()
    await harness.store.apply(
        [*(node(n, cpu) for n, cpu in case.nodes), *running.values(), preemptor]
    )
    victims = tuple(running[name] for name in case.victims)
    await harness.run(proposal(preemptor, "n1", victims=victims, message="0/1 nodes"))

    left = {name for name in running if await harness.store.get_pod("default", name)}
    (outcome,) = harness.recorder.final()
    if case.refusal:
        assert left == set(running), "a victim was evicted"
        assert outcome.result == "error"
        assert case.refusal in outcome.message
        ((_, reason),) = harness.recorder.refusals
        assert case.refusal in reason
        assert harness.binder.stats["unjustified"] == 1
    else:
        assert left == set(running) - set(case.victims)
        assert (outcome.result, outcome.nominated_node_name) == ("unschedulable", "n1")
        assert harness.recorder.refusals == []
