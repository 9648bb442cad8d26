"""What quota admission changes in the store: pods placed on their flavors' nodes, and pods
a reclaim evicts back to waiting."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from services.queue.records import PodRecord
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
    selector and their tolerations its tolerations, so it runs where its quota is. The pod is
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
    stored.spec.node_selector = {**stored.spec.node_selector, **labels}
    stored.spec.tolerations = [
        *stored.spec.tolerations,
        *(t for t in tolerations if t not in stored.spec.tolerations),
    ]
    await store.apply([stored])
    return True


async def requeue(store: ClusterStore, key: str, uid: str) -> None:
    """Evict an admitted pod by putting it back to waiting: unbound, same uid (the
    informer then brings its deletion, which releases its quota, and its return)."""
    namespace, _, name = key.partition("/")
    pod = await store.get_pod(namespace, name)
    if pod is None or pod.metadata.uid != uid:
        return
    await store.delete("Pod", namespace, name, uid=uid)
    pod.spec.node_name = ""
    pod.status.nominated_node_name = ""
    await store.apply([pod])
    log.info("quota reclaim: evicted %s (back to waiting)", key)
