"""Validation of Kueue's quota objects, as Kueue's webhooks and CRD schema check them.

ClusterQueue:
- every resource group covers at least one resource; each of its flavors lists exactly the
  covered resources, in the same order; a resource or a flavor belongs to one group only;
- quantities parse and are non-negative; borrowingLimit and lendingLimit need a cohort;
  lendingLimit is at most nominalQuota;
- fairSharing.weight is a non-negative quantity; the policies are Kueue's enums; the
  namespaceSelector is a valid label selector.
Cohort: resource groups as a ClusterQueue's (a root cohort may lend and borrow nothing: its
limits need no parent though, Kueue accepts them and ignores them), not its own parent.
LocalQueue: spec.clusterQueue is required. ResourceFlavor: valid labels and taints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.models.field_checks import fail, unsupported
from shared.models.kueue import (
    ADMISSION_MODES,
    BORROW_POLICIES,
    QUEUEING_STRATEGIES,
    RECLAIM_POLICIES,
    STOP_POLICIES,
    WHEN_CAN_BORROW,
    WHEN_CAN_PREEMPT,
    WITHIN_CLUSTER_QUEUE_POLICIES,
    ClusterQueue,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    quota_value,
)
from shared.models.kueue import (
    Cohort as KueueCohort,
)
from shared.models.quantity import QuantityError, parse_quantity
from shared.models.selector_validation import validate_label_selector
from shared.models.taints import TAINT_EFFECTS
from shared.models.validation import validate_labels


def _quantity(resource: str, value: int | str, path: str) -> int:
    try:
        amount = quota_value(resource, value)
    except (QuantityError, ValueError) as e:
        raise fail(path, f'invalid quantity "{value}": {e}') from None
    if amount < 0:
        raise fail(path, f'Invalid value: "{value}": must be greater than or equal to 0')
    return amount


def _validate_resource_groups(
    groups: list[ResourceGroup], parent: str, *, lend_subtree: bool = False
) -> None:
    """`lend_subtree`: a Cohort's lendingLimit bounds what its subtree lends, so it may
    exceed its own nominalQuota."""
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for g, group in enumerate(groups):
        gp = f"spec.resourceGroups[{g}]"
        if not group.covered_resources:
            raise fail(f"{gp}.coveredResources", "Required value")
        for resource in group.covered_resources:
            if resource in seen_resources:
                raise fail(
                    f"{gp}.coveredResources",
                    f'Duplicate value: "{resource}": a resource belongs to one resource group',
                )
            seen_resources.add(resource)
        if not group.flavors:
            raise fail(f"{gp}.flavors", "Required value")
        for f, flavor in enumerate(group.flavors):
            fp = f"{gp}.flavors[{f}]"
            if not flavor.name:
                raise fail(f"{fp}.name", "Required value")
            if flavor.name in seen_flavors:
                raise fail(
                    f"{fp}.name",
                    f'Duplicate value: "{flavor.name}": a flavor belongs to one resource group',
                )
            seen_flavors.add(flavor.name)
            names = [r.name for r in flavor.resources]
            if names != group.covered_resources:
                raise fail(
                    f"{fp}.resources",
                    f"Invalid value: {names}: must list the coveredResources "
                    f"{group.covered_resources}, in that order",
                )
            for r, quota in enumerate(flavor.resources):
                rp = f"{fp}.resources[{r}]"
                nominal = _quantity(quota.name, quota.nominal_quota, f"{rp}.nominalQuota")
                for limit, field in (
                    (quota.borrowing_limit, "borrowingLimit"),
                    (quota.lending_limit, "lendingLimit"),
                ):
                    if limit is None:
                        continue
                    if not parent:
                        raise fail(f"{rp}.{field}", "Forbidden: must be nil when cohort is empty")
                    amount = _quantity(quota.name, limit, f"{rp}.{field}")
                    if field == "lendingLimit" and amount > nominal and not lend_subtree:
                        raise fail(
                            f"{rp}.lendingLimit",
                            f'Invalid value: "{limit}": must be less than or equal to nominalQuota',
                        )


def validate_cluster_queue(cq: ClusterQueue) -> None:
    spec = cq.spec
    _validate_resource_groups(spec.resource_groups, spec.cohort)
    if spec.queueing_strategy not in QUEUEING_STRATEGIES:
        raise unsupported("spec.queueingStrategy", spec.queueing_strategy, QUEUEING_STRATEGIES)
    pre = spec.preemption
    if pre.within_cluster_queue not in WITHIN_CLUSTER_QUEUE_POLICIES:
        raise unsupported(
            "spec.preemption.withinClusterQueue",
            pre.within_cluster_queue,
            WITHIN_CLUSTER_QUEUE_POLICIES,
        )
    if pre.reclaim_within_cohort not in RECLAIM_POLICIES:
        raise unsupported(
            "spec.preemption.reclaimWithinCohort", pre.reclaim_within_cohort, RECLAIM_POLICIES
        )
    if pre.borrow_within_cohort.policy not in BORROW_POLICIES:
        raise unsupported(
            "spec.preemption.borrowWithinCohort.policy",
            pre.borrow_within_cohort.policy,
            BORROW_POLICIES,
        )
    fungibility = spec.flavor_fungibility
    if fungibility.when_can_borrow not in WHEN_CAN_BORROW:
        raise unsupported(
            "spec.flavorFungibility.whenCanBorrow", fungibility.when_can_borrow, WHEN_CAN_BORROW
        )
    if fungibility.when_can_preempt not in WHEN_CAN_PREEMPT:
        raise unsupported(
            "spec.flavorFungibility.whenCanPreempt",
            fungibility.when_can_preempt,
            WHEN_CAN_PREEMPT,
        )
    scope = spec.admission_scope
    if scope is not None and scope.admission_mode not in ADMISSION_MODES:
        raise unsupported(
            "spec.admissionScope.admissionMode", scope.admission_mode, ADMISSION_MODES
        )
    if spec.stop_policy not in STOP_POLICIES:
        raise unsupported("spec.stopPolicy", spec.stop_policy, STOP_POLICIES)
    try:
        weight = parse_quantity(spec.fair_sharing.weight)
    except (QuantityError, ValueError) as e:
        raise fail("spec.fairSharing.weight", f"invalid quantity: {e}") from None
    if weight < 0:
        raise fail("spec.fairSharing.weight", "Invalid value: must be non-negative")
    validate_label_selector(spec.namespace_selector, "spec.namespaceSelector")


def validate_kueue_cohort(cohort: KueueCohort) -> None:
    if cohort.spec.parent == cohort.metadata.name:
        raise fail("spec.parent", "Invalid value: a cohort cannot be its own parent")
    _validate_resource_groups(
        cohort.spec.resource_groups, cohort.spec.parent or "root", lend_subtree=True
    )
    try:
        weight = parse_quantity(cohort.spec.fair_sharing.weight)
    except (QuantityError, ValueError) as e:
        raise fail("spec.fairSharing.weight", f"invalid quantity: {e}") from None
    if weight < 0:
        raise fail("spec.fairSharing.weight", "Invalid value: must be non-negative")


def validate_local_queue(lq: LocalQueue) -> None:
    if not lq.spec.cluster_queue:
        raise fail("spec.clusterQueue", "Required value")
    try:
        weight = parse_quantity(lq.spec.fair_sharing.weight)
    except (QuantityError, ValueError) as e:
        raise fail("spec.fairSharing.weight", f"invalid quantity: {e}") from None
    if weight < 0:
        raise fail("spec.fairSharing.weight", "Invalid value: must be non-negative")


def validate_resource_flavor(rf: ResourceFlavor) -> None:
    validate_labels(rf.spec.node_labels, "spec.nodeLabels")
    for i, taint in enumerate(rf.spec.node_taints):
        if not taint.key:
            raise fail(f"spec.nodeTaints[{i}].key", "Required value")
        if taint.effect not in TAINT_EFFECTS:
            raise unsupported(f"spec.nodeTaints[{i}].effect", taint.effect, TAINT_EFFECTS)


KUEUE_VALIDATORS: dict[type[Any], Callable[[Any], None]] = {
    ClusterQueue: validate_cluster_queue,
    KueueCohort: validate_kueue_cohort,
    LocalQueue: validate_local_queue,
    ResourceFlavor: validate_resource_flavor,
}
