"""Kueue's objects as the API server serves them, in the shape of berth's model of them.

berth models Kueue's kueue.x-k8s.io/v1beta1 (shared.models.kueue). Kueue 0.15 made v1beta2
its storage version and renamed two fields berth reads: ClusterQueue `spec.cohort` is
`spec.cohortName`, Cohort `spec.parent` is `spec.parentName`. Its flavorFungibility value
`MayStopSearch` (v1beta2's name for Borrow / Preempt) berth's model accepts as it is. Fields
berth does not model (v1beta2's flavorFungibility.preference, admissionChecksStrategy,
concurrentAdmissionPolicy, LocalQueue stopPolicy ...) are dropped, as for every object read
from the API (shared.models.decoding, API mode).
"""

from __future__ import annotations

from typing import Any

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
