"""The adapter survives every answer an API server gives (issue 20, item 1) and behaves as a
good API client (item 2), against the emulator's error injection, stalls, pages, field
selectors, lagging cache and slow answers, with a real Redis and broker."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any, cast

import pytest
import redis.asyncio as aioredis
from redis.exceptions import NoPermissionError

from services.adapter.events import FINISH_SECONDS, REFRESH_SECONDS, EventRecorder
from services.adapter.leader import LeaderElector, LeaseSettings
from services.adapter.service import AdapterConfig, AdapterService
from services.adapter.sink import StoreSink
from services.adapter.status import Reporter, StatusWriter
from shared.config.types import LeaderElection
from shared.kube.client import ClientSettings, KubeApi, KubeApiError, TokenBucket, load_config
from shared.messaging.kafka import Topics
from shared.messaging.messages import Outcome, OutcomeResult
from shared.runtime.env import group_options
from shared.runtime.redisconn import connect
from shared.runtime.retry import Backoff
from shared.runtime.security import RedisSecurity
from shared.store import ClusterStore
from tests.kube.conftest import ApiServer
from tests.kube.test_adapter import FAST_LEASE, eventually, node, pod

Servers = tuple[ApiServer, aioredis.Redis, str, str, Topics, str]


@pytest.fixture
def servers(
    api_server: ApiServer,
    redis_client: aioredis.Redis,
    redis_prefix: str,
    kafka_bootstrap: str,
    topics: Topics,
    group_id: str,
) -> Servers:
    return api_server, redis_client, redis_prefix, kafka_bootstrap, topics, group_id


@contextlib.asynccontextmanager
async def adapter(
    servers: Servers, client: ClientSettings | None = None, **config: Any
) -> AsyncIterator[tuple[AdapterService, asyncio.Task[None]]]:
    api_server, redis_client, prefix, bootstrap, topics, group_id = servers
    api = KubeApi(load_config(str(api_server.kubeconfig)), settings=client)
    base = AdapterConfig(
        identity="adapter-a",
        scheduler_names=frozenset({"berth"}),
        key_prefix=prefix,
        topics=topics,
        group_id=group_id,
        lease=FAST_LEASE,
        watch_timeout_seconds=5,
        consumer_options=group_options(3000),
    )
    service = AdapterService(redis_client, bootstrap, api, replace(base, **config))
    for reflector in service.reflectors:
        reflector.retry.backoff = Backoff(0.05, 0.5)
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    try:
        await asyncio.wait_for(service.synced.wait(), 20)
        yield service, task
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
        await api.close()


def berth_pod(name: str, **kw: Any) -> dict[str, Any]:
    return pod(name, scheduler="berth", **kw)


def reflector(service: AdapterService, kind: str) -> Any:
    return next(r for r in service.reflectors if r.kind == kind)


async def pod_names(store: ClusterStore) -> set[str]:
    return {p.metadata.name for p in (await store.load_snapshot()).pods}


@pytest.mark.parametrize("code", [401, 403, 429, 500, 503])
async def test_an_error_answer_to_a_watch_is_retried_not_fatal(servers: Servers, code: int) -> None:
    """A watch answered with an HTTP error (read in full: no httpx.ResponseNotRead) is a
    KubeApiError like any other: backed off and retried, the adapter keeps running."""
    emu = servers[0].emulator
    emu.upsert(node("n1"))
    store = ClusterStore(servers[1], prefix=servers[2])
    async with adapter(servers) as (service, task):
        emu.fail_next("WATCH", "pods", code, count=2)
        emu.drop_watches()
        await asyncio.sleep(0.3)
        emu.upsert(berth_pod("after"))

        async def arrived() -> bool:
            """the pod created after the failed watches reached the store"""
            return "after" in await pod_names(store)

        await eventually(arrived)
        assert not task.done()
        failed = [c for c in emu.calls if c == ("", "pods", "watch")]
        assert len(failed) >= 3  # the first, two refused, the one that worked
        assert reflector(service, "Pod").relists == 1  # the position was kept


async def test_retry_after_is_honoured_on_lists_and_watches(servers: Servers) -> None:
    emu = servers[0].emulator
    emu.upsert(node("n1"))
    emu.fail_next("LIST", "nodes", 429, retry_after=1)
    started = time.monotonic()
    async with adapter(servers) as (service, _task):
        # The backoff is 0.05 s: only the server's Retry-After explains a second's wait.
        assert time.monotonic() - started >= 1.0
        assert reflector(service, "Node").last_pause >= 1.0
        emu.fail_next("WATCH", "pods", 503, retry_after=1)
        emu.drop_watches()
        pods = reflector(service, "Pod")

        async def paused() -> bool:
            """the Pod reflector paused for the watch's Retry-After"""
            return bool(pods.last_pause >= 1.0)

        await eventually(paused, 5)


