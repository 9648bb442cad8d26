"""Which parked pods a bound pod's arrival may wake: kube-scheduler's AssignedPodAdded and
AssignedPodUpdated for pods with required pod affinity (the queue's `aff` set), matched in
Python against the parked pods' bodies (Lua never decodes a pod)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from redis.asyncio import Redis

from services.queue.keys import QueueKeys, body_field
from services.queue.records import PodRecord
from services.queue.state import PodState
from services.queue.views import text
from shared.messaging.wire import MessageError
from shared.models import affinity_term_matches, required_terms

NamespaceLabels = Callable[[str], Awaitable[Mapping[str, str]]]


class AffinityWake:
    """Finds, per tenant, the unschedulable pods a run of assigned pods may now satisfy."""

    def __init__(self, redis: Redis, keys: QueueKeys, namespace_labels: NamespaceLabels) -> None:
        self.redis = redis
        self.keys = keys
        self._namespace_labels = namespace_labels

    async def targets(
        self, tenants: Sequence[str], assigned: Sequence[PodRecord]
    ) -> list[tuple[str, str, Sequence[str]]]:
        """Per tenant, the unschedulable pods with a required affinity term one of the
        assigned pods matches.

        Every tenant gets an entry, even an empty one: upstream sets moveRequestCycle on this
        path whether or not a pod moves.
        """
        # Every tenant's affinity set in one round trip (one per tenant, in turn, cost the
        # informer a round trip per tenant for every batch of bound pods).
        async with self.redis.pipeline(transaction=False) as pipe:
            for tenant in tenants:
                pipe.smembers(self.keys.key(tenant, "aff"))
            members: list[set[bytes]] = await pipe.execute()
        waiting = {
            tenant: sorted(text(k) for k in keys)
            for tenant, keys in zip(tenants, members, strict=True)
            if keys
        }
        matching: dict[str, list[str]] = {tenant: [] for tenant in tenants}
        if waiting:
            labels_of: dict[str, Mapping[str, str]] = {}
            for pod in assigned:
                if pod.namespace not in labels_of:
                    labels_of[pod.namespace] = await self._namespace_labels(pod.namespace)
            parked = await self._parked(waiting)
            async with self.redis.pipeline(transaction=False) as pipe:
                for tenant, key, st in parked:
                    pipe.hget(self.keys.key(tenant, "pod"), body_field(key, st.resource_version))
                bodies = await pipe.execute()
            for (tenant, key, _), body in zip(parked, bodies, strict=True):
                if isinstance(body, bytes) and self._affinity_matches(
                    key, body, assigned, labels_of
                ):
                    matching[tenant].append(key)
        return [(tenant, "keys", matching[tenant]) for tenant in tenants]

    async def _parked(
        self, waiting: Mapping[str, Sequence[str]]
    ) -> list[tuple[str, str, PodState]]:
        """(tenant, key, state) of the pods of `waiting` parked unschedulable (in their
        bucket): two round trips for all tenants."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for tenant, keys in waiting.items():
                pipe.hmget(self.keys.key(tenant, "st"), list(keys))
            blobs = await pipe.execute()
        bucketed = [
            (tenant, key, st)
            for (tenant, keys), tenant_blobs in zip(waiting.items(), blobs, strict=True)
            for key, blob in zip(keys, tenant_blobs, strict=True)
            if isinstance(blob, bytes) and (st := PodState.unpack(blob)).bucket
        ]
        if not bucketed:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for tenant, key, st in bucketed:
                pipe.zscore(self.keys.bucket(tenant, st.bucket), key)
            scores = await pipe.execute()
        return [found for found, score in zip(bucketed, scores, strict=True) if score is not None]

    @staticmethod
    def _affinity_matches(
        key: str,
        body: bytes,
        assigned: Sequence[PodRecord],
        labels_of: Mapping[str, Mapping[str, str]],
    ) -> bool:
        try:
            parked = PodRecord(namespace="", name=key, uid="", body=body).pod()
        except MessageError:
            return True  # cannot tell: waking costs one attempt, never a lost pod
        terms = required_terms(parked)
        return any(
            affinity_term_matches(
                term, parked, pod.namespace, pod.labels, labels_of.get(pod.namespace, {})
            )
            for pod in assigned
            for term in terms
        )
