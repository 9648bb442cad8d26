"""Kueue's objects in Kubernetes mode: the adapter follows ResourceFlavors, ClusterQueues,
LocalQueues and Cohorts from the API (in the version served, or not at all when the CRDs are
missing), quota admission admits the cluster's pods with them, the reason a pod waits is
written to it, and pods Kueue itself manages are left to Kueue."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any, cast

import pytest
import redis.asyncio as aioredis

from cli.servers import DevServers
from cli.supervisor import start_stack
from services.adapter import reflector as reflector_module
from services.adapter.quota import status_message
from services.queue.config import KUEUE_MODE_BERTH, KUEUE_MODE_KUEUE
from services.queue.main import _parser, config_from_args
from services.queue.quota.admission import Admission
from services.queue.quota.flavor_assign import FIT, PREEMPT_MODE, _try_next
from services.queue.records import PodRecord
from shared.kube.client import API_CALLS
from shared.models.kueue import ClusterQueue, LocalQueue, kueue_mark
from shared.models.kueue import Cohort as KueueCohort
from shared.models.kueue_versions import as_berth
from shared.models.manifest import ManifestError, decode_object
from shared.runtime.env import StackSettings
from shared.store import ClusterStore
from tests.kube.conftest import ApiServer
from tests.kube.test_adapter import eventually, node, pod, running_adapter
from tests.kube.test_kube_mode import bound, condition

KUEUE_PLURALS = ("resourceflavors", "clusterqueues", "localqueues", "cohorts")


def flavor(name: str = "default-flavor") -> dict[str, Any]:
    return {"kind": "ResourceFlavor", "metadata": {"name": name}}


def cluster_queue(
    name: str, cpu: str, *, cohort: str = "", version: str = "v1beta2"
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                ],
            }
        ],
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
    }
    if cohort:
        spec["cohortName" if version == "v1beta2" else "cohort"] = cohort
    return {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, cq: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def cohort(name: str, parent: str, *, version: str = "v1beta2") -> dict[str, Any]:
    field = "parentName" if version == "v1beta2" else "parent"
    return {"kind": "Cohort", "metadata": {"name": name}, "spec": {field: parent}}


def queued(name: str, lq: str, cpu: str = "1", **labels: str) -> dict[str, Any]:
    body = pod(name, cpu, priority=0)
    body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": lq, **labels}
    return body


# ------------------------------------------------------------------------- pure rules
@pytest.mark.parametrize(
    ("kind", "served", "spec", "expected"),
    [
        # v1beta2 renames: read as berth's (v1beta1) names
        ("ClusterQueue", "kueue.x-k8s.io/v1beta2", {"cohortName": "c"}, {"cohort": "c"}),
        ("Cohort", "kueue.x-k8s.io/v1beta2", {"parentName": "p"}, {"parent": "p"}),
        # v1beta1 and v1alpha1 are berth's shape already
        ("ClusterQueue", "kueue.x-k8s.io/v1beta1", {"cohort": "c"}, {"cohort": "c"}),
        ("Cohort", "kueue.x-k8s.io/v1alpha1", {"parent": "p"}, {"parent": "p"}),
        # kinds without renames, and everything else in the spec, pass unchanged
        ("LocalQueue", "kueue.x-k8s.io/v1beta2", {"clusterQueue": "q"}, {"clusterQueue": "q"}),
        (
            "ClusterQueue",
            "kueue.x-k8s.io/v1beta2",
            {"cohortName": "c", "stopPolicy": "Hold"},
            {"cohort": "c", "stopPolicy": "Hold"},
        ),
    ],
)
def test_served_versions_are_read_in_berths_field_names(
    kind: str, served: str, spec: dict[str, Any], expected: dict[str, Any]
) -> None:
    body = {"kind": kind, "metadata": {"name": "x"}, "spec": spec}
    assert as_berth(kind, served, body)["spec"] == expected
    assert body["spec"] == spec  # the served object is not modified


@pytest.mark.parametrize(
    ("labels", "gates", "mark"),
    [
        ({}, (), ""),
        ({"kueue.x-k8s.io/queue-name": "lq"}, (), ""),  # in a LocalQueue: berth's to admit
        ({}, ("example.com/other",), ""),
        ({}, ("kueue.x-k8s.io/admission",), "scheduling gate kueue.x-k8s.io/admission"),
        ({}, ("kueue.x-k8s.io/topology",), "scheduling gate kueue.x-k8s.io/topology"),
        ({"kueue.x-k8s.io/managed": "true"}, (), "label kueue.x-k8s.io/managed"),
        ({"kueue.x-k8s.io/podset": "main"}, (), "label kueue.x-k8s.io/podset"),
    ],
)
def test_the_pods_kueue_manages_are_recognised(
    labels: dict[str, str], gates: tuple[str, ...], mark: str
) -> None:
    assert kueue_mark(labels, gates) == mark


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "Waiting for quota in ClusterQueue team-a (position 2 of 3): insufficient unused "
            "quota for cpu in flavor f, 1 more needed; admission estimated in ~12s",
            "Waiting for quota in ClusterQueue team-a: insufficient unused quota for cpu in "
            "flavor f, 1 more needed",
        ),
        (
            "Waiting for quota in ClusterQueue a (position 1 of 1; 3 of 4 in cohort c): "
            "insufficient quota for cpu in flavor f, request > maximum capacity (12 > 4)",
            "Waiting for quota in ClusterQueue a: insufficient quota for cpu in flavor f, "
            "request > maximum capacity (12 > 4)",
        ),
        (
            "LocalQueue lq doesn't exist in namespace ns",
            "LocalQueue lq doesn't exist in namespace ns",
        ),
    ],
)
def test_the_status_message_leaves_out_what_changes_at_every_admission(
    message: str, expected: str
) -> None:
    assert status_message(message) == expected


def test_may_stop_search_is_accepted_and_stops_as_borrow_and_preempt_do() -> None:
    """v1beta2's MayStopSearch (also valid in v1beta1 since Kueue 0.13) is Borrow for
    whenCanBorrow and Preempt for whenCanPreempt."""
    manifest = cluster_queue("q", "4")
    manifest["apiVersion"] = "kueue.x-k8s.io/v1beta1"

    def queue(borrow: str, preempt: str) -> ClusterQueue:
        manifest["spec"]["flavorFungibility"] = {"whenCanBorrow": borrow, "whenCanPreempt": preempt}
        return cast(ClusterQueue, decode_object(manifest))

    stop, classic, search = (
        queue("MayStopSearch", "MayStopSearch"),
        queue("Borrow", "Preempt"),
        queue("TryNextFlavor", "TryNextFlavor"),
    )
    for mode, borrowing in ((FIT, True), (PREEMPT_MODE, False)):
        assert _try_next(mode, borrowing, stop) is _try_next(mode, borrowing, classic) is False
        assert _try_next(mode, borrowing, search) is True


@pytest.mark.parametrize(
    ("mode", "labels", "gates", "managed"),
    [
        (KUEUE_MODE_BERTH, {"kueue.x-k8s.io/queue-name": "lq"}, (), True),
        (KUEUE_MODE_BERTH, {}, (), False),  # in no LocalQueue
        (
            KUEUE_MODE_BERTH,
            {"kueue.x-k8s.io/queue-name": "lq"},
            ("kueue.x-k8s.io/admission",),
            False,
        ),
        (
            KUEUE_MODE_BERTH,
            {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/managed": "true"},
            (),
            False,  # Kueue admitted it and lifted its gate: still Kueue's
        ),
        (KUEUE_MODE_KUEUE, {"kueue.x-k8s.io/queue-name": "lq"}, (), False),
    ],
)
async def test_berth_admits_only_the_pods_kueue_does_not(
    redis_client: aioredis.Redis,
    redis_prefix: str,
    mode: str,
    labels: dict[str, str],
    gates: tuple[str, ...],
    managed: bool,
) -> None:
    store = ClusterStore(redis_client, prefix=redis_prefix)
    admission = Admission(redis_client, store, redis_prefix + "q:", kueue_mode=mode)
    record = PodRecord("default", "p", "uid-p", labels=labels, scheduling_gates=gates)
    assert admission.managed(record) is managed


def test_the_kueue_mode_comes_from_the_flag_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = StackSettings("redis://127.0.0.1:1/0", "127.0.0.1:1")
    assert config_from_args(_parser().parse_args([]), settings).kueue_mode == "berth"
    monkeypatch.setenv("BERTH_KUEUE_MODE", "kueue")
    assert config_from_args(_parser().parse_args([]), settings).kueue_mode == "kueue"
    args = _parser().parse_args(["--kueue-mode", "berth"])
    assert config_from_args(args, settings).kueue_mode == "berth"
    with pytest.raises(SystemExit):
        _parser().parse_args(["--kueue-mode", "both"])


# ------------------------------------------------------------------- the adapter
async def kueue_objects(store: ClusterStore) -> dict[str, Any]:
    return {
        kind: {o.key: o for o in await store.list(kind)}
        for kind in ("ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort")
    }


async def test_the_adapter_follows_kueues_objects_in_v1beta2(
    api_server: ApiServer,
    redis_client: aioredis.Redis,
    redis_prefix: str,
    kafka_bootstrap: str,
    topics: Any,
    group_id: str,
) -> None:
    """Kueue >= 0.15: v1beta2 is listed and watched; cohortName and parentName are read as
    berth's cohort and parent; changes and deletions are followed."""
    emu = api_server.emulator
    emu.upsert(flavor())
    emu.upsert(cluster_queue("team-a", "2", cohort="shared"))
    emu.upsert(local_queue("lq-a", "team-a"))
    emu.upsert(cohort("shared", "root"))
    store = ClusterStore(redis_client, prefix=redis_prefix)
    args = (api_server, redis_client, redis_prefix, kafka_bootstrap, topics, group_id)
    async with running_adapter(*args) as service:
        objects = await kueue_objects(store)
        assert set(objects["ResourceFlavor"]) == {"default-flavor"}
        cq = cast(ClusterQueue, objects["ClusterQueue"]["team-a"])
        assert cq.spec.cohort == "shared"
        assert cq.spec.flavor_fungibility.when_can_borrow == "MayStopSearch"
        assert cq.spec.resource_groups[0].flavors[0].resources[0].nominal_quota == "2"
        lq = cast(LocalQueue, objects["LocalQueue"]["default/lq-a"])
        assert lq.spec.cluster_queue == "team-a"
        assert cast(KueueCohort, objects["Cohort"]["shared"]).spec.parent == "root"
        lists = {p for m, p, q in emu.requests if m == "GET" and "watch" not in q}
        assert "/apis/kueue.x-k8s.io/v1beta2/clusterqueues" in lists
        assert "/apis/kueue.x-k8s.io/v1beta1/clusterqueues" not in lists
        assert service.api.served["ClusterQueue"] == 0

        # ---- a quota changed in the API server, a LocalQueue deleted: both followed
        emu.upsert(cluster_queue("team-a", "5", cohort="other"))
        emu.drop("localqueues", "default", "lq-a")

        async def followed() -> bool:
            """the new quota and cohort are stored and the LocalQueue is gone"""
            objects = await kueue_objects(store)
            cq = cast(ClusterQueue, objects["ClusterQueue"]["team-a"])
            quota = cq.spec.resource_groups[0].flavors[0].resources[0].nominal_quota
            return quota == "5" and cq.spec.cohort == "other" and not objects["LocalQueue"]

        await eventually(followed, 15)
        watches = {p for m, p, q in emu.requests if "watch" in q}
        assert "/apis/kueue.x-k8s.io/v1beta2/clusterqueues" in watches


