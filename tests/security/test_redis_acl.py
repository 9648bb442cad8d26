"""Per-component Redis ACL users (deploy/helm/berth/files/redis-acl.yaml), on a real Redis.

A whole standalone stack runs with each component logged in as its own user under exactly the
rule the chart renders (queue, scheduler worker, binder, node agent, dashboard): pods are
bound, one preempts a lower-priority pod (the binder deletes it), an unfit pod is explained,
the dashboard's API answers, and Redis logged no refusal of any of those users (ACL LOG). Then
each user is refused what its rule leaves out: the dashboard any write, the worker the queue's
keys and the store's writes, the binder and the agent the queue's keys... The writes that
only Redis 7's read-only key permissions (%R~) and selectors can refuse are asserted when the
server is Redis 7 (Redis 6.2: the same writes are shown to pass, so the README's caveat stays
true).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cli.run import RUN_TENANT, pipeline
from cli.servers import DevServers
from scheduling.kubelet import kubelet_refusal
from shared.models import Manifests, PriorityClass, cluster_meta
from shared.runtime.env import StackSettings
from shared.runtime.redisconn import connect
from shared.runtime.security import RedisSecurity
from shared.store import ClusterStore, StoreKeys
from shared.store.objects import apply_manifests, delete_object
from tests.builders import make_node, make_pod
from tests.conftest import delete_prefixed
from tests.security.redis_acl import (
    Prefixes,
    acl_refusals,
    component_env,
    drop_users,
    make_users,
    server_major,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

KINDS = {
    "queue": "queue",
    "worker": "scheduler",
    "binder": "binder",
    "agent": "agent",
    "dashboard": "dashboard",
}
"""The stack's kinds of process -> their rule (and chart component) in redis-acl.yaml."""
TENANT = RUN_TENANT
"""The stack's one tenant queue."""
NS = "default"
HOST = "kubernetes.io/hostname"


def workload() -> Manifests:
    """Two nodes, each mostly taken by a low-priority pod; two small pods that fit, a
    high-priority pod that must evict a low one, and a pod no node can hold."""
    nodes = [
        make_node(f"n{i}").capacity(cpu="4", memory="16Gi", pods=10).label(HOST, f"n{i}").obj()
        for i in range(2)
    ]
    low = [
        make_pod(f"low-{i}").priority_class("low").req(cpu="3").node(f"n{i}").obj()
        for i in range(2)
    ]
    pods = [
        *low,
        make_pod("web-0").req(cpu="500m").obj(),
        make_pod("web-1").req(cpu="500m").obj(),
        make_pod("high").priority_class("high").req(cpu="3").obj(),
        make_pod("huge").req(cpu="64").obj(),
    ]
    classes = [
        PriorityClass(metadata=cluster_meta("low"), value=1),
        PriorityClass(metadata=cluster_meta("high"), value=1000),
    ]
    return Manifests(nodes=nodes, pods=pods, priority_classes=classes)


@dataclass
class Confined:
    settings: StackSettings
    redis7: bool
    users: dict[str, tuple[str, str]]
    """rule name -> (user, password)"""
    report: dict[str, Any]
    settled: bool
    answers: dict[str, tuple[int, Any]]
    """dashboard path -> (status, JSON)"""
    refusals_logged: list[dict[str, Any]]

    def client(self, rule: str) -> Redis:
        user, password = self.users[rule]
        return connect(self.settings.redis_url, RedisSecurity(username=user, password=password))

    @property
    def store_keys(self) -> StoreKeys:
        return StoreKeys(self.settings.store_prefix, self.settings.cluster)

    def queue_key(self, name: str) -> str:
        return f"{self.settings.queue_prefix}{{{TENANT}}}:{name}"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def confined(dev_servers: DevServers) -> AsyncIterator[Confined]:
    settings = dev_servers.isolated_settings()
    admin = connect(settings.redis_url, settings.redis_security)
    redis7 = await server_major(admin) >= 7
    prefixes = Prefixes(settings.store_prefix, settings.cluster, settings.queue_prefix)
    rules = (*KINDS.values(), "dashboard-front-door", "adapter")
    users = await make_users(admin, rules, prefixes, settings.topic_suffix, redis7=redis7)
    try:
        # The stack stops before the refusals are tried: a write Redis 6.2 lets through must
        # not reach a running service.
        async with pipeline(
            servers=dev_servers,
            settings=settings,
            dashboard=True,
            component_env=component_env(users, KINDS),
        ) as run:
            await run.apply(workload())
            settled = await run.settle(90)
            report = await run.report()
            answers: dict[str, tuple[int, Any]] = {}
            async with aiohttp.ClientSession() as http:
                for path in (
                    "api/pods?limit=0",
                    "api/nodes",
                    "api/queues",
                    "api/clusterqueues",
                    "api/events",
                    "api/stats",
                    f"api/events?pod={NS}/huge",
                ):
                    async with http.get(run.stack.dashboard_url + path) as response:
                        answers[path] = (response.status, await response.json())
        # After the stack stopped: its draining (a worker's heartbeat removed) counts too.
        logged = await acl_refusals(admin, {user for user, _ in users.values()})
        yield Confined(settings, redis7, users, report, settled, answers, logged)
    finally:
        await drop_users(admin, users)
        await delete_prefixed(admin, settings.store_prefix)
        await admin.aclose()