async def test_a_stalled_watch_is_dropped_after_the_read_timeout(servers: Servers) -> None:
    """A connection that stays open and goes silent (not even BOOKMARKs, which the server
    sends every bookmark interval) is dead: after the read timeout the watch resumes."""
    emu = servers[0].emulator
    emu.bookmark_interval = 0.2
    emu.upsert(node("n1"))
    store = ClusterStore(servers[1], prefix=servers[2])
    client = ClientSettings(watch_read_timeout=1.0)
    async with adapter(servers, client, watch_timeout_seconds=300) as (_service, _task):
        await asyncio.sleep(0.5)  # bookmarks keep a quiet watch alive past its read timeout
        emu.stall_watches()
        emu.upsert(berth_pod("while-stalled"))

        async def arrived() -> bool:
            """the pod created while the watch was stalled reached the store"""
            return "while-stalled" in await pod_names(store)

        await eventually(arrived, 6)


async def test_lists_are_paged_from_the_watch_cache_without_finished_pods(
    servers: Servers,
) -> None:
    emu = servers[0].emulator
    emu.upsert(node("n1"))
    for i in range(5):
        emu.upsert(berth_pod(f"p{i}"))
    for i in range(3):
        emu.upsert(pod(f"done{i}", node_name="n1", phase="Succeeded"))
    store = ClusterStore(servers[1], prefix=servers[2])
    async with adapter(servers, ClientSettings(page_size=2)):
        assert await pod_names(store) == {f"p{i}" for i in range(5)}
        lists = [q for m, path, q in emu.requests if path == "/api/v1/pods" and "watch" not in q]
        assert len(lists) == 3  # 2 + 2 + 1
        assert lists[0]["resourceVersion"] == "0"
        assert "continue" not in lists[0]
        assert all("continue" in q and "resourceVersion" not in q for q in lists[1:])
        assert {q["limit"] for q in lists} == {"2"}
        selector = "status.phase!=Succeeded,status.phase!=Failed"
        assert {q["fieldSelector"] for q in lists} == {selector}
        watches: list[Any] = []
        for _ in range(200):  # the watch starts right after the last page is applied
            watches = [q for m, path, q in emu.requests if path == "/api/v1/pods" and "watch" in q]
            if watches:
                break
            await asyncio.sleep(0.05)
        assert watches[0]["fieldSelector"] == selector
        # A running pod that finishes leaves the watch's selection: a DELETED event.
        emu.upsert(pod("runs", node_name="n1", phase="Running"))

        async def running() -> bool:
            """the running pod counts on n1"""
            return (await store.usage("n1")).requested.get("cpu", 0) == 1000

        await eventually(running)
        emu.upsert(pod("runs", node_name="n1", phase="Succeeded"))

        async def freed() -> bool:
            """the finished pod left n1"""
            return (await store.usage("n1")).requested.get("cpu", 0) == 0

        await eventually(freed)


