"""PodTopologySpread cluster default constraints in `berth schedule`.

Defaults (the system hostname/3 and zone/5 ScheduleAnyway constraints, or a List) apply only
to pods without constraints of their own that a Service in their namespace selects or that a
ReplicationController, ReplicaSet or StatefulSet controls, with the selector derived from
those objects (upstream helper.DefaultSelector). The objects come from the manifests.

The cluster: three nodes in three zones; node "a" is much bigger, so the resource scorers
prefer it; two replicas of "web" already run there. A new web pod that the defaults cover
goes to "b" or "c" (spreading outweighs the resources); one they do not cover goes to "a".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from scheduling.dryrun import SCHEDULED, PodResult, run_dry
from shared.config import SchedulerConfiguration, load_config
from shared.models import load_manifest_text

SPREAD = "PodTopologySpread"
WEB = {"app": "web"}


def node(name: str, zone: str, cpu: str, memory: str) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


def owner_ref(api_version: str, kind: str, name: str, controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": f"{kind}-{name}",
        "controller": controller,
    }


RS_OWNER = owner_ref("apps/v1", "ReplicaSet", "web")


def pod(
    name: str,
    node_name: str | None = None,
    owners: list[dict[str, Any]] | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(WEB)}
    if owners:
        meta["ownerReferences"] = owners
    container = {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    spec: dict[str, Any] = {"containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def service(
    selector: dict[str, str] | None, namespace: str = "default", name: str = "web"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": selector, "ports": [{"name": "http", "port": 80}]},
    }


def controller(api_version: str, kind: str, selector: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": selector, "template": {"metadata": {"labels": WEB}}},
    }


REPLICA_SET = controller("apps/v1", "ReplicaSet", {"matchLabels": WEB})
STATEFUL_SET = controller("apps/v1", "StatefulSet", {"matchLabels": WEB})
REPLICATION_CONTROLLER = controller("v1", "ReplicationController", WEB)

CLUSTER = [
    node("a", "zone-a", cpu="64", memory="256Gi"),
    node("b", "zone-b", cpu="8", memory="32Gi"),
    node("c", "zone-c", cpu="8", memory="32Gi"),
    pod("web-1", "a", [RS_OWNER]),
    pod("web-2", "a", [RS_OWNER]),
]


def documents(objects: list[dict[str, Any]], pending: dict[str, Any]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [*CLUSTER, *objects, pending]})


def schedule(
    objects: list[dict[str, Any]],
    pending: dict[str, Any],
    config: SchedulerConfiguration | None = None,
) -> PodResult:
    manifests = load_manifest_text(documents(objects, pending))
    report = run_dry(manifests, config, seed=1, explain=True)
    (result,) = report.pods
    assert result.status == SCHEDULED, result.message
    return result


def spread_scores(result: PodResult) -> dict[str, int]:
    return {name: s.plugins[SPREAD] for name, s in result.scores.items() if SPREAD in s.plugins}


def assert_spread(result: PodResult) -> None:
    assert result.node in ("b", "c")
    scores = spread_scores(result)
    # The derived selector counts the two replicas on "a" (both in its host and its zone).
    assert scores["a"] < scores["b"] == scores["c"]


def assert_not_spread(result: PodResult) -> None:
    assert result.node == "a"
    assert spread_scores(result) == {}  # PreScore skipped: no constraints for this pod


@pytest.mark.parametrize(
    ("objects", "owners"),
    [
        pytest.param([REPLICA_SET], [RS_OWNER], id="replica-set-owner"),
        pytest.param(
            [STATEFUL_SET], [owner_ref("apps/v1", "StatefulSet", "web")], id="stateful-set-owner"
        ),
        pytest.param(
            [REPLICATION_CONTROLLER],
            [owner_ref("v1", "ReplicationController", "web")],
            id="replication-controller-owner",
        ),
        pytest.param([service(WEB)], None, id="selected-by-a-service"),
        pytest.param(
            [service({"app": "other"}), service(WEB, name="web2")],
            None,
            id="one-of-two-services-selects-it",
        ),
        pytest.param(
            [REPLICA_SET],
            [owner_ref("apps/v1", "Deployment", "web", controller=False), RS_OWNER],
            id="the-controller-among-several-owners",
        ),
    ],
)
def test_system_defaults_spread_covered_pods(
    objects: list[dict[str, Any]], owners: list[dict[str, Any]] | None
) -> None:
    assert_spread(schedule(objects, pod("web-3", owners=owners)))


@pytest.mark.parametrize(
    ("objects", "owners"),
    [
        pytest.param([], None, id="no-owner-no-service"),
        pytest.param([service(WEB, namespace="other")], None, id="service-in-another-namespace"),
        pytest.param([service({"app": "db"})], None, id="service-selects-other-pods"),
        pytest.param([service(None)], None, id="service-without-selector"),
        pytest.param([], [RS_OWNER], id="owner-not-in-the-manifests"),
        pytest.param(
            [REPLICA_SET],
            [owner_ref("apps/v1", "ReplicaSet", "web", controller=False)],
            id="owner-is-not-the-controller",
        ),
        pytest.param(
            [REPLICA_SET],
            [owner_ref("extensions/v1beta1", "ReplicaSet", "web")],
            id="owner-with-another-api-group",
        ),
        pytest.param(
            [REPLICA_SET], [owner_ref("apps/v1", "Deployment", "web")], id="unsupported-kind"
        ),
    ],
)
def test_system_defaults_leave_other_pods_alone(
    objects: list[dict[str, Any]], owners: list[dict[str, Any]] | None
) -> None:
    assert_not_spread(schedule(objects, pod("web-3", owners=owners)))


def test_controller_in_another_namespace_does_not_count() -> None:
    """Owners are looked up in the pod's namespace (ownerReferences are namespace-local)."""
    other = REPLICA_SET | {"metadata": {"name": "web", "namespace": "other"}}
    assert_not_spread(schedule([other], pod("web-3", owners=[RS_OWNER])))


