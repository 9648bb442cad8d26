"""What each ClusterQueue has and uses, read from the store: the dashboard's cluster queues and
`GET /api/clusterqueues`.

Usage is counted from bound pods, exactly: a bound pod labelled `kueue.x-k8s.io/queue-name: LQ`
in namespace NS counts against the ClusterQueue of LocalQueue NS/LQ, for each resource it
requests that the ClusterQueue covers (its effective requests, shared.models.resources, and
one `pods` each), in the flavor of the first of the queue's flavors for that resource whose
ResourceFlavor's nodeLabels all match the labels of the pod's node, else in the first flavor
covering the resource. Pods of a LocalQueue that does not exist, or whose ClusterQueue does
not, count nowhere.

Per ClusterQueue and (flavor, resource): nominal quota, borrowingLimit, lendingLimit, usage,
borrowed (usage above nominal) and lent. Kueue keeps no per-queue "lent"; here the cohort's
borrowed total is attributed to the queues below their nominal quota in proportion to the
lendable quota they leave idle (min(nominal - usage, nominal - guaranteed)), by largest
remainder, so the lent amounts add up to what is borrowed (or to all that is idle, when usage
is above what admission allows). The weighted share is services.queue.quota.cohorts's (Kueue's DRF
x1000).
Amounts are in berth's units: milli-CPU, bytes, counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from services.queue.keys import QueueKeys
from services.queue.pod_status import PodRow, cluster_queue_of, local_queue_key
from services.queue.quota.cohorts import Cohort, FlavorResource, QueueQuota, cohorts_of
from shared.models import Node, Pod
from shared.models.kueue import ClusterQueue, LocalQueue, ResourceFlavor
from shared.models.resources import pod_requests

PODS = "pods"


@dataclass(frozen=True, slots=True)
class ResourceStatus:
    """One (flavor, resource) of a ClusterQueue."""

    flavor: str
    resource: str
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    usage: int
    borrowed: int
    lent: int
    reserved: int = 0
    """Charged by quota admission (admitted pods, bound or not yet): what admission decides by."""

    def to_json(self) -> dict[str, Any]:
        return {
            "reserved": self.reserved,
            "flavor": self.flavor,
            "resource": self.resource,
            "nominal": self.nominal,
            "borrowingLimit": self.borrowing_limit,
            "lendingLimit": self.lending_limit,
            "usage": self.usage,
            "borrowed": self.borrowed,
            "lent": self.lent,
        }


@dataclass(frozen=True, slots=True)
class ClusterQueueStatus:
    name: str
    cohort: str
    weight: str
    """fairSharing.weight as written."""
    share: int
    """Weighted dominant resource share x1000 (services.queue.quota.cohorts.Cohort.share)."""
    resources: tuple[ResourceStatus, ...]
    admitted: int
    """Bound pods counted against it."""
    pending: Mapping[str, int] = field(default_factory=dict)
    """Pending pods by reason class (services.queue.pod_status)."""
    local_queues: tuple[str, ...] = ()
    """"namespace/name" of the LocalQueues that point at it."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cohort": self.cohort or None,
            "weight": self.weight,
            "share": self.share,
            "resources": [r.to_json() for r in self.resources],
            "admittedPods": self.admitted,
            "pending": dict(self.pending),
            "pendingTotal": sum(self.pending.values()),
            "localQueues": list(self.local_queues),
        }


def flavor_for(
    queue: QueueQuota,
    resource: str,
    node_labels: Mapping[str, str],
    flavors: Mapping[str, ResourceFlavor],
) -> str | None:
    """The flavor a bound pod's `resource` counts in (see the module docstring); None when
    the queue does not cover the resource."""
    candidates = queue.flavors_of.get(resource, ())
    for name in candidates:
        flavor = flavors.get(name)
        if flavor is not None and all(
            node_labels.get(key) == value for key, value in flavor.spec.node_labels.items()
        ):
            return name
    return candidates[0] if candidates else None


def usage_of(
    pods: Iterable[Pod],
    nodes: Iterable[Node],
    local_queues: Iterable[LocalQueue],
    flavors: Iterable[ResourceFlavor],
    queues: Mapping[str, QueueQuota],
) -> tuple[dict[str, dict[FlavorResource, int]], Counter[str]]:
    """Per ClusterQueue: what its bound pods use per (flavor, resource), and how many they are."""
    labels = {node.metadata.name: node.metadata.labels for node in nodes}
    by_name = {flavor.metadata.name: flavor for flavor in flavors}
    target = cluster_queue_of(local_queues)
    usage: dict[str, dict[FlavorResource, int]] = {}
    admitted: Counter[str] = Counter()
    for pod in pods:
        node = pod.spec.node_name
        queue = queues.get(target.get(local_queue_key(pod), ""))
        if not node or queue is None:
            continue
        admitted[queue.name] += 1
        requests = dict(pod_requests(pod))
        requests.setdefault(PODS, 1)
        used = usage.setdefault(queue.name, {})
        for resource, amount in requests.items():
            flavor = flavor_for(queue, resource, labels.get(node, {}), by_name)
            if flavor is not None and amount:
                used[(flavor, resource)] = used.get((flavor, resource), 0) + amount
    return usage, admitted


