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
        labels_of: dict[str, Mapping[str, str]] = {}
        for pod in assigned:
            if pod.namespace not in labels_of:
                labels_of[pod.namespace] = await self._namespace_labels(pod.namespace)
        targets: list[tuple[str, str, Sequence[str]]] = []
        for tenant in tenants:
            matching: list[str] = []
            candidates = await self._states(tenant, await self._affinity_keys(tenant))
            parked = [(key, st) for key, st in candidates if await self._is_parked(tenant, key, st)]
            if parked:
                bodies = await self.redis.hmget(
                    self.keys.key(tenant, "pod"),
                    [body_field(key, st.resource_version) for key, st in parked],
                )
                for (key, _), body in zip(parked, bodies, strict=True):
                    if isinstance(body, bytes) and self._affinity_matches(
                        key, body, assigned, labels_of
                    ):
                        matching.append(key)
            targets.append((tenant, "keys", matching))
        return targets

    async def _affinity_keys(self, tenant: str) -> list[str]:
        return sorted(text(k) for k in await self.redis.smembers(self.keys.key(tenant, "aff")))

    async def _states(self, tenant: str, keys: Sequence[str]) -> list[tuple[str, PodState]]:
        if not keys:
            return []
        blobs = await self.redis.hmget(self.keys.key(tenant, "st"), list(keys))
        return [
            (key, PodState.unpack(blob))
            for key, blob in zip(keys, blobs, strict=True)
            if isinstance(blob, bytes)
        ]

    async def _is_parked(self, tenant: str, key: str, st: PodState) -> bool:
        if not st.bucket:
            return False
        return await self.redis.zscore(self.keys.bucket(tenant, st.bucket), key) is not None

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
