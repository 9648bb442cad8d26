"""The kinds the adapter lists and watches, where the API serves them, and every call each
component makes (the Helm chart's RBAC grants exactly these: tests/deploy).

A kind may be served in several versions, depending on what is installed: Kueue's objects are
kueue.x-k8s.io/v1beta2 since Kueue 0.15 (v1beta1 still served beside it for a while), v1beta1
before, and its Cohort was v1alpha1 in Kueue 0.9 and 0.10. `Kind.served` lists them in order of
preference; the client lists the first one the server does not answer 404 (shared.kube.client),
and `shared.models.kueue_versions` turns what that version calls its fields into berth's model
(which is Kueue's v1beta1). All versions 404: the CRD is not installed, the kind is absent
(the reflector looks again now and then, services.adapter.reflector).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from shared.models.schema import KIND_BY_NAME


@dataclass(frozen=True)
class Kind:
    """One watched kind: berth's kind name, the apiVersion of berth's model of it, and the
    versions the server may serve it in (apiVersion, lightkube resource), preferred first."""

    kind: str
    api_version: str
    served: tuple[tuple[str, Any], ...]
    namespaced: bool

    @property
    def resource(self) -> Any:
        """The preferred version's resource."""
        return self.served[0][1]


_LISTED: list[tuple[str, str]] = []


def _kind(group: str, versions: tuple[str, ...], kind: str, plural: str, namespaced: bool) -> Kind:
    _LISTED.append((group, plural))
    make = create_namespaced_resource if namespaced else create_global_resource
    served = tuple(
        (f"{group}/{version}" if group else version, make(group, version, kind, plural))
        for version in versions
    )
    return Kind(kind, KIND_BY_NAME[kind].api_version, served, namespaced)


KUEUE = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")

WATCHED: dict[str, Kind] = {
    k.kind: k
    for k in (
        _kind("", ("v1",), "Node", "nodes", False),
        _kind("", ("v1",), "Pod", "pods", True),
        _kind("", ("v1",), "Namespace", "namespaces", False),
        _kind("scheduling.k8s.io", ("v1",), "PriorityClass", "priorityclasses", False),
        _kind("policy", ("v1",), "PodDisruptionBudget", "poddisruptionbudgets", True),
        _kind("scheduling.x-k8s.io", ("v1alpha1",), "PodGroup", "podgroups", True),
        _kind(KUEUE, KUEUE_VERSIONS, "ResourceFlavor", "resourceflavors", False),
        _kind(KUEUE, KUEUE_VERSIONS, "ClusterQueue", "clusterqueues", False),
        _kind(KUEUE, KUEUE_VERSIONS, "LocalQueue", "localqueues", True),
        _kind(KUEUE, (*KUEUE_VERSIONS, "v1alpha1"), "Cohort", "cohorts", False),
    )
}
"""The kinds the adapter lists and watches into the store, by berth kind name."""

ADAPTER_CALLS: frozenset[tuple[str, str, str]] = frozenset(
    {(group, plural, verb) for group, plural in _LISTED for verb in ("list", "watch")}
    | {
        ("", "pods/status", "patch"),
        ("events.k8s.io", "events", "create"),
        ("events.k8s.io", "events", "patch"),
        ("coordination.k8s.io", "leases", "create"),
        ("coordination.k8s.io", "leases", "get"),
        ("coordination.k8s.io", "leases", "update"),
    }
)
"""Every (apiGroup, resource, verb) the adapter calls."""

BINDER_CALLS: frozenset[tuple[str, str, str]] = frozenset(
    {
        ("", "pods/binding", "create"),
        ("", "pods/eviction", "create"),
        ("", "events", "create"),
    }
)
"""Every (apiGroup, resource, verb) the binder calls."""

DASHBOARD_CALLS: frozenset[tuple[str, str, str]] = frozenset(
    {
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    }
)
"""The dashboard's calls in a cluster: who a token is, and what RBAC lets it read."""

API_CALLS: frozenset[tuple[str, str, str]] = ADAPTER_CALLS | BINDER_CALLS | DASHBOARD_CALLS
"""Every call berth makes, and nothing else: the Helm chart's RBAC grants exactly these,
each component's to its own ServiceAccount (tests/deploy), and the Kubernetes-mode tests
check that the emulator saw no other call."""