async def test_the_stack_schedules_with_every_component_as_its_own_user(
    confined: Confined,
) -> None:
    # No command of any component was refused: the rules hold all they need.
    assert [
        (r["username"], r["reason"], r["context"], r["object"]) for r in confined.refusals_logged
    ] == []
    assert confined.settled, confined.report
    pods = {entry["pod"]: entry for entry in confined.report["pods"]}
    assert {pods[f"{NS}/web-{i}"]["status"] for i in range(2)} == {"Scheduled"}
    high = pods[f"{NS}/high"]
    assert high["status"] == "Scheduled", high
    assert len(high["victims"]) == 1
    assert high["victims"][0].startswith(f"{NS}/low-")
    huge = pods[f"{NS}/huge"]
    assert huge["status"] == "Unschedulable"
    assert "Insufficient cpu" in huge["message"], huge


async def test_the_read_only_dashboard_answers(confined: Confined) -> None:
    for path, (status, _) in confined.answers.items():
        assert status == 200, path
    rows = {
        f"{row['namespace']}/{row['name']}": row
        for row in confined.answers["api/pods?limit=0"][1]["pods"]
    }
    assert rows[f"{NS}/web-0"]["node"] in {"n0", "n1"}
    assert "Insufficient cpu" in rows[f"{NS}/huge"]["message"], rows[f"{NS}/huge"]
    assert {row["name"] for row in confined.answers["api/nodes"][1]["nodes"]} == {"n0", "n1"}
    assert confined.answers["api/queues"][1]["workers"]


Attempt = Callable[[Confined, Redis], Awaitable[Any]]


async def _hset(c: Confined, r: Redis, key: str) -> Any:
    return await r.hset(key, "forged", "1")


def _store(c: Confined, r: Redis) -> ClusterStore:
    return ClusterStore(r, cluster=c.settings.cluster, prefix=c.settings.store_prefix)


def _forged_pod(c: Confined) -> Any:
    return make_pod("forged").req(cpu="1").obj()


