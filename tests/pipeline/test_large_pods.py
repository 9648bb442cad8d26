"""A large pod never stalls the pods dispatched with it (issue 19): one pod with a 1 MiB
annotation (over the body limit, so its schedule request refers to it) applied with twenty
small ones; all of them bind, the large one from the worker's view."""

from __future__ import annotations

from cli.run import pipeline
from cli.servers import DevServers
from services.queue.wire import MAX_BODY_BYTES, MAX_MESSAGE_BYTES
from shared.models import Manifests, Pod
from tests.builders import make_node, make_pod
from tests.queue.kafka_helpers import TopicReader


async def test_a_large_pod_and_small_ones_all_bind(dev_servers: DevServers) -> None:
    nodes = [make_node(f"n{i}").capacity(cpu="8", memory="16Gi", pods=20).obj() for i in range(2)]
    big = make_pod("big").req(cpu="1").obj()
    big.metadata.annotations["note"] = "x" * (1024 * 1024)
    assert len(big.metadata.annotations["note"]) > MAX_BODY_BYTES
    small = [make_pod(f"small-{i}").req(cpu="100m").obj() for i in range(20)]
    async with pipeline(workers=1, binders=1, servers=dev_servers) as run:
        await run.apply(Manifests(nodes=nodes, pods=[big, *small]))
        assert await run.settle(60)
        pods = [p for p in await run.client.store.list("Pod") if isinstance(p, Pod)]
        topic = run.client.settings.topics.schedule
        async with TopicReader(run.client.settings.kafka_bootstrap, topic) as reader:
            await reader.wait_until(lambda: len(reader.requests()) >= 21, within=30)
            sizes = [len(value) for value in reader.values]
            sent = {r.pod_key: r.pod for r in reader.requests()}
    assert max(sizes) <= MAX_MESSAGE_BYTES  # a megabyte pod inside would make it larger
    assert sent["default/big"] == b""  # by reference
    assert all(body for key, body in sent.items() if key != "default/big")
    unbound = sorted(p.metadata.name for p in pods if not p.spec.node_name)
    assert unbound == []
    assert len(pods) == 21
