"""What quota admission changes in the store: pods placed on their flavors' nodes, and pods
a preemption evicts back to waiting, through their PodDisruptionBudgets."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field, replace
from typing import Any, cast

from services.queue.quota.preemption import Candidate
from services.queue.records import PodRecord
from shared.lifecycle.eviction import EvictionResult, evict
from shared.models import Pod, PodDisruptionBudget
from shared.models.kueue import ResourceFlavor
from shared.models.taints import Toleration
from shared.store import ClusterStore

log = logging.getLogger(__name__)


async def place_on_flavors(
    store: ClusterStore,
    flavors: Mapping[str, ResourceFlavor],
    pod: PodRecord,
    chosen: Mapping[str, str],
) -> bool:
    """As Kueue does on admission: the chosen flavors' nodeLabels join the pod's node
    selector (only the keys the pod does not set: the flavor was chosen because it agrees
    with the pod's own) and their tolerations its tolerations, so it runs where its quota
    is. The pod is
    rewritten in the store; its update (the informer's next event) ungates it. False when the
    flavors add nothing (the caller ungates it directly)."""
    labels: dict[str, str] = {}
    tolerations: list[Toleration] = []
    for name in sorted(set(chosen.values())):
        flavor = flavors.get(name)
        if flavor is not None:
            labels.update(flavor.spec.node_labels)
            tolerations.extend(flavor.spec.tolerations)
    if not labels and not tolerations:
        return False
    namespace, _, name = pod.key.partition("/")
    stored = await store.get_pod(namespace, name)
    if stored is None or stored.metadata.uid != pod.uid:
        return False
    stored.spec.node_selector = {**labels, **stored.spec.node_selector}
    stored.spec.tolerations = [
        *stored.spec.tolerations,
        *(t for t in tolerations if t not in stored.spec.tolerations),
    ]
    await store.apply([stored])
    return True


async def requeue(store: ClusterStore, key: str, uid: str) -> None:
    """Evict an admitted pod by putting it back to waiting: unbound, same uid (the
    informer then brings its deletion, which releases its quota, and its return). A pod
    deleted by someone else between the read and this delete (it ran to completion) stays
    deleted: put back, it came back to life under its old uid, was admitted and bound again,
    and held its quota with no one left to end it."""
    namespace, _, name = key.partition("/")
    pod = await store.get_pod(namespace, name)
    if pod is None or pod.metadata.uid != uid:
        return
    if await store.delete("Pod", namespace, name, uid=uid) is None:
        return
    pod.spec.node_name = ""
    pod.status.nominated_node_name = ""
    await store.apply([pod])
    log.info("quota reclaim: evicted %s (back to waiting)", key)


@dataclass
class Budgets:
    """The PodDisruptionBudgets a quota preemption honours, as the eviction API enforces
    them (shared.lifecycle.eviction: each budget's status recomputed from its namespace's pods). The
    store's pods are read only when a budget exists (preemption is rare; budgets rarer), and
    kept by namespace: a budget selects pods of its own namespace only."""

    store: ClusterStore
    pdbs: dict[str, list[PodDisruptionBudget]] = field(default_factory=dict)
    """namespace -> its budgets."""
    pods: dict[str, dict[str, Pod]] = field(default_factory=dict)
    """namespace -> pod key -> pod, for the namespaces that have budgets."""
    refusal: str = ""
    """Why the last refused eviction was refused (a reason to show the waiting workload)."""

    @classmethod
    async def load(cls, store: ClusterStore) -> Budgets:
        budgets = cls(store)
        for pdb in cast(list[PodDisruptionBudget], await store.list("PodDisruptionBudget")):
            budgets.pdbs.setdefault(pdb.metadata.namespace, []).append(pdb)
        if budgets.pdbs:
            for pod in cast(list[Pod], await store.list("Pod")):
                if pod.metadata.namespace in budgets.pdbs:
                    budgets.pods.setdefault(pod.metadata.namespace, {})[pod.key] = pod
        return budgets

    def _answer(self, key: str) -> tuple[Pod, EvictionResult] | None:
        """The eviction API's answer for the pod `key` (None: no budget can refuse it)."""
        namespace = key.partition("/")[0]
        pods = self.pods.get(namespace, {})
        pod = pods.get(key)
        if pod is None:
            return None
        return pod, evict(pod, self.pdbs[namespace], list(pods.values()))

    def _refused(self, key: str, answer: EvictionResult) -> bool:
        if answer.allowed:
            return False
        self.refusal = f"preemption blocked: {key}: {answer.message}"
        return True

    def may_evict(self, keys: Iterable[str]) -> bool:
        """Every pod of `keys` may be evicted now, each on its own."""
        for key in keys:
            found = self._answer(key)
            if found is not None and self._refused(key, found[1]):
                return False
        return True

    async def evict(self, key: str) -> bool:
        """Take one disruption of the pod's budget (its new status stored, as the eviction
        API does), or False when the budget refuses now."""
        found = self._answer(key)
        if found is None:
            return True
        pod, answer = found
        if self._refused(key, answer):
            return False
        namespace = pod.metadata.namespace
        if answer.pdb is not None and answer.status is not None:
            budget = replace(answer.pdb, status=answer.status)
            await self.store.apply([budget])
            self.pdbs[namespace] = [
                budget if b.key == budget.key else b for b in self.pdbs[namespace]
            ]
        del self.pods[namespace][key]
        return True


def admitted_workloads(
    admitted: Mapping[str, Mapping[str, Any]], evicting: Set[str]
) -> dict[str, tuple[Candidate, list[str]]]:
    """Admission's records (pod key -> record) as preemption candidates, a gang's pods as
    one, each with its pods' keys; `evicting`: pods already evicted and not yet gone."""
    groups: dict[str, list[str]] = defaultdict(list)
    for key, rec in admitted.items():
        groups[f"podgroup:{rec['group']}" if rec.get("group") else key].append(key)
    out: dict[str, tuple[Candidate, list[str]]] = {}
    for wl_key, keys in groups.items():
        records = [admitted[k] for k in keys]
        usage: dict[tuple[str, str], int] = defaultdict(int)
        for rec in records:
            for fld, amount in rec["charge"].items():
                _, flavor, resource = fld.split("|", 2)
                usage[(flavor, resource)] += amount
        first = records[0]
        at = max(rec.get("at", 0.0) for rec in records)
        candidate = Candidate(
            wl_key,
            first["cq"],
            first.get("prio", 0),
            at,
            first.get("created") or at,
            dict(usage),
            evicting=not evicting.isdisjoint(keys),
        )
        out[wl_key] = (candidate, keys)
    return out
