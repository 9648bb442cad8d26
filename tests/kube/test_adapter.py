"""The adapter against the API emulator and a real Redis and broker: what it lists and
watches into the store, and how it survives 410 Gone, API errors and replays."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from services.adapter import reflector as reflector_module
from services.adapter.leader import LeaseSettings
from services.adapter.service import AdapterConfig, AdapterService
from services.adapter.sink import StoreSink
from shared.kube.client import KubeApi, load_config
from shared.messaging.kafka import Topics
from shared.models import Pod
from shared.runtime.env import group_options
from shared.runtime.retry import Backoff
from shared.store import ClusterStore
from tests.kube.conftest import ApiServer

FAST_LEASE = LeaseSettings(
    namespace="kube-system", lease_duration=2.0, renew_deadline=1.5, retry_period=0.2
)


def node(name: str, cpu: str = "4", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {
            "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str,
    cpu: str = "1",
    *,
    scheduler: str = "default-scheduler",
    node_name: str = "",
    phase: str = "Pending",
    namespace: str = "default",
    priority: int | None = None,
    extra_spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
        **(extra_spec or {}),
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"phase": phase},
    }


async def eventually(check: Callable[[], Any], seconds: float = 15.0) -> Any:
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        result = await check()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not true after {seconds}s: {check.__doc__ or check}")
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def running_adapter(
    api_server: ApiServer,
    redis_client: aioredis.Redis,
    redis_prefix: str,
    kafka_bootstrap: str,
    topics: Topics,
    group_id: str,
    identity: str = "adapter-a",
) -> AsyncIterator[AdapterService]:
    api = KubeApi(load_config(str(api_server.kubeconfig)))
    config = AdapterConfig(
        identity=identity,
        scheduler_names=frozenset({"default-scheduler"}),
        key_prefix=redis_prefix,
        topics=topics,
        group_id=group_id,
        lease=FAST_LEASE,
        watch_timeout_seconds=5,
        consumer_options=group_options(3000),
    )
    service = AdapterService(redis_client, kafka_bootstrap, api, config)
    for reflector in service.reflectors:
        reflector.retry.backoff = Backoff(0.05, 0.5)
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    try:
        await asyncio.wait_for(service.synced.wait(), 20)
        yield service
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
        await api.close()


async def test_the_adapter_lists_watches_and_filters_into_the_store(
    api_server: ApiServer,
    redis_client: aioredis.Redis,
    redis_prefix: str,
    kafka_bootstrap: str,
    topics: Topics,
    group_id: str,
) -> None:
    emu = api_server.emulator
    emu.upsert(node("n1"))
    emu.upsert(node("n2", labels={"zone": "a"}))
    emu.upsert(pod("pending"))
    emu.upsert(pod("other-scheduler", scheduler="volcano"))
    emu.upsert(pod("running-elsewhere", "2", scheduler="volcano", node_name="n1", phase="Running"))
    emu.upsert(pod("finished", node_name="n2", phase="Succeeded"))
    # A field berth does not model (from a newer API server) is dropped, not an error.
    emu.upsert(pod("newer-field", extra_spec={"someFutureField": {"x": 1}}))
    # An invalid object is refused with a reason, and takes nothing else down with it.
    emu.upsert(pod("bad-quantity", cpu="-1"))
    emu.upsert(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
    )
    store = ClusterStore(redis_client, prefix=redis_prefix)
    async with running_adapter(
        api_server, redis_client, redis_prefix, kafka_bootstrap, topics, group_id
    ) as adapter:
        pods = {p.metadata.name: p for p in (await store.load_snapshot()).pods}
        assert sorted(pods) == ["newer-field", "pending", "running-elsewhere"]
        # The API's uid is the store's: the binder binds with it as precondition.
        served = emu.object("pods", "default", "pending")
        assert served is not None
        assert pods["pending"].metadata.uid == served["metadata"]["uid"]
        assert (await store.usage("n1")).requested.get("cpu") == 2000  # the foreign pod counts
        assert sorted(n.metadata.name for n in (await store.load_snapshot()).nodes) == [
            "n1",
            "n2",
        ]
        assert await store.get("PriorityClass", "", "high") is not None
        assert "default/bad-quantity" in adapter.sink.rejected
        assert (
            "spec.containers[0].resources.requests.cpu"
            in adapter.sink.rejected["default/bad-quantity"]
        )

        # Watch: additions, updates and deletions arrive.
        emu.upsert(pod("later"))
        emu.upsert(node("n2", labels={"zone": "b"}))
        emu.drop("pods", "default", "pending")

        async def watched() -> bool:
            """the watch brought the new pod, the node's label and the deletion"""
            names = {p.metadata.name for p in (await store.load_snapshot()).pods}
            n2 = await store.get_node("n2")
            return (
                names == {"newer-field", "running-elsewhere", "later"}
                and n2 is not None
                and n2.metadata.labels.get("zone") == "b"
            )

        await eventually(watched)

        # A pod finishing frees its node; a status-only change writes nothing.
        version = await store.resource_version()
        obj = emu.object("pods", "default", "later")
        assert obj is not None
        obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
        emu.upsert(obj)
        await asyncio.sleep(0.5)
        assert await store.resource_version() == version
        emu.upsert(
            pod("running-elsewhere", "2", scheduler="volcano", node_name="n1", phase="Failed")
        )

        async def freed() -> bool:
            """the failed pod left n1"""
            return (await store.usage("n1")).requested.get("cpu", 0) == 0

        await eventually(freed)


