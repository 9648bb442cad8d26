"""Checks over the final state of a pipeline run: placement rules, bindings, usage, leftovers."""

from __future__ import annotations

import asyncio
import random
import signal
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from cli.audit import Violation, validate_placement
from cli.run import Pipeline, Progress, pending_progress
from shared.models import Namespace, Pod, pod_requests
from shared.store import ClusterStore


async def binding_history(store: ClusterStore) -> list[tuple[str, str]]:
    """(pod uid, node) for every change stream entry that bound a pod (unbound -> node)."""
    entries: Any = await store.redis.xrange(store.keys.stream)
    node_of: dict[str, str] = {}
    out: list[tuple[str, str]] = []
    for _id, fields in entries:
        if fields.get(b"k") != b"Pod":
            continue
        uid = fields.get(b"u", b"").decode()
        if fields.get(b"o") == b"del":
            node_of.pop(uid, None)
            continue
        node = fields.get(b"node", b"").decode()
        if node and node_of.get(uid, "") != node:
            out.append((uid, node))
        node_of[uid] = node
    return out


@dataclass
class FinalState:
    violations: list[Violation]
    usage_mismatches: list[str]
    """Nodes whose stored usage differs from their bound pods' requests (leaked reservations)."""
    bound: int
    pending: Counter[str] = field(default_factory=Counter)
    """Queue -> pods still in the queue."""
    unaccounted: list[str] = field(default_factory=list)
    """Applied pods neither bound, deleted (preempted) nor held by the queue."""

    def problems(self) -> list[str]:
        lines = [str(v) for v in self.violations[:20]]
        lines += self.usage_mismatches[:20]
        lines += [f"unaccounted pod {key}" for key in self.unaccounted[:20]]
        return lines


async def final_state(run: Pipeline) -> FinalState:
    store = run.client.store
    snapshot = await store.load_snapshot()
    pods = snapshot.pods
    namespaces = [n for n in snapshot.of_kind("Namespace") if isinstance(n, Namespace)]
    violations = validate_placement(
        snapshot.nodes, pods, namespaces=namespaces, bindings=await binding_history(store)
    )
    on_node: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.spec.node_name:
            on_node.setdefault(pod.spec.node_name, []).append(pod)
    mismatches = []
    for node in snapshot.nodes:
        name = node.metadata.name
        expected: Counter[str] = Counter()
        for pod in on_node.get(name, []):
            expected.update(pod_requests(pod))
        usage = snapshot.usage.get(name)
        have = dict(usage.requested) if usage is not None else {}
        count = usage.pods if usage is not None else 0
        want = {k: v for k, v in expected.items() if v}
        if have != want or count != len(on_node.get(name, [])):
            mismatches.append(f"usage of {name}: stored {count} pods {have}, bound {want}")
    pending = (await run.client.queue.pending()).pods
    held = {p.key for p in pending}
    stored = {p.key: p for p in pods}
    unaccounted = [
        p.key
        for p in run.pods
        if not p.spec.node_name
        and p.key in stored
        and not stored[p.key].spec.node_name
        and p.key not in held
    ]
    return FinalState(
        violations=violations,
        usage_mismatches=mismatches,
        bound=sum(1 for p in pods if p.spec.node_name),
        pending=Counter(p.queue for p in pending),
        unaccounted=unaccounted,
    )


async def kill_mid_run(
    run: Pipeline, target: str, rng: random.Random, high: float = 0.6
) -> tuple[Progress, str]:
    """SIGKILL one `target` service ("worker", "binder", "queue") once a random fraction
    (5% to `high`) of the pending pods is bound, or after 60 s when fewer can be; returns
    (progress then, the victim's name)."""
    names = run.client.settings.scheduler_names()
    fraction = rng.uniform(0.05, high)
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        progress, _ = await pending_progress(run.client, run.pending(), names)
        if progress.bound >= fraction * progress.total:
            break
        if asyncio.get_running_loop().time() > deadline:
            break  # fewer pods can be bound than the fraction: kill now
        await asyncio.sleep(0.01)
    victim = rng.choice(run.stack.names(target))
    run.stack.kill(victim, signal.SIGKILL)
    return progress, victim
