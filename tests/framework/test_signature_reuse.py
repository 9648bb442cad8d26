"""Signature reuse gives exactly the full cycle's answers (scheduling/framework/reuse.py).

Two clusters receive the same random operations (pods of interleaved signatures, deletions,
node updates and additions, preemptions); one framework reuses Filter and Score results per
signature, the other evaluates every node for every pod. Same seed, so every placement, every
count of feasible nodes, every rejected node's status and every random tie-break must agree.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

import numpy as np
import pytest

from scheduling.cache.local import LocalCluster
from scheduling.framework import columns as columns_module
from scheduling.framework.cycle import binding_cycle, scheduling_cycle
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.runtime import Framework, build_frameworks
from scheduling.framework.signature import BestRows, pod_signature
from scheduling.framework.status import Code
from scheduling.plugins.registry import in_tree_registry
from shared.config import default_config
from shared.models import Node, Pod
from shared.store import Change
from tests.builders import PodBuilder, label_selector, make_node, make_pod

ZONES = ("z1", "z2", "z3")


def _node(rng: random.Random, name: str) -> Node:
    builder = (
        make_node(name)
        .capacity(cpu=rng.choice([1, 2, 4, 8]), memory=f"{rng.choice([2, 4, 8])}Gi", pods=6)
        .label("topology.kubernetes.io/zone", rng.choice(ZONES))
        .label("kubernetes.io/hostname", name)
        .label("tier", rng.choice(["a", "b"]))
    )
    if rng.random() < 0.3:
        builder = builder.taint(rng.choice(["spot", "gpu"]), effect="PreferNoSchedule")
    if rng.random() < 0.1:
        builder = builder.taint("dedicated", effect="NoSchedule")
    if rng.random() < 0.3:
        builder = builder.image("registry/app:1", rng.choice([100, 400]) * 1024 * 1024)
    if rng.random() < 0.05:
        builder = builder.unschedulable()
    return builder.obj()


def _template(rng: random.Random, index: int) -> PodBuilder:
    """One signature: the fields every pod made from it shares."""
    builder = make_pod(f"t{index}").container(rng.choice(["pause", "registry/app:1"]))
    if rng.random() < 0.8:
        builder = builder.req(
            cpu=f"{rng.choice([0, 100, 250, 500])}m", memory=f"{rng.choice([0, 128, 512])}Mi"
        )
    kind = rng.random()
    if kind < 0.15:
        builder = builder.node_selector(tier=rng.choice(["a", "b"]))
    elif kind < 0.3:
        builder = builder.preferred_node_affinity(rng.choice([10, 50]), ("tier", "In", ["a"]))
    elif kind < 0.4:
        builder = builder.toleration("spot", effect="PreferNoSchedule")
    elif kind < 0.5:
        builder = builder.host_port(8000 + index)
    elif kind < 0.58:
        # Inter-pod terms: the full path every time, and a shared change for the others.
        builder = builder.label("app", f"a{index}").pod_affinity(
            "kubernetes.io/hostname", label_selector({"app": f"a{index}"}), anti=True
        )
    elif kind < 0.66:
        builder = builder.label("app", f"s{index}").spread_constraint(
            1, "topology.kubernetes.io/zone", "DoNotSchedule", label_selector({"app": f"s{index}"})
        )
    if rng.random() < 0.2:
        builder = builder.priority(rng.choice([10, 1000]))
    return builder


def _frameworks(seed: int, cluster: LocalCluster, reuse: bool) -> Framework:
    config = default_config()
    config.percentage_of_nodes_to_score = 100
    return build_frameworks(config, in_tree_registry(), cluster, seed=seed, reuse=reuse)[
        "default-scheduler"
    ]


def _outcome(framework: Framework, cluster: LocalCluster, pod: Pod) -> tuple[object, ...]:
    """Schedule and bind one pod as the dry run does; what it decided, in comparable form."""
    state = CycleState()
    outcome = scheduling_cycle(framework, state, pod, cluster.nodes, cluster.for_attempt())
    result = outcome.result
    if outcome.status.code == Code.SUCCESS and result is not None:
        host = result.suggested_host
        rejected = {
            n: (s.code, s.reasons, s.plugin) for n, s in result.filtered(cluster.nodes).items()
        }
        status = asyncio.run(
            binding_cycle(framework, state, outcome.pod, host, cluster.for_attempt(), cluster.nodes)
        )
        assert status.is_success()
        return ("bound", host, result.evaluated_nodes, result.feasible_nodes, rejected)
    for victim in outcome.victims:
        cluster.delete_pod(victim)
    if outcome.nominating:
        node = outcome.nominated_node or ""
        cluster.nominate(replace(pod, status=replace(pod.status, nominated_node_name=node)), node)
    victims = sorted(v.metadata.name for v in outcome.victims)
    return ("unschedulable", outcome.message, outcome.nominated_node, victims)


def _bound_elsewhere(cluster: LocalCluster, pod: Pod, node: str) -> None:
    """`pod` bound to `node` by someone else, as a worker's view learns it from the change
    stream (whether it fits there is not this view's business: the binder decided)."""
    bound = replace(pod, spec=replace(pod.spec, node_name=node))
    version = cluster.resource_version + 1
    cluster.apply([Change(version, "put", "Pod", pod.key, pod.metadata.uid, bound, node)])
    cluster.bound[pod.metadata.uid] = bound


def _run(seed: int, steps: int) -> tuple[list[tuple[object, ...]], Framework]:
    """The same random run on a reusing and a non-reusing framework; both outcome lists."""
    rng = random.Random(seed)
    nodes = [_node(rng, f"n{i}") for i in range(rng.randint(8, 40))]
    templates = [_template(rng, i) for i in range(rng.randint(3, 9))]
    clusters = [LocalCluster(nodes), LocalCluster(nodes)]
    frameworks = [_frameworks(seed, clusters[0], True), _frameworks(seed, clusters[1], False)]
    outcomes: list[tuple[object, ...]] = []
    for step in range(steps):
        roll = rng.random()
        if roll < 0.08 and clusters[0].bound:
            uid = rng.choice(sorted(clusters[0].bound))
            for cluster in clusters:
                cluster.delete_pod(cluster.bound.pop(uid))
            continue
        if roll < 0.11:
            node = _node(rng, rng.choice(nodes).metadata.name if rng.random() < 0.7 else f"x{step}")
            for cluster in clusters:
                cluster.columns.update_node(node)
            continue
        template = rng.choice(templates)
        pod = template.obj()
        pod = replace(pod, metadata=replace(pod.metadata, name=f"p{step}", uid=f"uid-p{step}"))
        if roll < 0.2:  # placed by another worker: its binding comes from the stream
            host = rng.choice(nodes).metadata.name
            for cluster in clusters:
                _bound_elsewhere(cluster, pod, host)
            continue
        answers = [_outcome(f, c, pod) for f, c in zip(frameworks, clusters, strict=True)]
        assert answers[0] == answers[1], (
            f"seed {seed}, step {step}, pod from {template.obj().metadata.name}"
        )
        outcomes.append(answers[0])
    return outcomes, frameworks[0]


@pytest.mark.parametrize("seed", range(40))
def test_reuse_places_every_pod_as_the_full_cycle(seed: int) -> None:
    outcomes, reusing = _run(seed, 160)
    signatures = reusing.signatures
    assert signatures is not None
    assert any(o[0] == "bound" for o in outcomes)
    # The run exercised reuse (not only the full path it falls back to).
    assert signatures.stats.hits > 0, signatures.stats.fallbacks


def test_reuse_holds_across_interleaved_signatures() -> None:
    """A, B, A, B...: each signature's entry is refreshed by the other's bindings, not rebuilt."""
    nodes = [make_node(f"n{i}").capacity(cpu=4, memory="8Gi", pods=20).obj() for i in range(50)]
    small = make_pod("a").req(cpu="100m", memory="100Mi")
    large = make_pod("b").req(cpu="700m", memory="1Gi")
    clusters = [LocalCluster(nodes), LocalCluster(nodes)]
    frameworks = [_frameworks(7, clusters[0], True), _frameworks(7, clusters[1], False)]
    for i in range(300):
        pod = (small if i % 2 else large).name(f"p{i}").uid(f"u{i}").obj()
        answers = [_outcome(f, c, pod) for f, c in zip(frameworks, clusters, strict=True)]
        assert answers[0] == answers[1], i
    signatures = frameworks[0].signatures
    assert signatures is not None
    assert signatures.stats.builds == 2
    assert signatures.stats.hits == 298


def test_like_pods_another_worker_placed_update_rows_from_the_look_ahead() -> None:
    """Two workers share a batch of like pods: this one places every other pod, the other
    one's bindings arrive from the stream. A row that gained one pod of the signature,
    whoever placed it, is brought up to date from the entry's look-ahead (no plugin runs
    for it), and every answer is still the full cycle's."""
    nodes = [make_node(f"n{i}").capacity(cpu=8, memory="16Gi", pods=40).obj() for i in range(400)]
    clusters = [LocalCluster(nodes), LocalCluster(nodes)]
    frameworks = [_frameworks(8, clusters[0], True), _frameworks(8, clusters[1], False)]
    rng = random.Random(8)
    for i in range(200):
        pod = make_pod(f"p{i}").uid(f"u{i}").req(cpu="100m", memory="100Mi").obj()
        if i % 2:
            node = f"n{rng.randrange(400)}"
            for cluster in clusters:
                _bound_elsewhere(cluster, pod, node)
            continue
        answers = [_outcome(f, c, pod) for f, c in zip(frameworks, clusters, strict=True)]
        assert answers[0] == answers[1], i
        assert answers[0][0] == "bound"
    signatures = frameworks[0].signatures
    assert signatures is not None
    assert (signatures.stats.builds, signatures.stats.hits) == (1, 99)
    # Each pod after the first changes one row between two of ours, promoted from the
    # look-ahead unless that row's is not recomputed yet (LOOKAHEAD_BATCH at a time): ours
    # and the other worker's alike. Only ours were, at most 100.
    assert signatures.stats.rows_promoted >= 150, signatures.stats


def test_a_signature_whose_rows_churn_between_its_pods_takes_the_full_cycle() -> None:
    """Quota admission's shape: 19 nodes, 30 signatures taking turns, so most rows change
    between two pods of one signature. Those pods take the full cycle (an entry would
    re-evaluate most rows, and rebuilding it cost 2.7x the full cycle); a signature whose
    pods come close together again gets an entry and its hits. Same answers as without
    reuse throughout."""
    nodes = [make_node(f"n{i}").capacity(cpu=64, memory="64Gi", pods=500).obj() for i in range(19)]
    templates = [make_pod(f"t{q}").req(cpu="1").label("queue", f"q{q}") for q in range(30)]
    clusters = [LocalCluster(nodes), LocalCluster(nodes)]
    frameworks = [_frameworks(5, clusters[0], True), _frameworks(5, clusters[1], False)]
    signatures = frameworks[0].signatures
    assert signatures is not None

    def place(builder: PodBuilder, name: str) -> None:
        pod = builder.name(name).uid(name).obj()
        answers = [_outcome(f, c, pod) for f, c in zip(frameworks, clusters, strict=True)]
        assert answers[0] == answers[1], name
        assert answers[0][0] == "bound"

    for i in range(10):  # every signature in turn: ~19 rows change between its pods
        for q, template in enumerate(templates):
            place(template, f"p{i}-{q}")
    churned = signatures.stats.fallbacks["rows churned since the signature's last pod"]
    assert churned >= 9 * 30 - 30  # the first pod of each builds; then mostly cold
    assert signatures.stats.builds <= 30 + 30  # not one per pod (300 before)
    builds, hits = signatures.stats.builds, signatures.stats.hits
    # One signature's pods back to back: the first still finds its rows churned since its
    # last pod; the second finds one row changed and builds; the next three are hits.
    for i in range(5):
        place(templates[0], f"again{i}")
    assert signatures.stats.fallbacks["rows churned since the signature's last pod"] == churned + 1
    assert signatures.stats.builds == builds + 1
    assert signatures.stats.hits == hits + 3


def test_a_signature_whose_pods_come_in_pairs_is_rebuilt_not_cold() -> None:
    """The same 19 nodes and 30 signatures, but each signature's pods two at a time (the
    dispatcher hands a worker a LocalQueue's pods together): the rows churn between pairs,
    and an entry that served a pod since it was built is rebuilt for the next pair, not
    sent cold (the first of each pair would take the full cycle and the second build)."""
    nodes = [make_node(f"n{i}").capacity(cpu=64, memory="64Gi", pods=500).obj() for i in range(19)]
    templates = [make_pod(f"t{q}").req(cpu="1").label("queue", f"q{q}") for q in range(30)]
    clusters = [LocalCluster(nodes), LocalCluster(nodes)]
    frameworks = [_frameworks(6, clusters[0], True), _frameworks(6, clusters[1], False)]
    for i in range(5):
        for q, template in enumerate(templates):
            for k in (0, 1):
                pod = template.name(f"p{i}-{q}-{k}").uid(f"p{i}-{q}-{k}").obj()
                answers = [_outcome(f, c, pod) for f, c in zip(frameworks, clusters, strict=True)]
                assert answers[0] == answers[1], pod.metadata.name
    signatures = frameworks[0].signatures
    assert signatures is not None
    assert signatures.stats.fallbacks == {}
    assert (signatures.stats.builds, signatures.stats.hits) == (5 * 30, 5 * 30)


def test_plugins_that_read_other_nodes_run_in_full_beside_the_kept_results() -> None:
    zone = "topology.kubernetes.io/zone"
    nodes = [
        make_node(f"n{i}").capacity(cpu=4, memory="8Gi", pods=20).label(zone, ZONES[i % 3]).obj()
        for i in range(60)
    ]
    # A running pod whose anti-affinity matches app=web keeps InterPodAffinity from skipping
    # for web pods, though they have no terms of their own.
    guard = (
        make_pod("guard")
        .uid("guard")
        .node("n0")
        .pod_affinity(zone, label_selector({"app": "web"}), anti=True)
        .obj()
    )
    clusters = [LocalCluster(nodes, [guard]), LocalCluster(nodes, [guard])]
    frameworks = [_frameworks(1, clusters[0], True), _frameworks(1, clusters[1], False)]
    spread = (
        make_pod("s")
        .label("app", "s")
        .spread_constraint(1, zone, "DoNotSchedule", label_selector({"app": "s"}))
    )
    web = make_pod("w").label("app", "web").req(cpu="100m")
    plain = make_pod("p").req(cpu="200m")
    answers: list[list[tuple[object, ...]]] = [[], []]
    for i in range(12):
        for builder in (spread, web, plain):
            pod = (
                builder.name(f"{builder.obj().metadata.name[0]}{i}")
                .uid(f"u{i}{builder.obj().metadata.name[0]}")
                .obj()
            )
            for k in (0, 1):
                answers[k].append(_outcome(frameworks[k], clusters[k], pod))
    assert answers[0] == answers[1]
    # Web pods avoid the guard's zone (z1: n0, n3, ...); spread pods keep to the zones evenly.
    hosts = {a[1] for a, pod_kind in zip(answers[0], "swp" * 12, strict=True) if pod_kind == "w"}
    assert all(int(str(host)[1:]) % 3 != 0 for host in hosts)
    signatures = frameworks[0].signatures
    assert signatures is not None
    assert signatures.stats.builds == 3
    assert signatures.stats.fallbacks == {}
    # spread and web pods: mixed entries (their other plugins ran); plain pods: pure hits.
    assert signatures.stats.mixed == 24
    assert signatures.stats.hits == 33


def test_signature_ignores_identity_and_sees_requests() -> None:
    a = make_pod("a").uid("1").req(cpu="1").obj()
    b = make_pod("b").uid("2").req(cpu="1").obj()
    c = make_pod("c").uid("3").req(cpu="2").obj()
    d = make_pod("d").uid("4").req(cpu="1").label("app", "x").obj()
    assert pod_signature(a) == pod_signature(b)
    assert pod_signature(a) != pod_signature(c)
    assert pod_signature(a) != pod_signature(d)
    assert pod_signature(make_pod("n").nominated_node_name("n1").obj()) is None


def test_best_rows_keeps_the_top_in_row_order() -> None:
    best = BestRows(np.array([0, 1, 2, 3], dtype=np.intp), np.array([5, 9, 9, 1], dtype=np.int64))
    assert list(best.top()) == [1, 2]
    best.remove(1, 9)
    best.remove(2, 9)
    assert list(best.top()) == [0]
    best.add(3, 7)  # a second entry for row 3: callers remove before they add
    best.remove(3, 1)
    assert list(best.top()) == [3]
    best.add(2, 7)
    assert list(best.top()) == [2, 3]
    assert best.size == 3


@pytest.mark.parametrize("seed", range(100, 110))
def test_reuse_survives_a_trimmed_row_log(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries that fell behind a trimmed log are rebuilt, not refreshed from a gap."""
    monkeypatch.setattr(columns_module, "_MIN_ROW_LOG", 4)
    outcomes, reusing = _run(seed, 120)
    assert reusing.signatures is not None
    assert reusing.signatures.stats.hits > 0
    assert any(o[0] == "bound" for o in outcomes)


def test_a_plugin_that_raises_gives_the_full_cycles_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in a plugin must not escape the cache: it gives up on the pod (and drops the
    entry), and the full cycle reports the plugin's error, as without reuse."""
    nodes = [make_node(f"n{i}").capacity(cpu=4, memory="8Gi", pods=20).obj() for i in range(5)]
    cluster = LocalCluster(nodes)
    framework = _frameworks(3, cluster, True)
    first = _outcome(framework, cluster, make_pod("a").uid("a").req(cpu="100m").obj())
    assert first[0] == "bound"
    plugin = framework.plugins["NodeResourcesBalancedAllocation"]

    def broken(*_: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(type(plugin), "score", broken)
    answer = _outcome(framework, cluster, make_pod("b").uid("b").req(cpu="300m").obj())
    assert answer[0] == "unschedulable"
    assert "NodeResourcesBalancedAllocation" in str(answer[1])
    assert "boom" in str(answer[1])
    signatures = framework.signatures
    assert signatures is not None
    assert signatures.stats.fallbacks == {"a plugin raised RuntimeError": 1}