async def test_410_gone_relists_and_deletes_what_vanished_meanwhile(
    api_server: ApiServer,
    redis_client: aioredis.Redis,
    redis_prefix: str,
    kafka_bootstrap: str,
    topics: Topics,
    group_id: str,
) -> None:
    emu = api_server.emulator
    emu.upsert(node("n1"))
    for i in range(5):
        emu.upsert(pod(f"p{i}"))
    store = ClusterStore(redis_client, prefix=redis_prefix)
    async with running_adapter(
        api_server, redis_client, redis_prefix, kafka_bootstrap, topics, group_id
    ) as adapter:
        pods = next(r for r in adapter.reflectors if r.kind == "Pod")
        assert pods.relists == 1
        before = await store.resource_version()
        # The server forgets its history, then a pod is deleted and another added while
        # the watches are down: the resumed watch is answered 410 and the adapter relists.
        emu.compact()
        api_server.emulator.drop_watches()
        emu.drop("pods", "default", "p0")
        emu.upsert(pod("p5"))
        emu.compact()

        async def relisted() -> bool:
            """the Pod reflector relisted and the store matches the server"""
            names = sorted(p.metadata.name for p in (await store.load_snapshot()).pods)
            return pods.relists >= 2 and names == ["p1", "p2", "p3", "p4", "p5"]

        await eventually(relisted)
        # Exactly two writes for the pods: the deletion and the addition (the relist found
        # every other object unchanged and wrote nothing).
        nodes_and_pods = await store.resource_version() - before
        assert nodes_and_pods == 2


