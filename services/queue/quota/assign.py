"""A waiting workload's pods as Kueue's pod sets, and their flavors
(services.queue.quota.flavor_assign).

Pods of a workload (one pod, or a gang's pods) with the same requests and the same placement
constraints (nodeSelector, required node affinity, tolerations) are one pod set: they get
one flavor per resource group, as Kueue gives one to a pod set's pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from services.queue.quota.cohorts import Cohort
from services.queue.quota.flavor_assign import Assignment, PodSet, assign_flavors
from shared.models import Pod
from shared.models.kueue import ClusterQueue, ResourceFlavor
from shared.models.selectors import NodeSelector
from shared.models.taints import Toleration


@dataclass(frozen=True, slots=True)
class Placement:
    """What of a pod's spec decides which flavors it may use."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: NodeSelector | None = None
    tolerations: tuple[Toleration, ...] = ()

    @classmethod
    def of(cls, pod: Pod) -> Placement:
        affinity = pod.spec.affinity
        required = None
        if affinity is not None and affinity.node_affinity is not None:
            required = affinity.node_affinity.required_during_scheduling_ignored_during_execution
        return cls(dict(pod.spec.node_selector), required, tuple(pod.spec.tolerations))

    def signature(self) -> str:
        return repr((sorted(self.node_selector.items()), self.affinity, self.tolerations))


NO_PLACEMENT = Placement()


def assign_pods(
    cohort: Cohort,
    cq: ClusterQueue,
    flavors: Mapping[str, ResourceFlavor],
    requests: Mapping[str, Mapping[str, int]],
    placements: Mapping[str, Placement],
    *,
    fair_sharing: bool = False,
) -> tuple[Assignment, dict[str, dict[str, str]]]:
    """The workload's assignment, and each pod's flavors (resource -> flavor) when it fits.
    `requests` and `placements` are by pod key."""
    groups: dict[str, list[str]] = {}
    for key in sorted(requests):
        placement = placements.get(key, NO_PLACEMENT)
        sig = repr(sorted(requests[key].items())) + placement.signature()
        groups.setdefault(sig, []).append(key)
    podsets: list[PodSet] = []
    members: list[list[str]] = []
    for keys in groups.values():
        total: dict[str, int] = {}
        for key in keys:
            for resource, amount in requests[key].items():
                total[resource] = total.get(resource, 0) + amount
        placement = placements.get(keys[0], NO_PLACEMENT)
        name = keys[0].partition("/")[2] if len(groups) > 1 else "main"
        podsets.append(
            PodSet(
                name,
                total,
                len(keys),
                placement.node_selector,
                placement.affinity,
                placement.tolerations,
            )
        )
        members.append(keys)
    assignment = assign_flavors(cohort, cq, flavors, podsets, fair_sharing=fair_sharing)
    per_pod: dict[str, dict[str, str]] = {}
    for ps, keys in zip(assignment.podsets, members, strict=False):
        for key in keys:
            per_pod[key] = dict(ps.flavors)
    return assignment, per_pod