REFUSED: list[tuple[str, str, Attempt, bool]] = [
    # (rule, what, attempt, only Redis 7 refuses it)
    ("dashboard", "write a store object", lambda c, r: _store(c, r).apply([_forged_pod(c)]), False),
    ("dashboard", "write a binding", lambda c, r: _hset(c, r, c.store_keys.pod_node), False),
    ("dashboard", "write a queue key", lambda c, r: _hset(c, r, c.queue_key("st")), False),
    ("dashboard", "delete a key", lambda c, r: r.delete(c.store_keys.rv), False),
    ("scheduler", "touch the queue's keys", lambda c, r: r.hgetall(c.queue_key("st")), False),
    ("scheduler", "write a store object", lambda c, r: _store(c, r).apply([_forged_pod(c)]), False),
    (
        "scheduler",
        "stream a change",
        lambda c, r: _store(c, r).bindings.ended(f"{NS}/web-0", "uid", 1),
        False,
    ),
    ("scheduler", "write a binding", lambda c, r: _hset(c, r, c.store_keys.pod_node), True),
    ("binder", "write the queue's leases", lambda c, r: _hset(c, r, c.queue_key("leases")), False),
    ("binder", "write the queue's state", lambda c, r: _hset(c, r, c.queue_key("st")), True),
    ("binder", "forge a worker heartbeat", lambda c, r: _hset(c, r, c.store_keys.workers), True),
    ("agent", "touch the queue's keys", lambda c, r: r.hgetall(c.queue_key("st")), False),
    # The adapter reads the queue's keys (quota reasons for the pods): it may not write them.
    ("adapter", "write the queue's state", lambda c, r: _hset(c, r, c.queue_key("st")), True),
    ("queue", "forge a worker heartbeat", lambda c, r: _hset(c, r, c.store_keys.workers), True),
    (
        "dashboard-front-door",
        "write a queue key",
        lambda c, r: _hset(c, r, c.queue_key("st")),
        True,
    ),
]
REFUSED += [
    (rule, "list every key (KEYS, @dangerous)", lambda c, r: r.keys("*"), False)
    for rule in (*KINDS.values(), "adapter", "dashboard-front-door")
]
REFUSED += [
    (rule, "read a key outside berth's", lambda c, r: r.get("not-berth"), False)
    for rule in (*KINDS.values(), "adapter", "dashboard-front-door")
]


def refused(exc: ResponseError) -> bool:
    """A refusal by the ACL: NOPERM at the top level, or inside a script (Redis 6.2 and 7
    word it differently)."""
    text = str(exc)
    return any(
        word in text
        for word in ("NOPERM", "no permissions", "can't access", "can't run", "permission")
    )


@pytest.mark.parametrize(
    ("rule", "what", "attempt", "redis7_only"),
    REFUSED,
    ids=[f"{rule}-{what.replace(' ', '-')}" for rule, what, _, _ in REFUSED],
)
async def test_each_component_is_refused_what_its_rule_leaves_out(
    confined: Confined, rule: str, what: str, attempt: Attempt, redis7_only: bool
) -> None:
    client = confined.client(rule)
    try:
        assert await client.ping()  # logged in as its user (PING is granted)
        if redis7_only and not confined.redis7:
            # Redis 6.2 has no read-only keys nor selectors: the caveat the README states.
            await attempt(confined, client)
            return
        with pytest.raises(ResponseError) as caught:
            await attempt(confined, client)
        assert refused(caught.value), caught.value
    finally:
        await client.aclose()


async def test_the_front_door_writes_objects_as_its_own_user(confined: Confined) -> None:
    """The dashboard-front-door rule holds what POST /api/apply and DELETE /api/objects run
    (services/dashboard/app.py): an admitted apply, a pod bound by name checked against its
    node, and deletes that give the node's room back."""
    settings = confined.settings
    admin = connect(settings.redis_url, settings.redis_security)
    prefixes = Prefixes(settings.store_prefix, settings.cluster, settings.queue_prefix)
    # A user of its own: the refusals tried above are in the ACL LOG under the module's.
    tag = f"{settings.topic_suffix}-door"
    users = await make_users(admin, ["dashboard-front-door"], prefixes, tag, redis7=confined.redis7)
    user, password = users["dashboard-front-door"]
    client = connect(settings.redis_url, RedisSecurity(username=user, password=password))
    try:
        store = _store(confined, client)
        pods = [
            make_pod("door").req(cpu="100m").obj(),
            make_pod("door-bound").req(cpu="100m").node("n0").obj(),
        ]
        for pod in pods:
            pod.spec.containers[0].image = "busybox"  # admission requires one
        report = await apply_manifests(
            store, Manifests(pods=pods), admission=True, node_check=kubelet_refusal
        )
        assert len(report.lines) == 2
        bound = await store.get_pod(NS, "door-bound")
        assert bound is not None
        assert bound.spec.node_name == "n0"
        assert await delete_object(store, "Pod", NS, "door")
        assert await delete_object(store, "Pod", NS, "door-bound")
        assert await acl_refusals(admin, {user}) == []
    finally:
        await client.aclose()
        await drop_users(admin, users)
        await admin.aclose()
