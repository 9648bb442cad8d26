"""Extenders in the scheduling cycle (upstream findNodesThatPassExtenders and prioritizeNodes),
against a real local HTTP extender: end to end through `berth schedule` with a config that
names it, and at schedule_pod for the search rules. The `server` fixture
(a local extender answering per verb) comes from conftest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from scheduling.cache.local import LocalCluster
from scheduling.dryrun import SCHEDULED, UNSCHEDULABLE, run_dry
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.errors import CycleError, FitError
from scheduling.framework.extender import HTTPExtender
from scheduling.framework.schedule import EXTENDER_NAME, schedule_pod
from scheduling.framework.status import Code, Status
from shared.config import default_config
from shared.config.types import Extender, ExtenderManagedResource
from shared.models import Node, Pod
from shared.models.manifest import Manifests
from tests.builders import make_node, make_pod
from tests.extender.test_extender import Recorder, Reply, keep, names_in, scores
from tests.framework import fakes

Server = tuple[str, Recorder]

CONFIG = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def cluster_yaml(pod_cpu: str = "2") -> str:
    """n2 is the biggest node: without extenders LeastAllocated and BalancedAllocation put
    the pod there (totals n1 449, n2 474, n3 449 for a 2-cpu pod)."""
    documents = [
        f"apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\n"
        f'status: {{capacity: {{cpu: "{cpu}", memory: 16Gi, pods: "110"}}}}\n'
        for name, cpu in (("n1", 4), ("n2", 8), ("n3", 4))
    ]
    documents.append(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
        f'  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{pod_cpu}", '
        "memory: 1Gi}}}]\n"
    )
    return "---\n".join(documents)


def berth_schedule(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extenders: str,
    *extra: str,
    pod_cpu: str = "2",
) -> dict[str, Any]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(cluster_yaml(pod_cpu))
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG + f"extenders: {extenders}\n")
    argv = ["schedule", "-f", str(cluster), "--config", str(config), "-o", "json", "--seed", "1"]
    code = main([*argv, *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    (pod,) = json.loads(out)["pods"]
    assert isinstance(pod, dict)
    return pod


def test_berth_schedule_without_extenders_prefers_n2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = berth_schedule(tmp_path, capsys, "[]", "--explain")
    assert pod["node"] == "n2"
    assert {node: s["total"] for node, s in pod["scores"].items()} == {
        "n1": 449,
        "n2": 474,
        "n3": 449,
    }


def test_berth_schedule_extender_filter(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, recorder = server
    recorder.replies["filter"] = keep("n1", "n3", FailedNodes={"n2": "too hot"})
    pod = berth_schedule(tmp_path, capsys, f"[{{urlPrefix: '{url}', filterVerb: filter}}]")
    assert pod["status"] == SCHEDULED
    assert pod["node"] in ("n1", "n3")
    assert pod["filtered"] == {"n2": {"plugin": EXTENDER_NAME, "reasons": ["too hot"]}}
    ((verb, body),) = recorder.requests
    assert verb == "filter"
    assert sorted(names_in(body)) == ["n1", "n2", "n3"]


def test_berth_schedule_extender_prioritize_is_scaled_by_10(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # n3 trails n2 by 25: a score of 3 (x weight 1) only wins once scaled to 30.
    url, recorder = server
    recorder.replies["prioritize"] = scores({"n1": 0, "n2": 0, "n3": 3})
    pod = berth_schedule(
        tmp_path,
        capsys,
        f"[{{urlPrefix: '{url}', prioritizeVerb: prioritize, weight: 1}}]",
        "--explain",
    )
    assert pod["node"] == "n3"
    got = {node: (s["total"], s["plugins"][url]) for node, s in pod["scores"].items()}
    assert got == {"n1": (449, 0), "n2": (474, 0), "n3": (479, 30)}
    for s in pod["scores"].values():
        assert s["total"] == sum(s["plugins"].values())
    assert recorder.verbs() == ["prioritize"]


def test_berth_schedule_extender_weight_multiplies(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, recorder = server
    recorder.replies["prioritize"] = scores({"n1": 1})
    pod = berth_schedule(
        tmp_path,
        capsys,
        f"[{{urlPrefix: '{url}', prioritizeVerb: prioritize, weight: 3}}]",
        "--explain",
    )
    assert (pod["node"], pod["scores"]["n1"]["plugins"][url]) == ("n1", 30)


# ------------------------------------------------------------------------- run_dry
def node(name: str, cpu: str = "4") -> Node:
    return make_node(name).capacity(cpu=cpu, memory="16Gi", pods=110).obj()


def dry_run(url: str, pod: Pod, **extender: Any) -> tuple[str, str | None, str]:
    config = default_config()
    config.extenders = [Extender(url_prefix=url, http_timeout_seconds=2.0, **extender)]
    report = run_dry(Manifests(nodes=[node("n1"), node("n2")], pods=[pod]), config, seed=1)
    (result,) = report.pods
    return result.status, result.node, result.message


def test_extenders_are_not_called_when_no_node_fits(server: Server) -> None:
    url, recorder = server
    recorder.replies["filter"] = keep("n1")
    status, _, message = dry_run(url, make_pod("big").req(cpu="8").obj(), filter_verb="filter")
    assert status == UNSCHEDULABLE
    assert message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
    assert recorder.requests == []


@pytest.mark.parametrize(
    ("ignorable", "expected"),
    [
        pytest.param(False, UNSCHEDULABLE, id="error-fails-the-cycle"),
        pytest.param(True, SCHEDULED, id="ignorable-is-skipped"),
    ],
)
def test_a_failing_filter_extender(server: Server, ignorable: bool, expected: str) -> None:
    url, recorder = server
    recorder.replies["filter"] = lambda body: (500, {})
    status, node_name, message = dry_run(
        url, make_pod("p").req(cpu="1").obj(), filter_verb="filter", ignorable=ignorable
    )
    assert status == expected
    if ignorable:
        assert node_name in ("n1", "n2")
    else:
        assert message == f"failed filter with extender at URL {url}/filter, code 500"


# ---------------------------------------------------------------------- schedule_pod
def extender(url: str, **kw: Any) -> HTTPExtender:
    return HTTPExtender(Extender(url_prefix=url, http_timeout_seconds=2.0, **kw))


def cluster_with(*extenders: HTTPExtender) -> LocalCluster:
    return LocalCluster(fakes.node_objs("n1", "n2", "n3"), extenders=extenders)


def pod(nominated: str = "") -> Pod:
    builder = make_pod("p").uid("p")
    if nominated:
        builder = builder.nominated_node_name(nominated)
    return builder.obj()


def test_filtered_nodes_get_extender_statuses_and_count_as_evaluated(server: Server) -> None:
    url, recorder = server
    recorder.replies["filter"] = keep(
        "n3", cache=True, FailedNodes={"n1": "no"}, FailedAndUnresolvableNodes={"n2": "never"}
    )
    cluster = cluster_with(extender(url, filter_verb="filter", node_cache_capable=True))
    fw = fakes.framework({"filter": [fakes.Filter("F")]}, cluster)
    result = schedule_pod(fw, CycleState(), pod(), cluster.nodes)
    assert (result.suggested_host, result.feasible_nodes, result.evaluated_nodes) == ("n3", 1, 3)
    assert result.filtered(cluster.nodes) == {
        "n1": Status(Code.UNSCHEDULABLE, ("no",), EXTENDER_NAME),
        "n2": Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("never",), EXTENDER_NAME),
    }
    assert result.diagnosis.unschedulable_plugins == {EXTENDER_NAME}


def test_extenders_filtering_every_node_is_a_fit_error(server: Server) -> None:
    url, recorder = server
    recorder.replies["filter"] = keep(cache=True, FailedNodes={n: "too hot" for n in "123"})
    cluster = LocalCluster(
        fakes.node_objs("1", "2", "3"), extenders=[extender(url, filter_verb="filter")]
    )
    fw = fakes.framework({"filter": [fakes.Filter("F")]}, cluster)
    with pytest.raises(FitError) as info:
        schedule_pod(fw, CycleState(), pod(), cluster.nodes)
    assert str(info.value) == "0/3 nodes are available: 3 too hot."
    assert info.value.diagnosis.unschedulable_plugins == {EXTENDER_NAME}


def test_a_failing_extender_is_a_cycle_error(server: Server) -> None:
    url, recorder = server
    recorder.replies["filter"] = lambda body: (200, {"Error": "extender says no"})
    cluster = cluster_with(extender(url, filter_verb="filter"))
    fw = fakes.framework({"filter": [fakes.Filter("F")]}, cluster)
    with pytest.raises(CycleError) as info:
        schedule_pod(fw, CycleState(), pod(), cluster.nodes)
    assert (info.value.status().code, info.value.status().message()) == (
        Code.ERROR,
        "extender says no",
    )


@pytest.mark.parametrize(
    ("reply", "host", "requests"),
    [
        pytest.param(
            keep("n1", cache=True), "n1", [["n1"]], id="kept-only-the-nominated-node-is-sent"
        ),
        pytest.param(
            keep("n2", "n3", cache=True, FailedNodes={"n1": "no"}),
            "n3",
            [["n1"], ["n1", "n2", "n3"]],
            id="dropped-the-full-search-runs",
        ),
        pytest.param(
            lambda body: (500, {}),
            None,
            [["n1"], ["n1", "n2", "n3"]],
            id="failed-the-full-search-runs-and-fails",
        ),
    ],
)
def test_nominated_node_passes_the_extenders_too(
    server: Server, reply: Reply, host: str | None, requests: list[list[str]]
) -> None:
    url, recorder = server
    recorder.replies["filter"] = reply
    cluster = cluster_with(extender(url, filter_verb="filter", node_cache_capable=True))
    scorer = fakes.Score("S", scores={"n1": 0, "n2": 10, "n3": 20})
    fw = fakes.framework({"filter": [fakes.Filter("F")], "score": [scorer]}, cluster)
    if host is None:
        with pytest.raises(CycleError):
            schedule_pod(fw, CycleState(), pod(nominated="n1"), cluster.nodes)
    else:
        result = schedule_pod(fw, CycleState(), pod(nominated="n1"), cluster.nodes)
        assert result.suggested_host == host
    assert [sorted(names_in(body)) for _, body in recorder.requests] == requests


def test_without_score_plugins_a_prioritizing_extender_ranks_every_feasible_node(
    server: Server,
) -> None:
    # Upstream: the search stops at the first feasible node only when there are no score
    # plugins and no filtering or prioritizing extenders; every node scores 1
    # only without score plugins and extenders.
    url, recorder = server
    recorder.replies["prioritize"] = scores({"n3": 2})
    cluster = cluster_with(extender(url, prioritize_verb="prioritize", weight=1))
    fw = fakes.framework({"filter": [fakes.Filter("F")]}, cluster)
    result = schedule_pod(fw, CycleState(), pod(), cluster.nodes, explain=True)
    assert (result.suggested_host, result.feasible_nodes) == ("n3", 3)
    assert result.scores is not None
    assert {n: total for n, (total, _) in result.scores.by_node(cluster.nodes).items()} == {
        "n1": 0,
        "n2": 0,
        "n3": 20,
    }


def test_without_score_plugins_a_filtering_extender_sees_every_feasible_node(
    server: Server,
) -> None:
    url, recorder = server
    recorder.replies["filter"] = keep("n2", cache=True)
    cluster = cluster_with(extender(url, filter_verb="filter", node_cache_capable=True))
    fw = fakes.framework({"filter": [fakes.Filter("F")]}, cluster)
    result = schedule_pod(fw, CycleState(), pod(), cluster.nodes)
    assert result.suggested_host == "n2"
    ((_, body),) = recorder.requests
    assert names_in(body) == ["n1", "n2", "n3"]


def test_an_extender_uninterested_in_the_pod_is_not_called(server: Server) -> None:
    url, recorder = server
    recorder.replies["filter"] = keep(cache=True)
    recorder.replies["prioritize"] = scores({"n1": 10})
    managed = extender(
        url,
        filter_verb="filter",
        prioritize_verb="prioritize",
        weight=1,
        node_cache_capable=True,
        managed_resources=[ExtenderManagedResource(name="example.com/gpu")],
    )
    cluster = cluster_with(managed)
    scorer = fakes.Score("S", scores={"n2": 5})
    fw = fakes.framework({"filter": [fakes.Filter("F")], "score": [scorer]}, cluster)
    result = schedule_pod(fw, CycleState(), pod(), cluster.nodes)
    assert result.suggested_host == "n2"
    assert recorder.requests == []