async def test_an_expired_continue_token_lists_again_from_the_start(
    api_server: ApiServer,
) -> None:
    emu = api_server.emulator
    for i in range(6):
        emu.upsert(berth_pod(f"p{i}"))
    emu.delay["pods"] = 0.2
    api = KubeApi(load_config(str(api_server.kubeconfig)), settings=ClientSettings(page_size=2))
    try:
        listing = asyncio.create_task(api.list("Pod"))
        await asyncio.sleep(0.3)  # the first page is answered, the second is on its way
        emu.upsert(berth_pod("p6"))
        emu.compact()
        items, _version = await listing
        assert sorted(i["metadata"]["name"] for i in items) == [f"p{i}" for i in range(7)]
        tokens = [bool(q.get("continue")) for _m, _p, q in emu.requests]
        assert tokens[:3] == [False, True, False]  # page 2 got 410: the list started again
    finally:
        await api.close()


async def test_a_lagging_cache_neither_regresses_the_store_nor_loses_the_position(
    servers: Servers,
) -> None:
    """A relist served from a stale watch cache (resourceVersion=0) shows an older pod than
    the store holds: the newer stays. A watch resumed from a version the cache has not
    reached is answered 504 "Too large resource version": retried after its Retry-After,
    from the same position (no relist)."""
    emu = servers[0].emulator
    emu.upsert(node("n1"))
    emu.upsert(berth_pod("a"))
    store = ClusterStore(servers[1], prefix=servers[2])
    async with adapter(servers) as (service, _task):
        pods = reflector(service, "Pod")
        emu.lag()
        emu.upsert(pod("a", scheduler="berth", node_name="n1", phase="Running"))

        async def bound() -> bool:
            """the watch brought the binding"""
            return await store.bindings.bound_node("default/a") == "n1"

        await eventually(bound)
        emu.drop_watches()

        async def refused() -> bool:
            """the resumed watch met the lagging cache and waited its Retry-After"""
            return bool(pods.last_pause >= 1.0)

        await eventually(refused, 5)
        assert pods.relists == 1
        emu.catch_up()
        # Now a relist from the (again lagging) cache: the stale, unbound pod is not taken.
        emu.lag()
        pods.resync()

        async def relisted() -> bool:
            """the Pod reflector listed again"""
            return bool(pods.relists >= 2)

        await eventually(relisted)
        assert await store.bindings.bound_node("default/a") == "n1"


