"""`berth schedule` dry-run semantics (issue #2 section 6)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduling.dryrun import (
    GATED,
    SCHEDULED,
    SKIPPED,
    UNSCHEDULABLE,
    DryRunReport,
    run_dry,
    run_dry_async,
    to_json,
    to_table,
)
from shared.config import (
    ConfigError,
    PluginRef,
    Plugins,
    PluginSet,
    Profile,
    SchedulerConfiguration,
)
from shared.models import Node
from shared.models.manifest import ManifestError, Manifests, load_manifest_text
from tests.builders import make_node, make_pod, make_priority_class


def node(name: str, cpu: str = "4", pods: int = 110, **labels: str) -> Node:
    return make_node(name).capacity(cpu=cpu, memory="16Gi", pods=pods).labels(labels).obj()


def by_pod(report: DryRunReport) -> dict[str, tuple[str, str | None]]:
    return {p.pod: (p.status, p.node) for p in report.pods}


def test_order_priority_first_ties_keep_input_order_output_in_input_order():
    manifests = Manifests(
        nodes=[node("n1", pods=2)],
        pods=[
            make_pod("low").req(cpu="100m").obj(),
            make_pod("first-high").priority_class("high").req(cpu="100m").obj(),
            make_pod("second-high").priority_class("high").req(cpu="100m").obj(),
        ],
        priority_classes=[make_priority_class("high", 1000)],
    )
    report = run_dry(manifests, seed=1)
    assert [p.pod for p in report.pods] == [
        "default/low",
        "default/first-high",
        "default/second-high",
    ]
    assert by_pod(report) == {
        "default/low": (UNSCHEDULABLE, None),
        "default/first-high": (SCHEDULED, "n1"),
        "default/second-high": (SCHEDULED, "n1"),
    }
    low = report.pods[0]
    assert low.message.startswith("0/1 nodes are available: 1 Too many pods.")
    assert low.filtered == {"n1": low.filtered["n1"]}
    assert (low.filtered["n1"].plugin, low.filtered["n1"].reasons) == (
        "NodeResourcesFit",
        ["Too many pods"],
    )
    assert report.pods[1].message == "Successfully assigned default/first-high to n1"


def test_equal_priority_keeps_input_order():
    manifests = Manifests(
        nodes=[node("n1", pods=1)],
        pods=[make_pod(name).obj() for name in ("c", "a", "b")],
    )
    report = run_dry(manifests, seed=1)
    assert [(p.pod, p.status) for p in report.pods] == [
        ("default/c", SCHEDULED),
        ("default/a", UNSCHEDULABLE),
        ("default/b", UNSCHEDULABLE),
    ]


def test_running_pods_count_gated_and_skipped_pods_are_reported():
    manifests = Manifests(
        nodes=[node("n1", cpu="2"), node("n2", cpu="2")],
        pods=[
            make_pod("running").req(cpu="2").node("n1").obj(),
            make_pod("gated").scheduling_gates("example.com/wait").obj(),
            make_pod("other").scheduler_name("volcano").obj(),
            make_pod("web").req(cpu="1").obj(),
            make_pod("deleting").terminating().obj(),
        ],
    )
    report = run_dry(manifests, seed=1)
    assert [p.pod for p in report.pods] == [
        "default/gated",
        "default/other",
        "default/web",
        "default/deleting",
    ]
    results = {p.pod: p for p in report.pods}
    assert (results["default/gated"].status, results["default/gated"].message) == (
        GATED,
        "waiting for scheduling gates: [example.com/wait]",
    )
    assert (results["default/other"].status, results["default/other"].message) == (
        SKIPPED,
        'profile not found for scheduler name "volcano"',
    )
    assert results["default/deleting"].status == SKIPPED
    # n1 is full with the running pod.
    assert (results["default/web"].status, results["default/web"].node) == (SCHEDULED, "n2")
    assert results["default/web"].filtered["n1"].reasons == ["Insufficient cpu"]


def test_a_bound_pod_is_seen_by_later_cycles():
    manifests = Manifests(
        nodes=[node("n1", cpu="1"), node("n2", cpu="1")],
        pods=[make_pod(f"p{i}").req(cpu="1").obj() for i in range(3)],
    )
    report = run_dry(manifests, seed=5)
    placed = [p.node for p in report.pods if p.status == SCHEDULED]
    assert sorted(placed) == ["n1", "n2"]  # type: ignore[type-var]
    assert report.pods[2].status == UNSCHEDULABLE
    assert report.pods[2].message == "0/2 nodes are available: 2 Insufficient cpu. " + (
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )


AFFINITY_MANIFESTS = """
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {capacity: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
status: {capacity: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 100
---
apiVersion: v1
kind: Pod
metadata: {name: follower}
spec:
  priorityClassName: high
  containers: [{name: c, image: busybox}]
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: leader}}
        topologyKey: kubernetes.io/hostname
