"""Scheduler extenders against a real HTTP server started by the test."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from scheduling.framework.columns import NodeColumns
from scheduling.framework.extender import (
    SCORE_SCALE,
    ExtenderError,
    HTTPExtender,
    Victims,
    extender_scores,
    extender_scores_for_rows,
    filter_rows_with_extenders,
    find_nodes_that_pass_extenders,
    to_kube_json,
)
from scheduling.framework.status import Code, Status
from scheduling.plugins.defaultpreemption import DefaultPreemption
from shared.config.types import Extender, ExtenderManagedResource
from shared.models import Node, Pod
from tests.builders import make_pod
from tests.preemption.fakes import FitFilter, all_unschedulable, environment, run_pre_filters
from tests.preemption.tables import node

Reply = Callable[[dict[str, Any]], tuple[int, Any]]


@dataclass
class Recorder:
    """What the extender server answers per verb, and what it was sent."""

    replies: dict[str, Reply] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    delay: float = 0.0

    def verbs(self) -> list[str]:
        return [verb for verb, _ in self.requests]


@pytest.fixture
def server() -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"null")
            verb = self.path.rsplit("/", 1)[-1]
            recorder.requests.append((verb, body))
            if recorder.delay:
                time.sleep(recorder.delay)
            reply = recorder.replies.get(verb)
            code, payload = reply(body) if reply else (404, {})
            data = json.dumps(payload).encode()
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and left

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/scheduler", recorder
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def extender(url: str, **kw: Any) -> HTTPExtender:
    kw.setdefault("filter_verb", "filter")
    kw.setdefault("prioritize_verb", "prioritize")
    kw.setdefault("weight", 1)
    kw.setdefault("http_timeout_seconds", 2.0)
    return HTTPExtender(Extender(url_prefix=url, **kw))


NODES = [node("n1"), node("n2"), node("n3")]
POD = make_pod("p").uid("uid-p").namespace("team").req(cpu="500m", memory="1Gi").obj()


def names_in(body: dict[str, Any]) -> list[str]:
    if body.get("NodeNames") is not None:
        return list(body["NodeNames"])
    return [item["metadata"]["name"] for item in body["Nodes"]["items"]]


def keep(*wanted: str, cache: bool = False, **extra: Any) -> Reply:
    def reply(body: dict[str, Any]) -> tuple[int, Any]:
        kept = [n for n in names_in(body) if n in wanted]
        if cache:
            return 200, {"NodeNames": kept, **extra}
        items = [i for i in body["Nodes"]["items"] if i["metadata"]["name"] in wanted]
        return 200, {"Nodes": {"items": items}, **extra}

    return reply


# ------------------------------------------------------------------------------ filter
def test_filter_sends_whole_nodes_and_keeps_the_reply(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    recorder.replies["filter"] = keep("n1", "n3", FailedNodes={"n2": "too hot"})
    statuses: dict[str, Status] = {}
    kept = find_nodes_that_pass_extenders([extender(url)], POD, NODES, statuses)
    assert [n.metadata.name for n in kept] == ["n1", "n3"]
    assert statuses == {"n2": Status(Code.UNSCHEDULABLE, ("too hot",))}
    ((verb, body),) = recorder.requests
    assert verb == "filter"
    assert body["NodeNames"] is None
    assert names_in(body) == ["n1", "n2", "n3"]
    assert body["Pod"]["kind"] == "Pod"
    assert body["Pod"]["metadata"] == {"name": "p", "namespace": "team", "uid": "uid-p"}
    requests = body["Pod"]["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {"cpu": "500m", "memory": "1Gi"}


def test_node_cache_capable_extender_gets_names_only(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    recorder.replies["filter"] = keep("n2", cache=True)
    kept = find_nodes_that_pass_extenders([extender(url, node_cache_capable=True)], POD, NODES, {})
    assert [n.metadata.name for n in kept] == ["n2"]
    body = recorder.requests[0][1]
    assert body["Nodes"] is None
    assert body["NodeNames"] == ["n1", "n2", "n3"]


def test_unresolvable_failures_win_over_plain_failures(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    recorder.replies["filter"] = keep(
        "n1",
        cache=True,
        FailedNodes={"n2": "busy", "n3": "busy"},
        FailedAndUnresolvableNodes={"n3": "wrong rack"},
    )
    statuses: dict[str, Status] = {}
    find_nodes_that_pass_extenders([extender(url, node_cache_capable=True)], POD, NODES, statuses)
    assert statuses["n2"].code == Code.UNSCHEDULABLE
    assert statuses["n3"] == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("wrong rack",))


def test_extenders_narrow_in_turn(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    recorder.replies["filter"] = keep("n1", "n2", cache=True)
    recorder.replies["filter2"] = keep("n2", "n3", cache=True)
    first = extender(url, node_cache_capable=True)
    second = extender(url, node_cache_capable=True, filter_verb="filter2")
    kept = find_nodes_that_pass_extenders([first, second], POD, NODES, {})
    assert [n.metadata.name for n in kept] == ["n2"]
    assert recorder.requests[1][1]["NodeNames"] == ["n1", "n2"]


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(lambda body: (500, {}), id="HTTP 500"),
        pytest.param(lambda body: (200, {"Error": "extender is sad"}), id="error field"),
        pytest.param(lambda body: (200, {"NodeNames": ["n9"]}), id="unknown node"),
        pytest.param(lambda body: (200, "not an object"), id="malformed reply"),
    ],
)
def test_failing_filter(server: tuple[str, Recorder], reply: Reply) -> None:
    url, recorder = server
    recorder.replies["filter"] = reply
    with pytest.raises(ExtenderError):
        find_nodes_that_pass_extenders([extender(url, node_cache_capable=True)], POD, NODES, {})
    kept = find_nodes_that_pass_extenders(
        [extender(url, node_cache_capable=True, ignorable=True)], POD, NODES, {}
    )
    assert [n.metadata.name for n in kept] == ["n1", "n2", "n3"]


def test_http_timeout(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    recorder.replies["filter"] = keep("n1", cache=True)
    recorder.delay = 0.5
    slow = extender(url, node_cache_capable=True, http_timeout_seconds=0.1)
    started = time.perf_counter()
    with pytest.raises(ExtenderError):
        slow.filter(POD, NODES)
    assert time.perf_counter() - started < 0.45
    patient = extender(url, node_cache_capable=True, http_timeout_seconds=3.0)
    assert [n.metadata.name for n in patient.filter(POD, NODES).nodes] == ["n1"]


def test_unreachable_ignorable_extender_is_skipped() -> None:
    dead = extender("http://127.0.0.1:9/nothing", ignorable=True, http_timeout_seconds=0.5)
    kept = find_nodes_that_pass_extenders([dead], POD, NODES, {})
    assert len(kept) == 3
    with pytest.raises(ExtenderError):
        extender("http://127.0.0.1:9/nothing", http_timeout_seconds=0.5).filter(POD, NODES)


def test_filter_rows(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    recorder.replies["filter"] = keep("n3", cache=True, FailedNodes={"n1": "no"})
    columns = NodeColumns(NODES)
    rows = np.arange(3, dtype=np.intp)
    kept, statuses = filter_rows_with_extenders(
        [extender(url, node_cache_capable=True)], POD, columns, rows
    )
    assert kept.tolist() == [columns.index["n3"]]
    assert statuses == {columns.index["n1"]: Status(Code.UNSCHEDULABLE, ("no",))}


# -------------------------------------------------------------------------- prioritize
def scores(pairs: dict[str, int]) -> Reply:
    return lambda body: (200, [{"Host": h, "Score": s} for h, s in pairs.items()])


def test_weight_1_score_5_adds_50(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    recorder.replies["prioritize"] = scores({"n1": 5})
    assert extender_scores([extender(url, weight=1)], POD, NODES[:1]) == {"n1": 50}
    assert SCORE_SCALE == 10


def test_log_totals(server: tuple[str, Recorder]) -> None:
    # An old scheduler log: NodePreferAvoidPods 100 x 10000, other plugins 279 + 105 and
    # 283 + 105, the extender scored the nodes 2 and 5 with weight 1: totals 1000404 and 1000438.
    url, recorder = server
    recorder.replies["prioritize"] = scores({"n1": 2, "n2": 5})
    plugin_totals = {"n1": 100 * 10000 + 279 + 105, "n2": 100 * 10000 + 283 + 105}
    extra = extender_scores([extender(url, weight=1)], POD, NODES[:2])
    totals = {n: plugin_totals[n] + extra.get(n, 0) for n in plugin_totals}
    assert totals == {"n1": 1000404, "n2": 1000438}


def test_weighted_sum_over_extenders(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    recorder.replies["prioritize"] = scores({"n1": 10, "n2": 3, "elsewhere": 10})
    recorder.replies["prioritize2"] = scores({"n2": 4})
    recorder.replies["broken"] = lambda body: (500, {})
    extenders = [
        extender(url, weight=2),
        extender(url, weight=3, prioritize_verb="prioritize2"),
        extender(url, weight=5, prioritize_verb="broken"),  # errors are ignored
    ]
    got = extender_scores(extenders, POD, NODES)
    assert got == {"n1": 10 * 2 * 10, "n2": 3 * 2 * 10 + 4 * 3 * 10}
    columns = NodeColumns(NODES)
    rows = np.array([columns.index[n] for n in ("n3", "n2", "n1")], dtype=np.intp)
    assert extender_scores_for_rows(extenders, POD, columns, rows).tolist() == [0, 180, 200]


def test_no_prioritize_verb_scores_nothing(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    got = extender_scores([extender(url, prioritize_verb="")], POD, NODES)
    assert got == {"n1": 0, "n2": 0, "n3": 0}
    assert recorder.requests == []


# -------------------------------------------------------------------- managedResources
@pytest.mark.parametrize(
    ("pod", "consulted"),
    [
        pytest.param(make_pod("plain").req(cpu="1").obj(), False, id="no managed resource"),
        pytest.param(make_pod("gpu").req({"example.com/gpu": 1}).obj(), True, id="requests it"),
        pytest.param(make_pod("lim").lim({"example.com/gpu": 1}).obj(), True, id="limits it"),
        pytest.param(
            make_pod("init").init_req({"example.com/gpu": 1}).req(cpu="1").obj(),
            True,
            id="an init container requests it",
        ),
    ],
)
def test_managed_resources(server: tuple[str, Recorder], pod: Pod, consulted: bool) -> None:
    url, recorder = server
    recorder.replies["filter"] = keep("n1", cache=True)
    recorder.replies["prioritize"] = scores({"n1": 7})
    managed = [ExtenderManagedResource(name="example.com/gpu")]
    ext = extender(url, node_cache_capable=True, managed_resources=managed)
    kept = find_nodes_that_pass_extenders([ext], pod, NODES, {})
    got = extender_scores([ext], pod, NODES)
    assert len(kept) == (1 if consulted else 3)
    assert got == ({"n1": 70} if consulted else {})
    assert recorder.verbs() == (["filter", "prioritize"] if consulted else [])


# ---------------------------------------------------------------------- preempt, bind
def running(name: str, priority: int, node_name: str) -> Pod:
    return make_pod(name).uid(f"uid-{name}").priority(priority).node(node_name).req(cpu="1").obj()


def test_preempt_verb_with_meta_victims(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    victims = {
        "n1": Victims([running("a", 1, "n1")], 0),
        "n2": Victims([running("b", 1, "n2")], 1),
    }

    def only_n2(body: dict[str, Any]) -> tuple[int, Any]:
        return 200, {"NodeNameToMetaVictims": {"n2": body["NodeNameToMetaVictims"]["n2"]}}

    recorder.replies["preempt"] = only_n2
    ext = extender(url, node_cache_capable=True, preempt_verb="preempt")
    on_node = {"n1": victims["n1"].pods, "n2": victims["n2"].pods}
    result = ext.process_preemption(POD, victims, on_node)
    assert list(result) == ["n2"]
    assert [p.metadata.name for p in result["n2"].pods] == ["b"]
    assert result["n2"].num_pdb_violations == 1
    sent = recorder.requests[0][1]
    assert sent["NodeNameToVictims"] is None
    assert sent["NodeNameToMetaVictims"]["n1"] == {
        "Pods": [{"UID": "uid-a"}],
        "NumPDBViolations": 0,
    }


def test_preempt_verb_claiming_an_unknown_pod_fails(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    recorder.replies["preempt"] = lambda body: (
        200,
        {"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "ghost"}], "NumPDBViolations": 0}}},
    )
    ext = extender(url, preempt_verb="preempt")
    with pytest.raises(ExtenderError, match="not found on that node"):
        ext.process_preemption(POD, {"n1": Victims([running("a", 1, "n1")])}, {"n1": []})


def test_default_preemption_consults_a_preempting_extender(
    server: tuple[str, Recorder],
) -> None:
    # Without the extender n2 (the cheaper victim) would be chosen; the extender allows n1 only.
    url, recorder = server

    def only_n1(body: dict[str, Any]) -> tuple[int, Any]:
        victims = body["NodeNameToVictims"]
        uids = [{"UID": p["metadata"]["uid"]} for p in victims["n1"]["Pods"]]
        return 200, {"NodeNameToMetaVictims": {"n1": {"Pods": uids, "NumPDBViolations": 0}}}

    recorder.replies["preempt"] = only_n1
    pods = [running("mid", 50, "n1"), running("low", 1, "n2")]
    nodes: list[Node] = [node("n1", {"cpu": "1"}), node("n2", {"cpu": "1"})]
    columns = NodeColumns(nodes, pods)
    preemptor = make_pod("p").uid("p").priority(100).req(cpu="1").obj()
    ext = extender(url, preempt_verb="preempt")
    env = environment(columns, [FitFilter()], extenders=[ext])
    plugin = DefaultPreemption(offset=lambda n: 0, environment=lambda _: env)
    state = run_pre_filters([FitFilter()], preemptor, columns)
    result, status = plugin.post_filter(state, preemptor, columns, all_unschedulable(columns))
    assert status.is_success()
    assert result is not None
    assert (result.nominated_node, [v.metadata.name for v in result.victims]) == ("n1", ["mid"])
    assert recorder.verbs() == ["preempt"]


def test_bind_verb(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    recorder.replies["bind"] = lambda body: (200, {"Error": ""})
    ext = extender(url, bind_verb="bind")
    ext.bind(POD, "n2")
    assert recorder.requests == [
        ("bind", {"PodName": "p", "PodNamespace": "team", "PodUID": "uid-p", "Node": "n2"})
    ]
    recorder.replies["bind"] = lambda body: (200, {"Error": "no"})
    with pytest.raises(ExtenderError, match="no"):
        ext.bind(POD, "n2")


def test_kube_json_encoding() -> None:
    pod = (
        make_pod("p")
        .priority(7)
        .req(cpu="1500m", memory="1Gi")
        .node_selector(disk="ssd")
        .start_time(0.0)
        .obj()
    )
    encoded = to_kube_json(pod)
    assert encoded["spec"]["priority"] == 7
    assert encoded["spec"]["nodeSelector"] == {"disk": "ssd"}
    assert (encoded["apiVersion"], encoded["kind"]) == ("v1", "Pod")
    assert encoded["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "1500m",
        "memory": "1Gi",
    }
    assert encoded["status"]["startTime"] == "1970-01-01T00:00:00Z"
    assert "nodeName" not in encoded["spec"]
