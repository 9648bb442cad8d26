"""The store's count of reserved or bound pods with required anti-affinity (`antiaff`, kept by
add_usage) against the truth, under random histories on a real Redis: pods created pending or
already bound, reserved (asking to bind at once or not), bound, unreserved, expired, updated
while bound (their anti-affinity added or dropped) and deleted. After every step the count
equals the reserved or bound pods whose stored spec has required anti-affinity, and a pod is
bound at once only while it is zero."""

from __future__ import annotations

import random

import pytest

from shared.models import Pod
from shared.models.affinity import has_required_anti_affinity
from shared.store import ClusterStore, PodCharge, ReserveRequest, ReserveStatus
from tests.builders import make_node, make_pod

NODES = ("n1", "n2", "n3")


def _pod(rng: random.Random, name: str, *, anti: bool, node: str = "") -> Pod:
    builder = make_pod(name).uid(f"{name}-{rng.randrange(10**9)}").label("app", "db")
    builder.req(cpu="100m")
    if anti:
        builder.pod_affinity_in("app", ["db"], "zone", anti=True)
    if node:
        builder.node(node)
    return builder.obj()


async def _count(store: ClusterStore) -> int:
    return int(await store.redis.get(store.keys.anti_affinity_pods) or 0)


async def _truth(store: ClusterStore) -> int:
    """Reserved or bound pods (those with a charge) whose stored spec has anti-affinity."""
    keys = await store.redis.hkeys(store.keys.charges)
    charged = {k.decode() if isinstance(k, bytes) else k for k in keys}
    pods = [p for p in await store.list("Pod") if isinstance(p, Pod)]
    return sum(1 for p in pods if p.key in charged and has_required_anti_affinity(p))


@pytest.mark.parametrize("seed", range(6))
async def test_the_count_follows_every_path_that_charges_a_node(store: ClusterStore, seed: int):
    rng = random.Random(seed)
    await store.apply([make_node(n).capacity(cpu="64", pods=200).obj() for n in NODES])
    pods: dict[str, Pod] = {}
    attempts: dict[str, int] = {}
    at_once = 0
    for step in range(120):
        op = rng.random()
        name = f"p{rng.randrange(12)}"
        pod = pods.get(name)
        if pod is None or op < 0.15:
            bound = rng.choice(NODES) if rng.random() < 0.25 else ""
            pod = _pod(rng, name, anti=rng.random() < 0.12, node=bound)
            if name in pods:
                await store.delete("Pod", "default", name)
            await store.apply([pod])
            pods[name], attempts[name] = pod, 0
        elif op < 0.55:
            attempts[name] += 1
            charge = PodCharge.of(pod)
            request = ReserveRequest(
                pod.key,
                pod.metadata.uid,
                attempts[name],
                rng.choice(NODES),
                0,
                charge,
                tuple(sorted(charge.requests.items())),
                bind_at_once=rng.random() < 0.7,
            )
            before = await _count(store)
            result = await store.bindings.reserve(request, 1_000.0 + step)
            if result.status is ReserveStatus.BOUND_AT_ONCE:
                at_once += 1
                assert before == 0, f"step {step}: bound at once with {before} counted"
                assert not charge.anti_affinity
        elif op < 0.7:
            for node in NODES:  # the node it was reserved on, whichever that was
                await store.bindings.bind(pod.key, pod.metadata.uid, attempts[name], node)
        elif op < 0.8:
            await store.bindings.unreserve(pod.key, pod.metadata.uid, attempts[name], "c")
        elif op < 0.85:
            await store.bindings.expire(1_000.0 + step + 10_000)
        elif op < 0.93:
            # Re-applied while bound or not: its anti-affinity may come or go.
            stored = await store.get_pod("default", name)
            assert stored is not None
            changed = _pod(rng, name, anti=rng.random() < 0.3, node=stored.spec.node_name)
            changed.metadata.uid = stored.metadata.uid
            await store.apply([changed])
            pods[name] = changed
        else:
            await store.delete("Pod", "default", name)
            del pods[name]
        if step % 40 == 39:  # now and then the cluster empties of anti-affinity pods
            for other, held in list(pods.items()):
                if held.spec.affinity is not None:
                    await store.delete("Pod", "default", other)
                    del pods[other]
        assert await _count(store) == await _truth(store), f"step {step}"
    assert at_once > 0  # the history did exercise binding at once
    for name in list(pods):
        await store.delete("Pod", "default", name)
    assert await _count(store) == 0
