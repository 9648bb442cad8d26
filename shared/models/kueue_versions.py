"""Kueue's objects in the versions Kueue serves, read into berth's model of them.

berth models Kueue's kueue.x-k8s.io/v1beta1 (shared.models.kueue; Cohort as v1alpha1, which
has the same fields). Manifests (`berth apply`) and the adapter (Kubernetes mode,
shared.kube.kinds) also take the other versions Kueue serves (ALSO_SERVED). Kueue 0.15 made v1beta2
its storage version and renamed two fields berth reads: ClusterQueue `spec.cohort` is
`spec.cohortName`, Cohort `spec.parent` is `spec.parentName`. Its flavorFungibility value
`MayStopSearch` (v1beta2's name for Borrow / Preempt) berth's model accepts as it is. Fields
berth does not model (v1beta2's flavorFungibility.preference, admissionChecksStrategy,
concurrentAdmissionPolicy, LocalQueue stopPolicy ...) are dropped, as for every object read
from the API (shared.models.decoding, API mode).
"""

from __future__ import annotations

from typing import Any

ALSO_SERVED: dict[str, tuple[str, ...]] = {
    "ResourceFlavor": ("kueue.x-k8s.io/v1beta2",),
    "ClusterQueue": ("kueue.x-k8s.io/v1beta2",),
    "LocalQueue": ("kueue.x-k8s.io/v1beta2",),
    "Cohort": ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1"),
}
"""Kind -> the apiVersions accepted besides berth's model's (shared.models.schema.KINDS)."""

RENAMED: dict[tuple[str, str], dict[str, str]] = {
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"): {"cohortName": "cohort"},
    ("kueue.x-k8s.io/v1beta2", "Cohort"): {"parentName": "parent"},
}
"""(served apiVersion, kind) -> spec field as served -> berth's (v1beta1) name."""


def as_berth(kind: str, served: str, body: dict[str, Any]) -> dict[str, Any]:
    """`body` (of `kind`, served as apiVersion `served`) with its spec's fields under the
    names berth's model gives them; a new dict when anything is renamed."""
    renamed = RENAMED.get((served, kind))
    spec = body.get("spec")
    if not renamed or not isinstance(spec, dict) or not renamed.keys() & spec.keys():
        return body
    spec = {renamed.get(name, name): value for name, value in spec.items()}
    return {**body, "spec": spec}
