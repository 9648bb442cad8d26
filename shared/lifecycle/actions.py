"""What the simulated cluster does to pods, through the store's ordinary paths: a pod that
completes or is evicted is deleted with its uid (`ClusterStore.delete`, as `berth delete`:
its node usage comes back in the same script, and the queue's informer, hearing the delete
on the change stream, releases its quota). An evicted pod whose owner is a controller is
brought back as that controller would: the same pod, pending, with a new uid.

Owner simulation: a pod with a controller ownerReference (ReplicaSet, Job, StatefulSet, ...)
is replaced; a DaemonSet's pod is not (its controller would place it on the same node, which
berth does not model); a bare pod is gone, as upstream.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from redis.asyncio.client import Pipeline

from shared.lifecycle.state import Finish, LifecycleState, PodEvent
from shared.models import Pod
from shared.models.meta import new_uid
from shared.models.pod import PodStatus
from shared.store import ClusterStore

log = logging.getLogger(__name__)

SUCCEEDED = "Succeeded"
NOT_REPLACED_KINDS = frozenset({"DaemonSet"})


def controller_of(pod: Pod) -> str:
    """ "Kind/name" of the pod's controller, "" when it has none."""
    for ref in pod.metadata.owner_references:
        if ref.controller:
            return f"{ref.kind}/{ref.name}"
    return ""


def replacement(pod: Pod, now: float, *, requeue: bool = False) -> Pod | None:
    """The pod its controller would create for an evicted one (pending, a new uid, no node,
    a fresh status), or None when nothing would. `requeue`: the pod comes back whatever its
    owner (a gang's members, requeued whole as Kueue's waitForPodsReady requeues a
    workload)."""
    owner = controller_of(pod)
    if not requeue and (not owner or owner.partition("/")[0] in NOT_REPLACED_KINDS):
        return None
    meta = replace(
        pod.metadata,
        uid=new_uid(),
        resource_version=0,
        creation_timestamp=now,
        deletion_timestamp=None,
        labels=dict(pod.metadata.labels),
        annotations=dict(pod.metadata.annotations),
        owner_references=list(pod.metadata.owner_references),
    )
    spec = replace(pod.spec, node_name="")
    return replace(pod, metadata=meta, spec=spec, status=PodStatus())


async def evict(
    store: ClusterStore,
    state: LifecycleState,
    pod: Pod,
    *,
    reason: str,
    message: str,
    now: float | None = None,
    requeue: bool = False,
) -> Pod | bool:
    """Delete the bound pod (only this uid), record a Warning Event and, when its owner would,
    create its replacement. Returns the replacement, True when deleted without one, False when
    the pod was no longer there (someone else got to it)."""
    at = time.time() if now is None else now
    namespace, name = pod.metadata.namespace, pod.metadata.name
    node = pod.spec.node_name
    if await store.delete("Pod", namespace, name, uid=pod.metadata.uid) is None:
        return False
    await state.record(pod.key, PodEvent(at, "Warning", reason, message, pod.metadata.uid, node))
    new = replacement(pod, at, requeue=requeue)
    if new is None:
        return True
    await store.apply([new])
    await state.record(
        pod.key,
        PodEvent(
            at,
            "Normal",
            "Recreated",
            f"{controller_of(pod) or 'its gang'} brought back the pod evicted from {node}",
            new.metadata.uid,
        ),
    )
    log.info("evicted %s from %s (%s); replaced by uid %s", pod.key, node, reason, new.metadata.uid)
    return new


async def complete(
    store: ClusterStore,
    state: LifecycleState,
    pod: Pod,
    *,
    now: float | None = None,
    started: float | None = None,
) -> bool:
    """The pod ends Succeeded: recorded (Event, `finished`, with when it `started` if told),
    then deleted from the store, giving back its node usage and quota. False when it was no
    longer there."""
    at = time.time() if now is None else now
    (done,) = await complete_all(store, state, [(pod, started)], now=at)
    return done


async def complete_all(
    store: ClusterStore,
    state: LifecycleState,
    pods: Sequence[tuple[Pod, float | None]],
    *,
    now: float,
) -> list[bool]:
    """`complete` of each (pod, started): the end records and the deletions in one round
    trip, the Events in a second. A node agent ends hundreds of pods a second, and every
    round trip before the deletion held their quota that much longer after their end."""
    if not pods:
        return []
    ends = [
        Finish(p.key, SUCCEEDED, p.spec.node_name, p.metadata.uid, now, started)
        for p, started in pods
    ]
    # Recorded first: whoever sees the pod gone finds why (a completion, not an eviction).
    gone = await _delete_all(
        store, [p for p, _ in pods], ahead=lambda pipe: state.finish_on(pipe, ends)
    )
    for (pod, _), rv in zip(pods, gone, strict=True):
        if rv is None:
            await state.unfinish(pod.key, pod.metadata.uid)
    await state.record_all(
        [
            (
                p.key,
                PodEvent(
                    now,
                    "Normal",
                    "Completed",
                    f"ran to completion on {p.spec.node_name}",
                    p.metadata.uid,
                    p.spec.node_name,
                ),
            )
            for (p, _), rv in zip(pods, gone, strict=True)
            if rv is not None
        ]
    )
    return [rv is not None for rv in gone]


async def delete(
    store: ClusterStore, state: LifecycleState, pod: Pod, *, now: float | None = None
) -> bool:
    """KWOK's pod-delete stage: the pod is deleted (an Event says so)."""
    at = time.time() if now is None else now
    (done,) = await delete_all(store, state, [pod], now=at)
    return done


async def delete_all(
    store: ClusterStore, state: LifecycleState, pods: Sequence[Pod], *, now: float
) -> list[bool]:
    """`delete` of each pod, two round trips for all of them."""
    if not pods:
        return []
    gone = await _delete_all(store, pods)
    await state.record_all(
        [
            (
                p.key,
                PodEvent(
                    now,
                    "Normal",
                    "Killing",
                    f"stage deleted it on {p.spec.node_name}",
                    p.metadata.uid,
                    p.spec.node_name,
                ),
            )
            for p, rv in zip(pods, gone, strict=True)
            if rv is not None
        ]
    )
    return [rv is not None for rv in gone]


async def _delete_all(
    store: ClusterStore, pods: Sequence[Pod], *, ahead: Callable[[Pipeline], object] | None = None
) -> list[int | None]:
    return await store.delete_all(
        [("Pod", p.metadata.namespace, p.metadata.name, p.metadata.uid) for p in pods],
        ahead=ahead,
    )
