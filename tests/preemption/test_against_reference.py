"""Random clusters: the vectorised dry run, the node-by-node dry run and a plain per-node
reference written straight from upstream's algorithm must make the same decision."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from scheduling.framework.status import Code
from scheduling.plugins.defaultpreemption import DefaultPreemption, evaluator
from scheduling.plugins.defaultpreemption.pdb import split_by_pdb_violation
from shared.models import Node, Pod, PodDisruptionBudget, priority_of
from shared.models.resources import pod_requests
from tests.builders import label_selector, make_pdb, make_pod
from tests.preemption.fakes import (
    FitFilter,
    NoopExtension,
    all_unschedulable,
    columns,
    environment,
    run_pre_filters,
)
from tests.preemption.tables import node

NOW = 1000.0
PRIORITIES = (-5, 0, 5, 10, 20)


@dataclass
class World:
    nodes: list[Node]
    pods: list[Pod]
    nominated: list[Pod]
    pdbs: list[PodDisruptionBudget]
    preemptor: Pod
    offset: int
    min_absolute: int


def world(seed: int) -> World:
    rng = random.Random(seed)
    nodes = [node(f"n{i:02d}", {"cpu": "4", "memory": "8Gi", "pods": "6"}) for i in range(24)]
    pods: list[Pod] = []
    for n in nodes:
        for j in range(rng.randint(0, 6)):
            b = (
                make_pod(f"{n.metadata.name}-{j}")
                .uid(f"{n.metadata.name}-{j}")
                .node(n.metadata.name)
                .priority(rng.choice(PRIORITIES))
                .req(cpu=f"{rng.choice((100, 300, 500, 900, 1500))}m", memory="1Gi")
            )
            if rng.random() < 0.5:
                b = b.label("app", rng.choice("abc"))
            if rng.random() < 0.8:
                b = b.start_time(float(rng.randint(0, 50)))
            pods.append(b.obj())
    nominated = [
        make_pod(f"nom{k}")
        .uid(f"nom{k}")
        .priority(rng.choice(PRIORITIES))
        .nominated_node_name(rng.choice(nodes).metadata.name)
        .req(cpu=f"{rng.choice((200, 800))}m")
        .obj()
        for k in range(rng.randint(0, 4))
    ]
    pdbs = [
        make_pdb(f"pdb-{app}", label_selector({"app": app}), disruptions_allowed=rng.randint(0, 2))
        for app in "abc"
        if rng.random() < 0.6
    ]
    preemptor = (
        make_pod("p").uid("p").priority(10).req(cpu=f"{rng.choice((500, 1500, 2500, 3500))}m").obj()
    )
    return World(nodes, pods, nominated, pdbs, preemptor, rng.randrange(24), rng.choice((1, 3)))


# --------------------------------------------------------------------------- reference
def fits(node_: Node, present: Sequence[Pod], pod: Pod) -> bool:
    allocatable = node_.status.allocatable
    if len(present) + 1 > allocatable.get("pods", 0):
        return False
    for name, value in pod_requests(pod).items():
        if value <= 0:
            continue
        used = sum(pod_requests(p).get(name, 0) for p in present)
        if allocatable.get(name, 0) - used < value:
            return False
    return True


def fits_with_nominated(node_: Node, present: list[Pod], pod: Pod, nominated: list[Pod]) -> bool:
    ge = [p for p in nominated if priority_of(p) >= priority_of(pod)]
    if not fits(node_, present + ge, pod):
        return False
    return not ge or fits(node_, present, pod)


def importance(p: Pod) -> tuple[int, float]:
    start = p.status.start_time
    return (-priority_of(p), NOW if start is None else start)


def reference(w: World) -> tuple[str, list[str]] | None:
    """Upstream DryRunPreemption + SelectCandidate, sequential, per node, with Python lists."""
    names = [n.metadata.name for n in w.nodes]
    on = {name: [p for p in w.pods if p.spec.node_name == name] for name in names}
    nominated = {
        name: [p for p in w.nominated if p.status.nominated_node_name == name] for name in names
    }
    priority = priority_of(w.preemptor)
    count = len(names)
    wanted = min(max(count * 10 // 100, w.min_absolute), count)
    fine: list[tuple[str, list[Pod], int]] = []
    bad: list[tuple[str, list[Pod], int]] = []
    for i in range(count):
        name = names[(w.offset + i) % count]
        node_ = w.nodes[(w.offset + i) % count]
        potential = [p for p in on[name] if priority_of(p) < priority]
        if not potential:
            continue
        remaining = [p for p in on[name] if priority_of(p) >= priority]
        if not fits_with_nominated(node_, remaining, w.preemptor, nominated[name]):
            continue
        potential.sort(key=importance)
        violating, non_violating = split_by_pdb_violation(potential, w.pdbs)
        victims: list[Pod] = []
        violations = 0
        for p in violating + non_violating:
            if fits_with_nominated(node_, [*remaining, p], w.preemptor, nominated[name]):
                remaining.append(p)
            else:
                victims.append(p)
                violations += p in violating
        if not victims:
            continue
        victims.sort(key=importance)
        target = bad if violations else fine
        if len(target) < wanted:
            target.append((name, victims, violations))
        if fine and len(fine) + len(bad) >= wanted:
            break
    candidates = fine + bad
    if not candidates:
        return None

    def start_of_top(victims: list[Pod]) -> float:
        top = max(priority_of(v) for v in victims)
        return min(importance(v)[1] for v in victims if priority_of(v) == top)

    scores: list[Callable[[tuple[str, list[Pod], int]], float]] = [
        lambda c: -c[2],
        lambda c: -max(priority_of(v) for v in c[1]),
        lambda c: -sum(priority_of(v) + 2**31 for v in c[1]),
        lambda c: -len(c[1]),
        lambda c: start_of_top(c[1]),
    ]
    for score in scores:
        best = max(score(c) for c in candidates)
        candidates = [c for c in candidates if score(c) == best]
        if len(candidates) == 1:
            break
    name, victims, _ = candidates[0]
    return name, sorted(v.metadata.name for v in victims)


def berth(
    w: World, node_by_node: bool, *, every_node: bool = False
) -> tuple[str, list[str]] | None:
    cols = columns(w.nodes, w.pods)
    plugins: list[object] = [FitFilter()]
    if node_by_node:
        plugins.append(NoopExtension())
    env = environment(cols, plugins, pdbs=w.pdbs, pods=w.nominated)
    plugin = DefaultPreemption(offset=lambda n: w.offset, environment=lambda _: env)
    plugin.args.min_candidate_nodes_absolute = w.min_absolute
    plugin.evaluator.min_absolute = w.min_absolute
    plugin.evaluator.clock = lambda: NOW
    plugin.evaluator.skip_hopeless_nodes = not every_node
    state = run_pre_filters(plugins, w.preemptor, cols)
    result, status = plugin.post_filter(state, w.preemptor, cols, all_unschedulable(cols))
    if status.code != Code.SUCCESS:
        return None
    assert result is not None
    assert result.nominated_node is not None
    return result.nominated_node, sorted(v.metadata.name for v in result.victims)


@pytest.mark.parametrize("seed", range(150))
def test_same_decision_as_reference(seed: int) -> None:
    w = world(seed)
    expected = reference(w)
    assert berth(w, node_by_node=False) == expected
    assert berth(w, node_by_node=True) == expected
    assert berth(w, node_by_node=True, every_node=True) == expected


@pytest.mark.parametrize("seed", range(0, 150, 3))
def test_small_chunks_make_the_same_decision(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Nodes evaluated a few at a time (4, 8, 16, ...) in rotation order.
    monkeypatch.setattr(evaluator, "MIN_CHUNK", 1)
    w = world(seed)
    assert berth(w, node_by_node=False) == reference(w)