def lent_in(cohort: Cohort) -> dict[str, dict[FlavorResource, int]]:
    """Per queue of the cohort, what it lends per (flavor, resource) (module docstring)."""
    out: dict[str, dict[FlavorResource, int]] = {name: {} for name in cohort.queues}
    resources = {fr for q in cohort.queues.values() for fr in q.limits}
    for fr in sorted(resources):
        idle: dict[str, int] = {}
        borrowed = 0
        for name, queue in cohort.queues.items():
            limits = queue.limits.get(fr)
            if limits is None:
                continue
            used = cohort.used(name, fr)
            borrowed += max(0, used - limits.nominal)
            spare = min(limits.nominal - used, limits.lendable)
            if spare > 0:
                idle[name] = spare
        total = sum(idle.values())
        lent = min(borrowed, total)
        if not lent:
            continue
        shares = {name: lent * spare // total for name, spare in idle.items()}
        # Largest remainder: the units lost to rounding go to the largest fractions.
        left = lent - sum(shares.values())
        by_fraction = sorted(idle, key=lambda name: (-(lent * idle[name] % total), name))
        for name in by_fraction[:left]:
            shares[name] += 1
        for name, amount in shares.items():
            if amount:
                out[name][fr] = amount
    return out


def cluster_queue_statuses(
    cluster_queues: Sequence[ClusterQueue],
    local_queues: Sequence[LocalQueue],
    flavors: Sequence[ResourceFlavor],
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    rows: Iterable[PodRow] = (),
    reserved: Mapping[str, Mapping[FlavorResource, int]] | None = None,
) -> list[ClusterQueueStatus]:
    """Every ClusterQueue's status, by name (see the module docstring). `rows`: the pods'
    reasons (services.queue.pod_status.pod_rows), for the pending counts."""
    cohorts = cohorts_of(cluster_queues)
    quotas = {name: q for c in cohorts.values() for name, q in c.queues.items()}
    usage, admitted = usage_of(pods, nodes, local_queues, flavors, quotas)
    pending: dict[str, Counter[str]] = {}
    for row in rows:
        if row.pending and row.cluster_queue in quotas:
            pending.setdefault(row.cluster_queue, Counter())[row.reason] += 1
    members: dict[str, list[str]] = {}
    for lq in local_queues:
        members.setdefault(lq.spec.cluster_queue, []).append(lq.key)
    by_name = {cq.metadata.name: cq for cq in cluster_queues}
    out = []
    for cohort in cohorts.values():
        for name in cohort.queues:
            cohort.usage[name] = usage.get(name, {})
        lent = lent_in(cohort)
        for name, queue in cohort.queues.items():
            resources = tuple(
                ResourceStatus(
                    flavor=fr[0],
                    resource=fr[1],
                    nominal=limits.nominal,
                    borrowing_limit=limits.borrowing,
                    lending_limit=limits.lending,
                    usage=cohort.used(name, fr),
                    borrowed=cohort.borrowed(name, fr),
                    lent=lent[name].get(fr, 0),
                    reserved=(reserved or {}).get(name, {}).get(fr, 0),
                )
                for fr, limits in queue.limits.items()
            )
            out.append(
                ClusterQueueStatus(
                    name=name,
                    cohort=queue.cohort,
                    weight=str(by_name[name].spec.fair_sharing.weight),
                    share=cohort.share(name),
                    resources=resources,
                    admitted=admitted[name],
                    pending=dict(sorted(pending.get(name, Counter()).items())),
                    local_queues=tuple(sorted(members.get(name, []))),
                )
            )
    out.sort(key=lambda s: s.name)
    return out


async def read_reserved(redis: Redis, keys: QueueKeys) -> dict[str, dict[FlavorResource, int]]:
    """What quota admission charged (services/queue/quota/admission.py), per ClusterQueue and
    (flavor, resource): admitted pods, bound or not yet. What admission decides by; `usage`
    above counts only the bound ones."""
    out: dict[str, dict[FlavorResource, int]] = {}
    for fld, value in (await redis.hgetall(keys.quota_usage)).items():
        name = fld.decode() if isinstance(fld, bytes) else str(fld)
        queue, flavor, resource = name.split("|", 2)
        out.setdefault(queue, {})[(flavor, resource)] = int(value)
    return out
