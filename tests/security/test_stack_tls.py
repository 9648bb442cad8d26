"""The whole stack over secured connections: queue, scheduler worker and binder processes
(and the test's client and observer) reach Redis over rediss:// as an ACL user, with the
password from BERTH_REDIS_PASSWORD and a client certificate, and the broker over TLS with a
client certificate, every server verified against the test CA; the pods end bound."""

from __future__ import annotations

from pathlib import Path

from cli.run import pipeline
from cli.servers import DevServers, Endpoints
from shared.models import Manifests, Pod
from shared.runtime.security import KafkaSecurity, RedisSecurity
from tests.builders import make_node, make_pod
from tests.security.tls import REDIS_PASSWORD, TLSProxy, TLSRedis


async def test_the_stack_binds_pods_over_tls(
    redis_tls: TLSRedis, kafka_tls: tuple[str, TLSProxy], pki: Path
) -> None:
    bootstrap, kafka_proxy = kafka_tls
    client = {"cert": str(pki / "client.crt"), "key": str(pki / "client.key")}
    endpoints = Endpoints(
        redis_tls.url(),  # rediss://berth@...: the password comes from the environment
        bootstrap,
        RedisSecurity(password=REDIS_PASSWORD, ca=str(pki / "ca.crt"), **client),
        KafkaSecurity("SSL", ca=str(pki / "ca.crt"), **client),
    )
    servers = DevServers(endpoints, "external", "external", 0.0)
    env = servers.isolated_settings().env()
    assert env["BERTH_REDIS_URL"].startswith("rediss://berth@")
    assert env["BERTH_REDIS_PASSWORD"] == REDIS_PASSWORD
    assert env["BERTH_KAFKA_SECURITY_PROTOCOL"] == "SSL"
    before = kafka_proxy.connections

    nodes = [make_node(f"n{i}").capacity(cpu="4", pods=10).obj() for i in range(2)]
    pods = [make_pod(f"p{i}").req(cpu="500m").obj() for i in range(6)]
    async with pipeline(workers=1, binders=1, servers=servers) as run:
        await run.apply(Manifests(nodes=nodes, pods=pods))
        assert await run.settle(60)
        stored = [p for p in await run.client.store.list("Pod") if isinstance(p, Pod)]
        assert sorted(p.metadata.name for p in stored) == [f"p{i}" for i in range(6)]
        assert all(p.spec.node_name in {"n0", "n1"} for p in stored)
        report = await run.report()
        assert report["pods"]
        assert all(row["status"] == "Scheduled" for row in report["pods"])
    # The services' Kafka clients all connected through the TLS proxy (admin, producers,
    # consumers, readers of three processes and the observer: well over a dozen).
    assert kafka_proxy.connections - before >= 12