---
apiVersion: v1
kind: Pod
metadata: {name: leader, labels: {app: leader}}
spec:
  containers: [{name: c, image: busybox}]
"""


def test_another_pass_runs_while_something_was_bound():
    report = run_dry(load_manifest_text(AFFINITY_MANIFESTS), seed=1)
    results = {p.pod: p for p in report.pods}
    # Pass 1: the follower (higher priority) finds no leader; the leader binds.
    # Pass 2: the follower joins the leader's node.
    assert report.passes == 2
    assert results["default/follower"].status == SCHEDULED
    assert results["default/follower"].node == results["default/leader"].node


def test_passes_stop_when_nothing_was_bound():
    manifests = Manifests(nodes=[node("n1", cpu="1")], pods=[make_pod("big").req(cpu="2").obj()])
    report = run_dry(manifests)
    assert report.passes == 1
    assert report.pods[0].status == UNSCHEDULABLE


def test_preemption_deletes_victims_and_the_pod_lands_next_pass():
    manifests = Manifests(
        nodes=[node("n1", cpu="1")],
        pods=[
            make_pod("victim").priority_class("low").req(cpu="1").node("n1").obj(),
            make_pod("vip").priority_class("high").req(cpu="1").obj(),
        ],
        priority_classes=[make_priority_class("low", 1), make_priority_class("high", 1000)],
    )
    report = run_dry(manifests, seed=1)
    (vip,) = report.pods
    assert (vip.status, vip.node, vip.nominated_node) == (SCHEDULED, "n1", "n1")
    assert vip.victims == ["default/victim"]
    assert report.passes == 2


def test_explain_scores_and_json_shape():
    manifests = Manifests(
        nodes=[node("n1"), node("n2", cpu="8")],
        pods=[make_pod("p").req(cpu="1").obj()],
    )
    plain: Any = json.loads(json.dumps(to_json(run_dry(manifests, seed=1))))
    explained: Any = json.loads(json.dumps(to_json(run_dry(manifests, seed=1, explain=True))))
    (entry,) = plain["pods"]
    assert list(entry) == [
        "pod",
        "status",
        "node",
        "nominatedNode",
        "victims",
        "message",
        "filtered",
    ]
    (detail,) = explained["pods"]
    scores = detail["scores"]
    assert set(scores) == {"n1", "n2"}
    for s in scores.values():
        assert s["total"] == sum(s["plugins"].values())
        assert set(s["plugins"]) >= {"NodeResourcesFit", "TaintToleration"}
    # LeastAllocated prefers the bigger node.
    assert detail["node"] == "n2"
    assert scores["n2"]["total"] > scores["n1"]["total"]


def test_seeded_runs_repeat():
    manifests_text = "\n---\n".join(
        [
            *(
                f"apiVersion: v1\nkind: Node\nmetadata: {{name: n{i}}}\n"
                'status: {capacity: {cpu: "4", memory: 8Gi, pods: "110"}}'
                for i in range(5)
            ),
            *(
                f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}}}\n"
                "spec: {containers: [{name: c, image: x}]}"
                for i in range(10)
            ),
        ]
    )
    first = to_json(run_dry(load_manifest_text(manifests_text), seed=42))
    again = to_json(run_dry(load_manifest_text(manifests_text), seed=42))
    assert first == again


def test_table():
    manifests = Manifests(
        nodes=[node("n1", cpu="1")],
        pods=[make_pod("ok").req(cpu="1").obj(), make_pod("no").req(cpu="1").obj()],
    )
    lines = to_table(run_dry(manifests, seed=1)).splitlines()
    assert lines[0].split() == ["POD", "STATUS", "NODE", "REASON"]
    assert lines[1].split()[:3] == ["default/ok", "Scheduled", "n1"]
    assert lines[2].split()[:4] == ["default/no", "Unschedulable", "<none>", "0/1"]


def test_invalid_priority_class_is_a_manifest_error():
    manifests = Manifests(nodes=[node("n1")], pods=[make_pod("p").priority_class("nope").obj()])
    with pytest.raises(ManifestError, match='no PriorityClass with name "nope" was found'):
        run_dry(manifests)


def test_unknown_plugin_in_config_is_a_config_error():
    profile = Profile(plugins=Plugins(filter=PluginSet(enabled=[PluginRef("Nope")])))
    with pytest.raises(ConfigError, match='filter plugin "Nope" does not exist'):
        run_dry(Manifests(), SchedulerConfiguration(profiles=[profile]))


async def test_run_dry_async_inside_a_loop():
    manifests = Manifests(nodes=[node("n1")], pods=[make_pod("p").obj()])
    report = await run_dry_async(manifests, seed=1)
    assert by_pod(report) == {"default/p": (SCHEDULED, "n1")}


def test_no_nodes():
    report = run_dry(Manifests(pods=[make_pod("p").obj()]))
    assert (report.pods[0].status, report.pods[0].message) == (
        UNSCHEDULABLE,
        "no nodes available to schedule pods",
    )
