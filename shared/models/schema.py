"""Where each model kind lives in the Kubernetes API, and how attributes map to JSON names.

One table drives both directions (manifest decoding and ``to_dict``/msgpack encoding):
attribute ``node_selector`` <-> JSON ``nodeSelector`` unless a field's metadata says
otherwise (``hostIP``). ``IGNORED`` lists real Kubernetes fields berth accepts in manifests
and drops, so strict validation rejects only genuine typos.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any

from shared.models.kueue import (
    ClusterQueue,
    ClusterQueueSpec,
    LocalQueue,
    ResourceFlavor,
)
from shared.models.kueue import (
    Cohort as KueueCohort,
)
from shared.models.meta import ObjectMeta, OwnerReference
from shared.models.node import ContainerImage, Node, NodeCondition, NodeSpec, NodeStatus
from shared.models.pod import (
    Container,
    ContainerPort,
    Pod,
    PodSpec,
    PodStatus,
    ResourceRequirements,
)
from shared.models.policy import (
    Namespace,
    PodDisruptionBudget,
    PodDisruptionBudgetSpec,
    PodDisruptionBudgetStatus,
    PodGroup,
    PodGroupSpec,
    PriorityClass,
)
from shared.models.workloads import (
    ReplicaSet,
    ReplicaSetSpec,
    ReplicationController,
    ReplicationControllerSpec,
    Service,
    ServicePort,
    ServiceSpec,
    StatefulSet,
    StatefulSetSpec,
)

KubeObject = (
    ClusterQueue
    | KueueCohort
    | LocalQueue
    | ResourceFlavor
    | Pod
    | Node
    | Namespace
    | PriorityClass
    | PodDisruptionBudget
    | PodGroup
    | Service
    | ReplicationController
    | ReplicaSet
    | StatefulSet
)


@dataclass(frozen=True, slots=True)
class KindInfo:
    api_version: str
    kind: str
    cls: Any
    namespaced: bool


KINDS: tuple[KindInfo, ...] = (
    KindInfo("v1", "Node", Node, False),
    KindInfo("v1", "Pod", Pod, True),
    KindInfo("v1", "Namespace", Namespace, False),
    KindInfo("scheduling.k8s.io/v1", "PriorityClass", PriorityClass, False),
    KindInfo("policy/v1", "PodDisruptionBudget", PodDisruptionBudget, True),
    KindInfo("scheduling.x-k8s.io/v1alpha1", "PodGroup", PodGroup, True),
    KindInfo("v1", "Service", Service, True),
    KindInfo("v1", "ReplicationController", ReplicationController, True),
    KindInfo("apps/v1", "ReplicaSet", ReplicaSet, True),
    KindInfo("apps/v1", "StatefulSet", StatefulSet, True),
    KindInfo("kueue.x-k8s.io/v1beta1", "ResourceFlavor", ResourceFlavor, False),
    KindInfo("kueue.x-k8s.io/v1beta1", "ClusterQueue", ClusterQueue, False),
    KindInfo("kueue.x-k8s.io/v1beta1", "LocalQueue", LocalQueue, True),
    KindInfo("kueue.x-k8s.io/v1alpha1", "Cohort", KueueCohort, False),
)
KIND_BY_NAME: dict[str, KindInfo] = {k.kind: k for k in KINDS}
KIND_BY_CLASS: dict[type[Any], KindInfo] = {k.cls: k for k in KINDS}

_TYPE_META = frozenset({"apiVersion", "kind"})

# Real API fields that berth does not model: accepted in manifests and dropped.
IGNORED: dict[type[Any], frozenset[str]] = {
    Pod: _TYPE_META,
    Node: _TYPE_META,
    Namespace: _TYPE_META | {"spec", "status"},
    PriorityClass: _TYPE_META,
    PodDisruptionBudget: _TYPE_META,
    PodGroup: _TYPE_META | {"status"},
    ResourceFlavor: _TYPE_META,
    ClusterQueue: _TYPE_META | {"status"},
    KueueCohort: _TYPE_META | {"status"},
    LocalQueue: _TYPE_META | {"status"},
    ClusterQueueSpec: frozenset({"admissionChecks"}),
    ObjectMeta: frozenset(
        {
            "selfLink",
            "generation",
            "deletionGracePeriodSeconds",
            "finalizers",
            "managedFields",
        }
    ),
    OwnerReference: frozenset(),
    PodSpec: frozenset(
        {
            "volumes",
            "ephemeralContainers",
            "activeDeadlineSeconds",
            "dnsConfig",
            "serviceAccountName",
            "serviceAccount",
            "automountServiceAccountToken",
            "hostPID",
            "hostIPC",
            "shareProcessNamespace",
            "securityContext",
            "imagePullSecrets",
            "hostname",
            "subdomain",
            "hostAliases",
            "readinessGates",
            "runtimeClassName",
            "enableServiceLinks",
            "os",
            "setHostnameAsFQDN",
            "hostUsers",
            "resourceClaims",
        }
    ),
    Container: frozenset(
        {
            "command",
            "args",
            "workingDir",
            "env",
            "envFrom",
            "volumeMounts",
            "volumeDevices",
            "livenessProbe",
            "readinessProbe",
            "startupProbe",
            "lifecycle",
            "terminationMessagePath",
            "terminationMessagePolicy",
            "imagePullPolicy",
            "securityContext",
            "stdin",
            "stdinOnce",
            "tty",
            "resizePolicy",
        }
    ),
    ResourceRequirements: frozenset({"claims"}),
    ContainerPort: frozenset(),
    PodStatus: frozenset(
        {
            "conditions",
            "message",
            "reason",
            "hostIP",
            "hostIPs",
            "podIP",
            "podIPs",
            "initContainerStatuses",
            "containerStatuses",
            "ephemeralContainerStatuses",
            "qosClass",
            "resize",
            "resourceClaimStatuses",
            "observedGeneration",
        }
    ),
    NodeSpec: frozenset({"podCIDR", "podCIDRs", "providerID", "externalID", "configSource"}),
    NodeStatus: frozenset(
        {
            "phase",
            "addresses",
            "daemonEndpoints",
            "nodeInfo",
            "volumesInUse",
            "volumesAttached",
            "config",
            "runtimeHandlers",
            "features",
            "declaredFeatures",
        }
    ),
    ContainerImage: frozenset(),
    NodeCondition: frozenset({"lastProbeTime"}),
    PodDisruptionBudgetSpec: frozenset(),
    PodDisruptionBudgetStatus: frozenset({"observedGeneration", "disruptedPods", "conditions"}),
    PodGroupSpec: frozenset(),
    # Pod owners and Services: only their selectors matter to the scheduler.
    Service: _TYPE_META | {"status"},
    ServiceSpec: frozenset(
        {
            "clusterIPs",
            "externalIPs",
            "externalName",
            "externalTrafficPolicy",
            "internalTrafficPolicy",
            "healthCheckNodePort",
            "ipFamilies",
            "ipFamilyPolicy",
            "loadBalancerIP",
            "loadBalancerClass",
            "loadBalancerSourceRanges",
            "allocateLoadBalancerNodePorts",
            "publishNotReadyAddresses",
            "sessionAffinity",
            "sessionAffinityConfig",
            "trafficDistribution",
        }
    ),
    ServicePort: frozenset({"appProtocol"}),
    ReplicationController: _TYPE_META | {"status"},
    ReplicationControllerSpec: frozenset({"minReadySeconds"}),
    ReplicaSet: _TYPE_META | {"status"},
    ReplicaSetSpec: frozenset({"minReadySeconds"}),
    StatefulSet: _TYPE_META | {"status"},
    StatefulSetSpec: frozenset(
        {
            "podManagementPolicy",
            "updateStrategy",
            "revisionHistoryLimit",
            "volumeClaimTemplates",
            "minReadySeconds",
            "persistentVolumeClaimRetentionPolicy",
            "ordinals",
        }
    ),
}


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    attr: str
    json: str
    hint: Any
    # How to tell the field still holds its default (to omit it when encoding).
    default: Any
    has_default: bool
    # Wire format override from the field's metadata ("int-string": an int sent as text).
    fmt: str = ""
    # Written out whenever non-empty, even when equal to the default (metadata.namespace).
    emit_nonempty: bool = False
    # No default at all: a document without the field is invalid.
    required: bool = False


def _plain_factory(factory: Any) -> bool:
    """list, dict or a dataclass: a factory whose result is a fixed, comparable default."""
    return factory in (list, dict) or (
        isinstance(factory, type) and dataclasses.is_dataclass(factory)
    )


@cache
def fields_of(cls: type[Any]) -> tuple[FieldSpec, ...]:
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        json_name = f.metadata.get("json", camel(f.name))
        if f.default is not dataclasses.MISSING:
            default, has_default = f.default, True
        elif _plain_factory(f.default_factory):
            default, has_default = typing.cast(Any, f.default_factory)(), True
        else:
            # A generated default (uid, metadata): always written out.
            default, has_default = None, False
        fmt = f.metadata.get("format", "")
        nonempty = f.metadata.get("emit") == "nonempty"
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        specs.append(
            FieldSpec(
                f.name, json_name, hints[f.name], default, has_default, fmt, nonempty, required
            )
        )
    return tuple(specs)


def ignored_fields(cls: type[Any]) -> frozenset[str]:
    return IGNORED.get(cls, frozenset())