async def test_an_older_version_of_a_stored_object_is_not_applied(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    store = ClusterStore(redis_client, prefix=redis_prefix)
    sink = StoreSink(store, {"berth"})
    newer = pod("x", scheduler="berth", node_name="n1", phase="Running")
    newer["metadata"].update(uid="U", resourceVersion="9")
    older = berth_pod("x")
    older["metadata"].update(uid="U", resourceVersion="7")
    assert await sink.put("Pod", newer) == "applied"
    assert await sink.put("Pod", older) == "unchanged"
    assert await store.bindings.bound_node("default/x") == "n1"
    assert sink.stats["stale"] == 1


async def test_a_store_that_lost_its_data_is_listed_again(servers: Servers) -> None:
    """Redis came back with less (here: every key of the store deleted): the adapter notices
    the store's epoch changed and lists every kind again instead of resuming its watches."""
    emu = servers[0].emulator
    redis_client, prefix = servers[1], servers[2]
    emu.upsert(node("n1"))
    for i in range(3):
        emu.upsert(berth_pod(f"p{i}"))
    store = ClusterStore(redis_client, prefix=prefix)
    async with adapter(servers, store_check_seconds=0.2) as (service, task):
        assert await pod_names(store) == {"p0", "p1", "p2"}
        keys = [k async for k in redis_client.scan_iter(match=prefix + "*")]
        await redis_client.delete(*keys)
        assert await pod_names(store) == set()

        async def restored() -> bool:
            """the pods and the node are back in the store"""
            return await pod_names(store) == {"p0", "p1", "p2"} and (
                await store.get_node("n1") is not None
            )

        await eventually(restored)
        assert reflector(service, "Pod").relists >= 2
        assert not task.done()


async def test_a_slow_server_cannot_hold_a_renewal_past_the_renew_deadline(
    api_server: ApiServer,
) -> None:
    """Renewals are cut off at the renew deadline, counted from the start of the last
    successful one: the leader stops before a candidate could take the Lease."""
    settings = LeaseSettings(lease_duration=2.0, renew_deadline=1.0, retry_period=0.2)
    api = KubeApi(load_config(str(api_server.kubeconfig)))
    a = LeaderElector(api, "a", settings)
    try:
        await a.acquire()
        renewed_at = a._renewed_at
        api_server.emulator.delay["leases"] = 5.0  # answers arrive, but too late
        started = time.monotonic()
        await asyncio.wait_for(a.hold(), 4.0)
        assert a.lost.is_set()
        assert time.monotonic() - started < 2.0
        assert time.monotonic() - renewed_at < settings.lease_duration
    finally:
        await api.close()


def test_leader_election_settings_come_from_the_configuration() -> None:
    config = LeaderElection(
        lease_duration=30.0, renew_deadline=20.0, retry_period=4.0, resource_name="mine"
    )
    lease = LeaseSettings.from_config(config, namespace="berth", name="from-env")
    assert lease == LeaseSettings("berth", "mine", 30.0, 20.0, 4.0)
    assert LeaseSettings.from_config(LeaderElection()).name == "berth-adapter"


async def test_without_leader_election_the_adapter_leads_with_no_lease(
    servers: Servers,
) -> None:
    emu = servers[0].emulator
    emu.upsert(node("n1"))
    store = ClusterStore(servers[1], prefix=servers[2])
    async with adapter(servers, leader_elect=False):
        assert await store.get_node("n1") is not None
        assert not [c for c in emu.calls if c[1] == "leases"]


async def test_the_rate_limiter_spaces_requests_past_the_burst() -> None:
    bucket = TokenBucket(qps=20.0, burst=5)
    started = time.monotonic()
    for _ in range(15):
        await bucket.take()
    # 5 at once, then 10 at 20 a second: about half a second.
    assert 0.4 <= time.monotonic() - started < 1.5
    unlimited = TokenBucket(qps=-1, burst=1)
    started = time.monotonic()
    for _ in range(1000):
        await unlimited.take()
    assert time.monotonic() - started < 0.5


async def test_a_pod_with_a_dynamic_resource_claim_is_refused_and_told_why(
    servers: Servers,
) -> None:
    emu = servers[0].emulator
    emu.upsert(node("n1"))
    claims = {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}
    emu.upsert(berth_pod("dra", extra_spec=claims))
    emu.upsert(berth_pod("plain"))
    store = ClusterStore(servers[1], prefix=servers[2])
    async with adapter(servers):

        async def explained() -> bool:
            """the DRA pod carries its FailedScheduling Event"""
            return any(e.get("reason") == "FailedScheduling" for e in emu.of("events"))

        await eventually(explained)
        assert await pod_names(store) == {"plain"}
        (event,) = emu.of("events")
        assert 'resource claim "gpu" (one-gpu)' in event["message"]
        assert "DynamicResources" in event["message"]


async def test_binding_a_terminating_pod_is_refused_and_an_evicted_pod_lingers(
    api_server: ApiServer,
) -> None:
    emu = api_server.emulator
    emu.eviction_grace = 0.5
    emu.upsert(berth_pod("victim", node_name="n1", phase="Running"))
    emu.upsert(berth_pod("pending"))
    api = KubeApi(load_config(str(api_server.kubeconfig)))
    try:
        await api.evict(
            "default", "victim", emu.objects[("pods", "default", "victim")]["metadata"]["uid"]
        )
        lingering = emu.object("pods", "default", "victim")
        assert lingering is not None
        assert lingering["metadata"]["deletionTimestamp"]
        await asyncio.sleep(0.8)
        assert emu.object("pods", "default", "victim") is None
        emu.delete_gracefully("pods", "default", "pending", 30)
        uid = emu.objects[("pods", "default", "pending")]["metadata"]["uid"]
        with pytest.raises(KubeApiError) as refused:
            await api.bind("default", "pending", uid, "n1")
        assert refused.value.code == 409
        assert "being deleted" in refused.value.message
    finally:
        await api.close()


async def test_outcomes_write_only_what_changed_and_only_on_berths_pods(
    api_server: ApiServer, redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """The status writer patches a condition once (the same outcome again writes nothing),
    with the uid as precondition; it writes nothing for a pod of another scheduler, another
    life of the name, or a pod bound already (a stale unschedulable outcome)."""
    emu = api_server.emulator
    store = ClusterStore(redis_client, prefix=redis_prefix)
    sink = StoreSink(store, {"berth"})
    for body in (
        berth_pod("mine"),
        berth_pod("bound", node_name="n1", phase="Running"),
        pod("foreign", scheduler="volcano", node_name="n1", phase="Running"),
    ):
        served = emu.upsert(body)
        assert await sink.put("Pod", copy.deepcopy(served)) == "applied"
    api = KubeApi(load_config(str(api_server.kubeconfig)))
    reporter = Reporter(api, "adapter-a")
    writer = StatusWriter(reporter, store, cast(Any, None), frozenset({"berth"}))

    def uid(name: str) -> str:
        return str(emu.objects[("pods", "default", name)]["metadata"]["uid"])

    def outcome(name: str, result: OutcomeResult, uid_: str | None = None) -> Outcome:
        key = f"default/{name}"
        message = "0/1 nodes are available: 1 Insufficient cpu."
        return Outcome("t", key, uid_ or uid(name), 1, result, message=message)

    try:
        await writer.write(outcome("mine", "unschedulable"))
        version = emu.objects[("pods", "default", "mine")]["metadata"]["resourceVersion"]
        await writer.write(outcome("mine", "unschedulable"))
        assert emu.objects[("pods", "default", "mine")]["metadata"]["resourceVersion"] == version
        assert reporter.patches == 1
        patches = [p for m, p, _ in emu.requests if m == "PATCH" and p.endswith("/status")]
        assert patches == ["/api/v1/namespaces/default/pods/mine/status"]
        assert writer.dropped == 0

        await writer.write(outcome("foreign", "unschedulable"))
        await writer.write(outcome("bound", "unschedulable"))
        await writer.write(outcome("mine", "error", uid_="another-life"))
        await writer.write(outcome("nobody", "unschedulable", uid_="x"))
        assert writer.dropped == 4
        assert [p for m, p, _ in emu.requests if m == "PATCH" and p.endswith("/status")] == patches
        bound = emu.objects[("pods", "default", "bound")]
        assert "conditions" not in bound["status"]

        # The name now belongs to another pod the store has not seen yet: the uid
        # precondition refuses the patch.
        emu.drop("pods", "default", "mine")
        emu.upsert(berth_pod("mine"))
        await writer.write(outcome("mine", "error", uid_=(await store_uid(store, "mine"))))
        fresh = emu.objects[("pods", "default", "mine")]
        assert "conditions" not in fresh["status"]
        # sent, and refused with 409
        assert [
            p for m, p, _ in emu.requests if m == "PATCH" and p.endswith("/status")
        ] == patches * 2
    finally:
        await api.close()


async def store_uid(store: ClusterStore, name: str) -> str:
    stored = await store.get_pod("default", name)
    assert stored is not None
    return stored.metadata.uid


async def test_repeated_events_become_one_series_as_kube_schedulers_recorder_writes_them(
    api_server: ApiServer,
) -> None:
    """events.k8s.io/v1: the first FailedScheduling is created, the second turns it into a
    series (count 2, patched at once), later ones only count until the series is refreshed
    or finished; a different pod, or another reason, is an Event of its own."""
    emu = api_server.emulator
    now = [1000.0]
    api = KubeApi(load_config(str(api_server.kubeconfig)))
    recorder = EventRecorder(api, "adapter-a", clock=lambda: now[0])

    async def fail(name: str, note: str, reason: str = "FailedScheduling") -> None:
        await recorder.record(
            "default",
            name,
            f"uid-{name}",
            controller="berth",
            event_type="Warning",
            reason=reason,
            action="Scheduling",
            note=note,
        )

    try:
        await fail("a", "0/3 nodes are available: 3 Insufficient cpu.")
        (event,) = emu.of("events")
        assert event["note"] == event["message"] == "0/3 nodes are available: 3 Insufficient cpu."
        assert event["regarding"]["uid"] == "uid-a"
        assert event["reportingController"] == "berth"
        assert "series" not in event
        now[0] += 1
        await fail("a", "0/3 nodes are available: 2 Insufficient cpu.")  # another note
        (event,) = emu.of("events")
        assert event["series"]["count"] == 2
        for _ in range(20):
            now[0] += 1
            await fail("a", "0/3 nodes are available: 3 Insufficient cpu.")
        (event,) = emu.of("events")
        assert event["series"]["count"] == 2  # counted in memory
        assert (recorder.created, recorder.patched) == (1, 1)
        await fail("b", "0/3 nodes are available: 3 Insufficient cpu.")
        await fail("a", "preempting", reason="Preempting")
        assert len(emu.of("events")) == 3
        now[0] += REFRESH_SECONDS - 100  # still observed: the series is refreshed
        await fail("a", "0/3 nodes are available: 3 Insufficient cpu.")
        now[0] += 101
        await recorder.tick()
        series = [e for e in emu.of("events") if e.get("series")]
        assert [e["series"]["count"] for e in series] == [23]
        now[0] += FINISH_SECONDS + 1  # quiet: finished and forgotten
        await recorder.tick()
        assert recorder.kept == {}
        await fail("a", "0/3 nodes are available: 3 Insufficient cpu.")
        assert len(emu.of("events")) == 4  # a new Event starts the next series
        calls = {c for c in emu.calls if c[1] == "events"}
        assert calls == {
            ("events.k8s.io", "events", "create"),
            ("events.k8s.io", "events", "patch"),
        }
    finally:
        await api.close()


async def test_the_adapter_works_as_its_own_redis_acl_user_confined_to_the_store(
    servers: Servers, redis_url: str
) -> None:
    """Per-component Redis users: the adapter logs in as its own user (BERTH_REDIS_USERNAME
    and BERTH_REDIS_PASSWORD, from the chart's Secret) whose ACL allows the store's keys only
    and none of the dangerous commands (INFO included: the epoch check goes on without the
    server's run_id). It lists and watches into the store; the queue's keys are out of reach."""
    api_server, admin, prefix = servers[0], servers[1], servers[2]
    user, password = f"berth-adapter-{prefix.strip(':').replace(':', '-')}", "s3cret-adapter-pw"
    await admin.acl_setuser(
        user,
        enabled=True,
        passwords=[f"+{password}"],
        reset_keys=True,
        keys=[f"{prefix}*"],
        commands=["+@all", "-@dangerous", "+acl|whoami"],
    )
    security = RedisSecurity.from_env(
        {"BERTH_REDIS_USERNAME": user, "BERTH_REDIS_PASSWORD": password}
    )
    confined = connect(redis_url, security)
    try:
        assert await confined.acl_whoami() == user
        with pytest.raises(NoPermissionError):
            await confined.set("berth:q:someone-elses", "x")
        emu = api_server.emulator
        emu.upsert(node("n1"))
        emu.upsert(berth_pod("p"))
        store = ClusterStore(confined, prefix=prefix)
        async with adapter((servers[0], confined, *servers[2:])) as (service, _task):
            assert await pod_names(store) == {"p"}
            assert service.sink._run_id_readable is False
    finally:
        await confined.aclose()
        await admin.acl_deluser(user)


async def test_every_request_waits_for_the_client_side_rate_limit(api_server: ApiServer) -> None:
    """clientConnection's qps/burst hold lists, watches and writes alike."""
    api = KubeApi(
        load_config(str(api_server.kubeconfig)), settings=ClientSettings(qps=10.0, burst=2)
    )
    try:
        started = time.monotonic()
        for _ in range(3):
            await api.get_lease("kube-system", "none")
        for _ in range(3):
            await api.list("Node")
        # 2 at once, then 4 at 10 a second.
        assert time.monotonic() - started >= 0.35
        assert api.requests == 6
        assert api.limiter.waited >= 0.35
    finally:
        await api.close()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_pages_through_the_emulator_and_filters_by_field(
    api_server: ApiServer,
) -> None:
    """A real kubectl's chunked list (limit/continue) and field selector get what an API
    server would give: the emulator's pages and selectors are wire-compatible."""
    emu = api_server.emulator
    for i in range(5):
        emu.upsert(berth_pod(f"p{i}"))
    emu.upsert(pod("done", node_name="n1", phase="Succeeded"))

    async def kubectl(*args: str) -> list[str]:
        process = await asyncio.create_subprocess_exec(
            "kubectl", "--kubeconfig", str(api_server.kubeconfig), "get", "pods",
            "-o", "name", *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        return out.decode().split()

    assert len(await kubectl("--chunk-size=2")) == 6
    limits = [q.get("limit") for _m, p, q in emu.requests if p.endswith("/pods")]
    assert "2" in limits
    assert sum(1 for _m, p, q in emu.requests if q.get("continue")) == 2
    running = await kubectl("--field-selector=status.phase!=Succeeded")
    assert sorted(running) == [f"pod/p{i}" for i in range(5)]


async def test_continue_tokens_that_keep_expiring_end_in_one_unpaginated_list(
    api_server: ApiServer,
) -> None:
    emu = api_server.emulator
    for i in range(6):
        emu.upsert(berth_pod(f"p{i}"))
    emu.expire_continue_tokens = True
    api = KubeApi(load_config(str(api_server.kubeconfig)), settings=ClientSettings(page_size=2))
    try:
        items, _version = await api.list("Pod")
        assert sorted(i["metadata"]["name"] for i in items) == [f"p{i}" for i in range(6)]
        firsts = [q for _m, _p, q in emu.requests if "continue" not in q]
        assert [q.get("limit") for q in firsts] == ["2", "2", None]
    finally:
        await api.close()


async def test_a_burst_of_watch_events_reaches_the_store_in_batches(servers: Servers) -> None:
    """200 pods created at once arrive as 200 watch events; the adapter writes them in
    batches (one record read and one apply script each), not 200 writes, so the queue takes
    them in as batches too."""
    emu = servers[0].emulator
    emu.upsert(node("n1"))
    store = ClusterStore(servers[1], prefix=servers[2])
    async with adapter(servers) as (service, _task):
        batches: list[int] = []
        put_batch = service.sink.put_batch

        async def counted(kind: str, bodies: Any) -> list[str]:
            if kind == "Pod":
                batches.append(len(bodies))
            return await put_batch(kind, bodies)

        service.sink.put_batch = counted  # type: ignore[method-assign]
        for i in range(200):
            emu.upsert(berth_pod(f"b{i:03d}"))

        async def stored() -> bool:
            """the 200 pods are in the store"""
            return len(await pod_names(store)) == 200

        await eventually(stored)
        assert sum(batches) == 200
        # Here the emulator shares the adapter's event loop and trickles the events out; a
        # batch still takes what arrived during the previous write.
        assert len(batches) <= 100, batches