def list_config(constraints: list[dict[str, Any]]) -> SchedulerConfiguration:
    args = {"defaultingType": "List", "defaultConstraints": constraints}
    return load_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"pluginConfig": [{"name": SPREAD, "args": args}]}],
        }
    )


def test_list_defaulting_with_no_constraints_disables_defaults() -> None:
    config = list_config([])
    result = schedule([REPLICA_SET, service(WEB)], pod("web-3", owners=[RS_OWNER]), config)
    assert_not_spread(result)


def test_list_defaulting_uses_its_constraints_with_the_derived_selector() -> None:
    hostname = {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
    }
    config = list_config([hostname])
    assert_spread(schedule([REPLICA_SET], pod("web-3", owners=[RS_OWNER]), config))
    assert_not_spread(schedule([], pod("web-3"), config))


def test_own_constraints_replace_the_defaults() -> None:
    """A pod with constraints of its own never gets the defaults."""
    pending = pod("web-3", owners=[RS_OWNER])
    pending["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "nothing-matches"}},
        }
    ]
    result = schedule([REPLICA_SET], pending)
    assert result.node == "a"
    scores = spread_scores(result)
    assert scores["a"] == scores["b"] == scores["c"]


def test_berth_schedule_command_applies_the_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": CLUSTER}))
    workloads = tmp_path / "web.yaml"
    workloads.write_text(
        "\n---\n".join(
            json.dumps(doc)
            for doc in (
                REPLICA_SET,
                pod("owned", owners=[RS_OWNER]),
                pod("loose") | {"metadata": {"name": "loose", "labels": {"app": "loose"}}},
            )
        )
    )
    code = main(["schedule", "-f", str(cluster), "-f", str(workloads), "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    placed = {p["pod"]: p["node"] for p in json.loads(out)["pods"]}
    assert placed["default/loose"] == "a"
    assert placed["default/owned"] in ("b", "c")