async def test_an_older_kueue_is_followed_in_the_version_it_serves(
    api_server: ApiServer,
    redis_client: aioredis.Redis,
    redis_prefix: str,
    kafka_bootstrap: str,
    topics: Any,
    group_id: str,
) -> None:
    """Kueue 0.9/0.10: v1beta1, and Cohort in v1alpha1. v1beta2 answers 404 and the next
    version is listed (and watched)."""
    emu = api_server.emulator
    emu.versions.update({p: "kueue.x-k8s.io/v1beta1" for p in KUEUE_PLURALS[:3]})
    emu.versions["cohorts"] = "kueue.x-k8s.io/v1alpha1"
    emu.upsert(flavor())
    emu.upsert(cluster_queue("team-a", "2", cohort="shared", version="v1beta1"))
    emu.upsert(local_queue("lq-a", "team-a"))
    emu.upsert(cohort("shared", "root", version="v1alpha1"))
    store = ClusterStore(redis_client, prefix=redis_prefix)
    args = (api_server, redis_client, redis_prefix, kafka_bootstrap, topics, group_id)
    async with running_adapter(*args) as service:
        objects = await kueue_objects(store)
        assert cast(ClusterQueue, objects["ClusterQueue"]["team-a"]).spec.cohort == "shared"
        assert cast(KueueCohort, objects["Cohort"]["shared"]).spec.parent == "root"
        assert set(objects["LocalQueue"]) == {"default/lq-a"}
        assert service.api.served["ClusterQueue"] == 1
        assert service.api.served["Cohort"] == 2
        emu.upsert(local_queue("lq-b", "team-a"))

        async def watched() -> bool:
            """a LocalQueue created later arrives through the v1beta1 watch"""
            return "default/lq-b" in (await kueue_objects(store))["LocalQueue"]

        await eventually(watched, 15)
        asked = [p for m, p, q in emu.requests if p.endswith("/cohorts")]
        assert "/apis/kueue.x-k8s.io/v1beta2/cohorts" in asked
        assert "/apis/kueue.x-k8s.io/v1alpha1/cohorts" in asked


