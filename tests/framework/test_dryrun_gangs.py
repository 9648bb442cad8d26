"""`berth schedule` with gangs (Coscheduling, on in berth's default profile): a gang that
reaches minMember binds whole; one that cannot is Unschedulable, every member's message naming
Coscheduling and the PodGroup; a profile without Coscheduling schedules gang pods as ordinary
pods."""

from __future__ import annotations

import pytest

from scheduling.dryrun import SCHEDULED, UNSCHEDULABLE, DryRunReport, run_dry
from shared.config import load_config
from shared.models import POD_GROUP_LABEL, Pod
from shared.models.manifest import Manifests
from tests.builders import make_node, make_pod, make_pod_group, make_priority_class

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def member(name: str, group: str, cpu: str) -> Pod:
    return make_pod(name).label(POD_GROUP_LABEL, group).req(cpu=cpu).obj()


def by_pod(report: DryRunReport) -> dict[str, tuple[str, str | None]]:
    return {p.pod: (p.status, p.node) for p in report.pods}


def messages(report: DryRunReport) -> dict[str, str]:
    return {p.pod: p.message for p in report.pods}


def workload() -> Manifests:
    """Two nodes of 4 CPUs. Gang "fits" (3 x 1 CPU) fits; gang "big" (3 x 2 CPU) finds room for
    two members only; gang "short" has 1 pod for minMember 2; "lost" has no PodGroup."""
    nodes = [make_node(f"n{i}").capacity(cpu="4", pods=10).obj() for i in range(2)]
    pods = [
        *(member(f"fits-{i}", "fits", "1") for i in range(3)),
        *(member(f"big-{i}", "big", "2") for i in range(3)),
        member("short-0", "short", "100m"),
        member("lost-0", "lost", "100m"),
    ]
    groups = [
        make_pod_group("fits", 3),
        make_pod_group("big", 3, schedule_timeout_seconds=30),
        make_pod_group("short", 2),
    ]
    return Manifests(nodes=nodes, pods=pods, pod_groups=groups)


def test_a_gang_binds_whole_or_not_at_all() -> None:
    report = run_dry(workload(), seed=1)
    statuses = by_pod(report)
    assert all(statuses[f"default/fits-{i}"][0] == SCHEDULED for i in range(3))
    for name in ("big-0", "big-1", "big-2", "short-0", "lost-0"):
        assert statuses[f"default/{name}"] == (UNSCHEDULABLE, None), name
    text = messages(report)
    note = "Coscheduling: PodGroup default/big did not reach minMember 3"
    # Two members held their nodes at Permit and timed out (as upstream, after the wait).
    timed_out = "rejected due to timeout after waiting 30s at plugin Coscheduling"
    assert sum(timed_out in text[f"default/big-{i}"] for i in range(3)) == 2
    assert all(text[f"default/big-{i}"].endswith(note) for i in range(3))
    assert (
        "cannot find enough sibling pods, current pods number: 1, minMember of group: 2"
        in (text["default/short-0"])
    )
    assert (
        "Coscheduling: PodGroup default/short did not reach minMember 2" in text["default/short-0"]
    )
    assert "PodGroup default/lost not found" in text["default/lost-0"]


def test_a_gang_that_cannot_form_does_not_preempt() -> None:
    """Too few pods is UnschedulableAndUnresolvable at PreFilter: no victim is evicted for it."""
    nodes = [make_node("n0").capacity(cpu="4", pods=10).obj()]
    low = make_pod("low").priority_class("low").req(cpu="4").node("n0").obj()
    gang = make_pod("g-0").priority_class("high").label(POD_GROUP_LABEL, "g").req(cpu="2").obj()
    manifests = Manifests(
        nodes=nodes,
        pods=[low, gang],
        pod_groups=[make_pod_group("g", 2)],
        priority_classes=[make_priority_class("low", 1), make_priority_class("high", 1000)],
    )
    (result,) = run_dry(manifests, seed=1).pods
    assert (result.status, result.victims) == (UNSCHEDULABLE, [])
    assert "Preemption is not helpful for scheduling" in result.message


@pytest.mark.parametrize(
    "plugins_yaml",
    [
        pytest.param("{multiPoint: {disabled: [{name: Coscheduling}]}}", id="multiPoint"),
        pytest.param("{permit: {disabled: [{name: Coscheduling}]}}", id="permit"),
    ],
)
def test_without_coscheduling_gang_pods_are_ordinary_pods(plugins_yaml: str) -> None:
    config = load_config(f"{HEADER}profiles:\n- plugins: {plugins_yaml}\n")
    report = run_dry(workload(), config, seed=1)
    statuses = by_pod(report)
    placed = [pod for pod, (status, _) in statuses.items() if status == SCHEDULED]
    # 3 x 1 CPU + 2 x 2 CPU + the two small pods fill what 8 CPUs allow; one big pod is left.
    assert len(placed) == 7
    (left,) = [pod for pod in statuses if pod not in placed]
    assert left.startswith("default/big-")
    assert "Coscheduling" not in messages(report)[left]
    assert "Insufficient cpu" in messages(report)[left]
