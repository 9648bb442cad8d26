"""Per-component Redis ACL users in Kubernetes mode: the adapter, queue, worker and binder run
against the API emulator, each logged in as its own user under the chart's rule
(deploy/helm/berth/files/redis-acl.yaml). Pods are bound through pods/binding, the unfit pod
is explained on the API object, and Redis refused none of their commands (ACL LOG)."""

from __future__ import annotations

from pathlib import Path

import kmock

from cli.servers import DevServers
from cli.supervisor import start_stack
from shared.runtime.redisconn import connect
from tests.conftest import delete_prefixed
from tests.kube.conftest import write_kubeconfig
from tests.kube.emulator import ApiEmulator
from tests.kube.test_adapter import eventually, node, pod
from tests.security.redis_acl import (
    Prefixes,
    acl_refusals,
    component_env,
    drop_users,
    make_users,
    server_major,
)

KINDS = {"queue": "queue", "worker": "scheduler", "binder": "binder", "adapter": "adapter"}


async def test_kubernetes_mode_runs_with_every_component_as_its_own_user(
    dev_servers: DevServers, tmp_path: Path
) -> None:
    settings = dev_servers.isolated_settings(take_default_scheduler=True)
    admin = connect(settings.redis_url, settings.redis_security)
    redis7 = await server_major(admin) >= 7
    prefixes = Prefixes(settings.store_prefix, settings.cluster, settings.queue_prefix)
    users = await make_users(admin, KINDS.values(), prefixes, settings.topic_suffix, redis7=redis7)
    try:
        async with ApiEmulator() as emu, kmock.Server(emu) as server:
            kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", str(server.url).rstrip("/"))
            for name in ("n1", "n2"):
                emu.upsert(node(name))
            for i in range(4):
                emu.upsert(pod(f"p{i}", priority=0))
            emu.upsert(pod("too-big", "100", priority=0))
            stack = await start_stack(
                settings=settings,
                kube=str(kubeconfig),
                session_ms=1500,
                component_env=component_env(users, KINDS),
            )
            try:

                async def all_bound() -> bool:
                    """the four pods that fit are bound through pods/binding"""
                    return {
                        o["metadata"]["name"] for o in emu.of("pods") if o["spec"].get("nodeName")
                    } == {f"p{i}" for i in range(4)}

                await eventually(all_bound, 60)

                async def explained() -> str:
                    """too-big carries PodScheduled=False"""
                    obj = emu.object("pods", "default", "too-big") or {}
                    for c in (obj.get("status") or {}).get("conditions") or []:
                        if c.get("type") == "PodScheduled" and c.get("status") == "False":
                            return str(c.get("message", ""))
                    return ""

                assert "Insufficient cpu" in await eventually(explained, 30)
                assert ("", "pods/binding", "create") in emu.calls
                refusals = await acl_refusals(admin, {user for user, _ in users.values()})
                # The one refusal by design: the adapter asks INFO (the server's run_id) once,
                # is refused (@dangerous) and goes by its epoch token alone.
                adapter = users["adapter"][0]
                assert {(r["username"], r["object"]) for r in refusals} <= {(adapter, "info")}
            finally:
                await stack.close()
    finally:
        await drop_users(admin, users)
        await delete_prefixed(admin, settings.store_prefix)
        await admin.aclose()