async def test_kueue_not_installed_is_absent_not_an_error(
    api_server: ApiServer,
    redis_client: aioredis.Redis,
    redis_prefix: str,
    kafka_bootstrap: str,
    topics: Any,
    group_id: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No Kueue CRDs: the adapter syncs anyway, with one clear line per kind, follows none,
    and follows them once they are installed."""
    monkeypatch.setattr(reflector_module, "ABSENT_RECHECK_SECONDS", 0.3)
    emu = api_server.emulator
    emu.unserved.update(KUEUE_PLURALS)
    emu.upsert(node("n1"))
    store = ClusterStore(redis_client, prefix=redis_prefix)
    args = (api_server, redis_client, redis_prefix, kafka_bootstrap, topics, group_id)
    with caplog.at_level(logging.INFO, logger="services.adapter.reflector"):
        async with running_adapter(*args) as service:
            assert service.synced.is_set()
            assert not any((await kueue_objects(store)).values())
            assert [n.metadata.name for n in await store.list("Node")] == ["n1"]
            await asyncio.sleep(1.0)  # a few rechecks: still one line per kind
            missing = [r for r in caplog.records if "is its CRD installed?" in r.getMessage()]
            assert sorted(r.getMessage().split()[0] for r in missing) == [
                "ClusterQueue",
                "Cohort",
                "LocalQueue",
                "ResourceFlavor",
            ]
            assert all(r.levelno == logging.WARNING and r.exc_info is None for r in missing)

            # ---- Kueue installed: followed from the next check
            emu.unserved.clear()
            emu.upsert(flavor())
            emu.upsert(cluster_queue("team-a", "2"))

            async def installed() -> bool:
                """the ClusterQueue created after installation is stored"""
                return "team-a" in (await kueue_objects(store))["ClusterQueue"]

            await eventually(installed, 15)
            served = [r for r in caplog.records if "is served now" in r.getMessage()]
            assert served


# ------------------------------------------------------------------- the whole stack
async def test_the_stack_admits_a_real_clusters_pods_by_kueues_queues(
    api_server: ApiServer, dev_servers: DevServers
) -> None:
    emu = api_server.emulator
    for name in ("n1", "n2"):
        emu.upsert(node(name))
    emu.upsert(flavor())
    emu.upsert(cluster_queue("team-a", "2"))
    emu.upsert(local_queue("lq-a", "team-a"))
    for name in ("p1", "p2", "p3"):
        emu.upsert(queued(name, "lq-a"))

    settings = StackSettings.isolated(
        dev_servers.redis_url, dev_servers.kafka_bootstrap, take_default_scheduler=True
    )
    stack = await start_stack(settings=settings, kube=str(api_server.kubeconfig), session_ms=1500)
    try:
        # ---- two fit the quota: admitted and bound through pods/binding; the third waits
        async def two_bound() -> bool:
            """two of the three pods are bound"""
            return len(bound(api_server)) == 2

        await eventually(two_bound, 90)
        assert ("", "pods/binding", "create") in emu.calls
        (waiting,) = {"p1", "p2", "p3"} - set(bound(api_server))

        async def explained() -> bool:
            """the waiting pod says why in its PodScheduled condition"""
            return "Waiting for quota" in condition(api_server, waiting).get("message", "")

        await eventually(explained, 30)
        cond = condition(api_server, waiting)
        assert cond["status"] == "False"
        assert cond["reason"] == "SchedulingGated"
        assert cond["message"].startswith(
            "Waiting for quota in ClusterQueue team-a: insufficient unused quota for cpu in "
            "flavor default-flavor"
        )
        assert "position" not in cond["message"]
        await asyncio.sleep(3)
        assert len(bound(api_server)) == 2  # it keeps waiting

        # ---- the quota raised in the API server lets it in
        emu.upsert(cluster_queue("team-a", "3"))

        async def three_bound() -> bool:
            """the third pod is bound once the quota allows it"""
            return len(bound(api_server)) == 3

        await eventually(three_bound, 60)

        # ---- a pod Kueue manages: held by Kueue's gate, never by berth's quota, bound once
        # Kueue lifts the gate although the ClusterQueue is full (berth does not charge it)
        kueue_pod = queued("kq", "lq-a", **{"kueue.x-k8s.io/managed": "true"})
        kueue_pod["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
        emu.upsert(kueue_pod)
        await asyncio.sleep(4)
        assert "kq" not in bound(api_server)
        assert "Waiting for quota" not in condition(api_server, "kq").get("message", "")
        del kueue_pod["spec"]["schedulingGates"]
        emu.upsert(kueue_pod)

        async def kueue_pod_bound() -> bool:
            """the pod Kueue admitted is bound by berth"""
            return "kq" in bound(api_server)

        await eventually(kueue_pod_bound, 60)

        # ---- the ClusterQueue deleted in the API server: followed
        emu.drop("clusterqueues", "", "team-a")
        emu.upsert(queued("p4", "lq-a"))

        async def no_queue() -> bool:
            """p4 says its ClusterQueue is gone"""
            return "ClusterQueue team-a doesn't exist" in condition(api_server, "p4").get(
                "message", ""
            )

        await eventually(no_queue, 60)
        assert "p4" not in bound(api_server)
        assert set(emu.calls) <= API_CALLS
    finally:
        await stack.close()


@pytest.mark.parametrize(
    ("manifest", "check"),
    [
        (
            {**cluster_queue("q", "4", cohort="c"), "apiVersion": "kueue.x-k8s.io/v1beta2"},
            lambda o: o.spec.cohort == "c",
        ),
        (
            {**cohort("c", "root"), "apiVersion": "kueue.x-k8s.io/v1beta2"},
            lambda o: o.spec.parent == "root",
        ),
        (
            {**cohort("c", "root", version="v1beta1"), "apiVersion": "kueue.x-k8s.io/v1beta1"},
            lambda o: o.spec.parent == "root",
        ),
        (
            {**local_queue("lq", "q"), "apiVersion": "kueue.x-k8s.io/v1beta2"},
            lambda o: o.spec.cluster_queue == "q",
        ),
        ({**flavor(), "apiVersion": "kueue.x-k8s.io/v1beta2"}, lambda o: o.key == "default-flavor"),
    ],
)
def test_manifests_in_the_versions_kueue_serves_are_applied_unchanged(
    manifest: dict[str, Any], check: Any
) -> None:
    obj = decode_object(manifest)
    assert check(obj)
    assert manifest["apiVersion"] != "kueue.x-k8s.io/v1beta1" or manifest["kind"] == "Cohort"


def test_a_version_kueue_does_not_serve_is_refused_with_the_expected_one() -> None:
    manifest = {**cluster_queue("q", "4"), "apiVersion": "kueue.x-k8s.io/v1"}
    with pytest.raises(ManifestError, match=re.escape('unknown apiVersion "kueue.x-k8s.io/v1"')):
        decode_object(manifest)
    v1beta2 = {**cluster_queue("q", "4"), "apiVersion": "kueue.x-k8s.io/v1beta2"}
    v1beta2["spec"]["admissionChecksStrategy"] = {"admissionChecks": []}
    with pytest.raises(
        ManifestError, match=re.escape("spec.admissionChecksStrategy: unknown field")
    ):
        decode_object(v1beta2)


async def test_in_kueue_mode_berth_holds_no_pod_for_quota(
    api_server: ApiServer, dev_servers: DevServers
) -> None:
    """kueue.mode kueue (BERTH_KUEUE_MODE): Kueue admits, so berth neither holds nor charges
    a pod of a LocalQueue: with a ClusterQueue of 1 cpu, both 1-cpu pods are bound."""
    emu = api_server.emulator
    emu.upsert(node("n1"))
    emu.upsert(flavor())
    emu.upsert(cluster_queue("team-a", "1"))
    emu.upsert(local_queue("lq-a", "team-a"))
    emu.upsert(queued("p1", "lq-a"))
    emu.upsert(queued("p2", "lq-a"))
    settings = StackSettings.isolated(
        dev_servers.redis_url, dev_servers.kafka_bootstrap, take_default_scheduler=True
    )
    stack = await start_stack(
        settings=settings,
        kube=str(api_server.kubeconfig),
        session_ms=1500,
        extra_env={"BERTH_KUEUE_MODE": "kueue"},
    )
    try:

        async def both_bound() -> bool:
            """both pods are bound, over the ClusterQueue's quota"""
            return {"p1", "p2"} <= set(bound(api_server))

        await eventually(both_bound, 90)
        for name in ("p1", "p2"):
            assert "Waiting for quota" not in condition(api_server, name).get("message", "")
    finally:
        await stack.close()
