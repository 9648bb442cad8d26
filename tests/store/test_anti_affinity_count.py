"""The store's counts of reserved or bound pods with required anti-affinity, per namespace
their terms can match (`antiaff:<namespace>`, "*" for any; kept by add_usage), against the
truth, under random histories on a real Redis: pods in two namespaces created pending or
already bound, reserved (asking to bind at once or not), bound, unreserved, expired, updated
while bound (their anti-affinity added, dropped or widened to any namespace) and deleted.
After every step the counts equal what the reserved or bound pods' stored specs say, and a
pod is bound at once only while none counted can match it."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from shared.models import Pod
from shared.models.affinity import ANY_NAMESPACE, anti_affinity_scopes
from shared.store import ClusterStore, PodCharge, ReserveRequest, ReserveStatus
from tests.builders import label_selector, make_node, make_pod

NODES = ("n1", "n2", "n3")


NAMESPACES = ("a", "b")


def _pod(rng: random.Random, name: str, *, anti: bool, node: str = "") -> Pod:
    namespace, _, short = name.partition("/")
    builder = make_pod(short).namespace(namespace).label("app", "db").req(cpu="100m")
    builder.uid(f"{short}-{rng.randrange(10**9)}")
    if anti and rng.random() < 0.2:  # a namespaceSelector: any namespace
        wide = label_selector({})
        builder.pod_affinity(
            "zone", label_selector({"app": "db"}), anti=True, namespace_selector=wide
        )
    elif anti:
        builder.pod_affinity_in("app", ["db"], "zone", anti=True)
    if node:
        builder.node(node)
    return builder.obj()


async def _counts(store: ClusterStore) -> dict[str, int]:
    out = {}
    for scope in (*NAMESPACES, ANY_NAMESPACE):
        value = int(await store.redis.get(store.keys.anti_affinity(scope)) or 0)
        if value:
            out[scope] = value
    return out


async def _truth(store: ClusterStore) -> dict[str, int]:
    """Per namespace, the reserved or bound pods (those with a charge) whose stored spec has
    anti-affinity terms that can match its pods."""
    keys = await store.redis.hkeys(store.keys.charges)
    charged = {k.decode() if isinstance(k, bytes) else k for k in keys}
    pods = [p for p in await store.list("Pod") if isinstance(p, Pod) and p.key in charged]
    return dict(Counter(scope for p in pods for scope in anti_affinity_scopes(p)))


@pytest.mark.parametrize("seed", range(6))
async def test_the_count_follows_every_path_that_charges_a_node(store: ClusterStore, seed: int):
    rng = random.Random(seed)
    await store.apply([make_node(n).capacity(cpu="64", pods=200).obj() for n in NODES])
    pods: dict[str, Pod] = {}
    attempts: dict[str, int] = {}
    at_once = 0
    for step in range(120):
        op = rng.random()
        name = f"{rng.choice(NAMESPACES)}/p{rng.randrange(6)}"
        pod = pods.get(name)
        if pod is None or op < 0.15:
            bound = rng.choice(NODES) if rng.random() < 0.25 else ""
            pod = _pod(rng, name, anti=rng.random() < 0.12, node=bound)
            if name in pods:
                await store.delete("Pod", *name.split("/"))
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
            before = await _counts(store)
            result = await store.bindings.reserve(request, 1_000.0 + step)
            if result.status is ReserveStatus.BOUND_AT_ONCE:
                at_once += 1
                repelling = {s: before.get(s) for s in (ANY_NAMESPACE, pod.metadata.namespace)}
                assert not any(repelling.values()), f"step {step}: bound at once, {repelling}"
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
            stored = await store.get_pod(*name.split("/"))
            assert stored is not None
            changed = _pod(rng, name, anti=rng.random() < 0.3, node=stored.spec.node_name)
            changed.metadata.uid = stored.metadata.uid
            await store.apply([changed])
            pods[name] = changed
        else:
            await store.delete("Pod", *name.split("/"))
            del pods[name]
        if step % 40 == 39:  # now and then the cluster empties of anti-affinity pods
            for other, held in list(pods.items()):
                if held.spec.affinity is not None:
                    await store.delete("Pod", *other.split("/"))
                    del pods[other]
        assert await _counts(store) == await _truth(store), f"step {step}"
    assert at_once > 0  # the history did exercise binding at once
    for name in list(pods):
        await store.delete("Pod", *name.split("/"))
    assert await _counts(store) == {}