async def test_api_errors_are_retried_with_backoff(
    api_server: ApiServer,
    redis_client: aioredis.Redis,
    redis_prefix: str,
    kafka_bootstrap: str,
    topics: Topics,
    group_id: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    emu = api_server.emulator
    emu.upsert(node("n1"))
    # The first two lists of nodes fail with 500: the reflector backs off and lists again.
    emu.fail_next("GET", "nodes", 500, count=2)
    store = ClusterStore(redis_client, prefix=redis_prefix)
    async with running_adapter(
        api_server, redis_client, redis_prefix, kafka_bootstrap, topics, group_id
    ):
        assert await store.get_node("n1") is not None
        assert [c for c in emu.calls if c[1] == "nodes"][:3] == [("", "nodes", "list")] * 3
        assert "adapter: Node list/watch failed; retrying in" in caplog.text
        assert "500 InjectedFailure" in caplog.text


async def test_a_restarted_adapter_writes_nothing_for_what_it_already_stored(
    api_server: ApiServer,
    redis_client: aioredis.Redis,
    redis_prefix: str,
    kafka_bootstrap: str,
    topics: Topics,
    group_id: str,
) -> None:
    emu = api_server.emulator
    emu.upsert(node("n1"))
    for i in range(4):
        emu.upsert(pod(f"p{i}"))
    store = ClusterStore(redis_client, prefix=redis_prefix)
    args = (api_server, redis_client, redis_prefix, kafka_bootstrap, topics, group_id)
    async with running_adapter(*args):
        pass
    version = await store.resource_version()
    emu.drop("pods", "default", "p3")  # while no adapter runs
    async with running_adapter(*args, identity="adapter-b"):
        names = sorted(p.metadata.name for p in (await store.load_snapshot()).pods)
        assert names == ["p0", "p1", "p2"]
        assert await store.resource_version() == version + 1  # only the deletion


def test_pods_berth_takes() -> None:
    from services.adapter.sink import admit_pod
    from shared.models.decoding import Mode
    from shared.models.manifest import decode_object

    def decoded(body: dict[str, Any]) -> Pod:
        obj = decode_object(body, mode=Mode.API)
        assert isinstance(obj, Pod)
        return obj

    names = {"default-scheduler", "berth"}
    deleting = pod("x")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    bound_deleting = pod("x", node_name="n1", phase="Running")
    bound_deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    table = [
        (pod("x"), True),
        (pod("x", scheduler="berth"), True),
        (pod("x", scheduler="volcano"), False),
        (pod("x", scheduler="volcano", node_name="n1", phase="Running"), True),
        (pod("x", node_name="n1", phase="Succeeded"), False),
        (pod("x", node_name="n1", phase="Failed"), False),
        (deleting, False),
        (bound_deleting, True),  # still holds its node while it terminates
    ]
    assert [admit_pod(decoded(body), names) for body, _ in table] == [want for _, want in table]


async def test_a_name_that_comes_back_with_another_uid_replaces_the_old_life(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    store = ClusterStore(redis_client, prefix=redis_prefix)
    sink = StoreSink(store, {"default-scheduler"})

    def life(uid: str, version: str, **kw: Any) -> dict[str, Any]:
        body = pod("x", **kw)
        body["metadata"].update(uid=uid, resourceVersion=version)
        return body

    assert await sink.put("Pod", life("A", "1")) == "applied"
    assert await sink.put("Pod", life("A", "2")) == "unchanged"  # same content, new version
    # Deleted and created again while nobody watched: the new uid replaces the old.
    assert await sink.put("Pod", life("B", "3")) == "applied"
    stored = await store.get_pod("default", "x")
    assert stored is not None
    assert stored.metadata.uid == "B"
    assert sink.stats["replaced"] == 1
    # A DELETED event of the old life does not remove the new one.
    assert await sink.delete("Pod", life("A", "4")) == "unchanged"
    assert await store.get_pod("default", "x") is not None
    # The name now belongs to another scheduler: berth's old life leaves the store.
    assert await sink.put("Pod", life("C", "5", scheduler="volcano")) == "deleted"
    assert await store.get_pod("default", "x") is None
    assert await sink.seen("Pod") == {}


async def test_a_relist_batch_with_a_refused_object_still_writes_the_others(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """put_many applies a relist in batches; when the store refuses one object of a batch
    (here: the API says the pod runs elsewhere than the store thinks), each object of that
    batch is put on its own, and the API's version wins."""
    store = ClusterStore(redis_client, prefix=redis_prefix)
    sink = StoreSink(store, {"default-scheduler"})
    moved = pod("moved", node_name="n1", phase="Running")
    moved["metadata"].update(uid="M", resourceVersion="1")
    assert await sink.put("Pod", moved) == "applied"
    moved = pod("moved", node_name="n2", phase="Running")
    moved["metadata"].update(uid="M", resourceVersion="2")
    fresh = [pod(f"f{i}") for i in range(3)]
    for i, body in enumerate(fresh):
        body["metadata"].update(uid=f"F{i}", resourceVersion=str(3 + i))
    answers = await sink.put_many("Pod", [moved, *fresh, pod("bad", cpu="-1")])
    assert answers == ["applied", "applied", "applied", "applied", "invalid"]
    assert await store.bindings.bound_node("default/moved") == "n2"
    assert {p.metadata.name for p in (await store.load_snapshot()).pods} == {
        "moved",
        "f0",
        "f1",
        "f2",
    }
    # Put again, nothing changed: nothing is written.
    version = await store.resource_version()
    assert await sink.put_many("Pod", [moved, *fresh]) == ["unchanged"] * 4
    assert await store.resource_version() == version


async def test_a_kind_the_server_does_not_serve_is_followed_once_it_is(
    api_server: ApiServer,
    redis_client: aioredis.Redis,
    redis_prefix: str,
    kafka_bootstrap: str,
    topics: Topics,
    group_id: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the PodGroup CRD (404 on its list) the adapter syncs everything else, says
    so once (no error, no traceback), holds no PodGroups; once the CRD is installed, it
    follows them."""
    emu = api_server.emulator
    emu.upsert(node("n1"))
    emu.unserved.add("podgroups")
    monkeypatch.setattr(reflector_module, "ABSENT_RECHECK_SECONDS", 0.2)
    store = ClusterStore(redis_client, prefix=redis_prefix)
    async with running_adapter(
        api_server, redis_client, redis_prefix, kafka_bootstrap, topics, group_id
    ) as adapter:
        groups = next(r for r in adapter.reflectors if r.kind == "PodGroup")
        assert groups.absent
        assert await store.get_node("n1") is not None
        await asyncio.sleep(1.0)  # several checks while it stays unserved: one line
        lines = [r for r in caplog.records if "PodGroup" in r.getMessage()]
        assert [r.getMessage().split(" (")[0] for r in lines] == [
            "PodGroup is not served by the API server"
        ]
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert await store.list("PodGroup") == []

        emu.unserved.discard("podgroups")
        emu.upsert(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "gang", "namespace": "default"},
                "spec": {"minMember": 3},
            }
        )

        async def followed() -> bool:
            """the PodGroup reached the store"""
            return [g.metadata.name for g in await store.list("PodGroup")] == ["gang"]

        await eventually(followed)
        assert not groups.absent
        assert "PodGroup is served now: following it" in caplog.text


async def test_a_pod_with_a_volume_claim_is_refused_and_told_why(
    api_server: ApiServer,
    redis_client: aioredis.Redis,
    redis_prefix: str,
    kafka_bootstrap: str,
    topics: Topics,
    group_id: str,
) -> None:
    """berth binds no volumes: its pending pod with a PersistentVolumeClaim (or a generic
    ephemeral volume) stays out of the store, with PodScheduled=False and one
    FailedScheduling Event naming the claim, as kubectl describe shows them. A pod with only
    an emptyDir is taken; a pod with a claim bound by another scheduler counts on its node."""
    emu = api_server.emulator
    emu.upsert(node("n1"))
    claim = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}}]}
    scratch = {"volumes": [{"name": "tmp", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]}
    empty = {"volumes": [{"name": "tmp", "emptyDir": {}}]}
    emu.upsert(pod("db", extra_spec=claim))
    emu.upsert(pod("scratch", extra_spec=scratch))
    emu.upsert(pod("plain", extra_spec=empty))
    emu.upsert(pod("running", node_name="n1", phase="Running", extra_spec=claim))
    store = ClusterStore(redis_client, prefix=redis_prefix)
    async with running_adapter(
        api_server, redis_client, redis_prefix, kafka_bootstrap, topics, group_id
    ) as adapter:

        async def explained() -> bool:
            """both refused pods carry their condition and Event"""
            reasons = [e.get("reason") for e in emu.of("events")]
            return reasons.count("FailedScheduling") == 2

        await eventually(explained)
        names = sorted(p.metadata.name for p in (await store.load_snapshot()).pods)
        assert names == ["plain", "running"]
        db = emu.object("pods", "default", "db")
        assert db is not None
        (condition,) = db["status"]["conditions"]
        assert (condition["type"], condition["status"], condition["reason"]) == (
            "PodScheduled",
            "False",
            "Unschedulable",
        )
        assert 'PersistentVolumeClaim "data-0"' in condition["message"]
        events = {e["involvedObject"]["name"]: e for e in emu.of("events")}
        assert events["db"]["message"] == condition["message"]
        assert events["db"]["type"] == "Warning"
        assert 'ephemeral volume "tmp"' in events["scratch"]["message"]
        # A change to the pod (a label) explains nothing twice.
        labelled = pod("db", extra_spec=claim)
        labelled["metadata"]["labels"] = {"team": "a"}
        emu.upsert(labelled)
        await asyncio.sleep(0.5)
        assert len(emu.of("events")) == 2
        assert adapter.sink.stats["refused"] == 2
