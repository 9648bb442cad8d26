"""Kueue's ResourceFlavor, ClusterQueue and LocalQueue: loading, units and the webhook's
checks, each refusal naming the object and the field."""

from __future__ import annotations

import pytest

from shared.models import load_manifest_text
from shared.models.kueue import ClusterQueue, LocalQueue, ResourceFlavor, quota_value
from shared.models.manifest import ManifestError

HEAD = "apiVersion: kueue.x-k8s.io/v1beta1\n"

VALID = (
    HEAD
    + """kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeLabels: {instance-type: spot}
  nodeTaints: [{key: spot, value: "true", effect: NoSchedule}]
---
"""
    + HEAD
    + """kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohort: batch
  namespaceSelector: {}
  fairSharing: {weight: 2}
  preemption:
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
    withinClusterQueue: LowerPriority
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: spot
      resources:
      - {name: cpu, nominalQuota: 9, borrowingLimit: "2", lendingLimit: 500m}
      - {name: memory, nominalQuota: 36Gi}
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
"""
    + HEAD
    + """kind: LocalQueue
metadata: {name: user-queue, namespace: team-a}
spec: {clusterQueue: team-a}
"""
)


def test_the_three_kinds_load_with_their_fields() -> None:
    loaded = load_manifest_text(VALID)
    flavor, cq, lq = loaded.queue_objects
    assert isinstance(flavor, ResourceFlavor)
    assert flavor.spec.node_labels == {"instance-type": "spot"}
    assert flavor.spec.node_taints[0].effect == "NoSchedule"
    assert isinstance(cq, ClusterQueue)
    assert cq.spec.cohort == "batch"
    assert cq.spec.namespace_selector is not None  # {}: every namespace
    cpu = cq.spec.resource_groups[0].flavors[0].resources[0]
    assert quota_value("cpu", cpu.nominal_quota) == 9000
    assert quota_value("cpu", cpu.borrowing_limit or 0) == 2000
    assert quota_value("cpu", cpu.lending_limit or 0) == 500
    memory = cq.spec.resource_groups[0].flavors[0].resources[1]
    assert quota_value("memory", memory.nominal_quota) == 36 * 2**30
    assert cq.spec.preemption.borrow_within_cohort.max_priority_threshold == 100
    assert isinstance(lq, LocalQueue)
    assert lq.key == "team-a/user-queue"
    assert lq.spec.cluster_queue == "team-a"


def test_a_missing_namespace_selector_selects_no_namespace() -> None:
    cq = load_manifest_text(HEAD + "kind: ClusterQueue\nmetadata: {name: q}\n").queue_objects[0]
    assert isinstance(cq, ClusterQueue)
    assert cq.spec.namespace_selector is None


def cq(spec: str) -> str:
    return HEAD + "kind: ClusterQueue\nmetadata: {name: q}\nspec:\n" + spec


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            cq("  resourceGroups: [{coveredResources: [], flavors: []}]\n"),
            "ClusterQueue q: spec.resourceGroups[0].coveredResources: Required value",
            id="nothing-covered",
        ),
        pytest.param(
            cq(
                "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
                "    - {name: f, resources: [{name: memory, nominalQuota: 1}]}\n"
            ),
            "ClusterQueue q: spec.resourceGroups[0].flavors[0].resources: Invalid value: "
            "['memory']: must list the coveredResources ['cpu'], in that order",
            id="flavor-resources-differ",
        ),
        pytest.param(
            cq(
                "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
                "    - {name: f, resources: [{name: cpu, nominalQuota: -1}]}\n"
            ),
            "ClusterQueue q: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
            'Invalid value: "-1": must be greater than or equal to 0',
            id="negative-quota",
        ),
        pytest.param(
            cq(
                "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
                "    - {name: f, resources: [{name: cpu, nominalQuota: 1, borrowingLimit: 1}]}\n"
            ),
            "ClusterQueue q: spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: "
            "Forbidden: must be nil when cohort is empty",
            id="borrowing-without-cohort",
        ),
        pytest.param(
            cq(
                "  cohort: c\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
                "    - {name: f, resources: [{name: cpu, nominalQuota: 1, lendingLimit: 2}]}\n"
            ),
            "ClusterQueue q: spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: "
            'Invalid value: "2": must be less than or equal to nominalQuota',
            id="lending-above-nominal",
        ),
        pytest.param(
            cq(
                "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
                "    - {name: f, resources: [{name: cpu, nominalQuota: 1}]}\n"
                "  - coveredResources: [cpu]\n    flavors:\n"
                "    - {name: g, resources: [{name: cpu, nominalQuota: 1}]}\n"
            ),
            'ClusterQueue q: spec.resourceGroups[1].coveredResources: Duplicate value: "cpu": '
            "a resource belongs to one resource group",
            id="resource-in-two-groups",
        ),
        pytest.param(
            cq("  preemption: {withinClusterQueue: Always}\n"),
            'ClusterQueue q: spec.preemption.withinClusterQueue: Unsupported value: "Always": '
            'supported values: "LowerOrNewerEqualPriority", "LowerPriority", "Never"',
            id="bad-policy",
        ),
        pytest.param(
            cq("  namespaceSelector: {matchExpressions: [{key: team, operator: Is}]}\n"),
            "ClusterQueue q: spec.namespaceSelector.matchExpressions[0].operator: "
            'Unsupported value: "Is"',
            id="bad-selector",
        ),
        pytest.param(
            cq("  nominalQuota: 3\n"),
            "ClusterQueue q: spec.nominalQuota: unknown field",
            id="unknown-field",
        ),
        pytest.param(
            HEAD + "kind: LocalQueue\nmetadata: {name: lq, namespace: ns}\nspec: {}\n",
            "LocalQueue ns/lq: spec.clusterQueue: Required value",
            id="local-queue-without-cluster-queue",
        ),
    ],
)
def test_invalid_objects_are_refused_with_the_field(text: str, message: str) -> None:
    with pytest.raises(ManifestError) as err:
        load_manifest_text(text)
    assert str(err.value).startswith(message)
