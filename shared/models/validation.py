"""API-server style defaulting and validation of decoded objects (upstream
pkg/apis/core/validation and friends, trimmed to the fields berth models).

Every check raises FieldError with the JSON path of the offending field; the first problem
found wins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shared.models.field_checks import fail, unsupported
from shared.models.meta import ObjectMeta
from shared.models.names import (
    dns1123_label,
    dns1123_subdomain,
    label_value,
    qualified_name,
    resource_name,
)
from shared.models.node import Node
from shared.models.pod import (
    CONTAINER_RESTART_ALWAYS,
    Container,
    Pod,
    PodSpec,
)
from shared.models.policy import Namespace, PodDisruptionBudget, PodGroup, PriorityClass
from shared.models.quantity import MAX_EXACT_AMOUNT
from shared.models.selector_validation import (
    validate_label_selector,
    validate_node_affinity,
    validate_pod_affinity,
)
from shared.models.taints import TAINT_EFFECTS

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# Largest value a user PriorityClass may have (scheduling.HighestUserDefinablePriority).
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
# Built-in classes the API server creates (scheduling.SystemPriorityClasses()).
SYSTEM_PRIORITY_CLASSES = {
    "system-node-critical": 2_000_001_000,
    "system-cluster-critical": 2_000_000_000,
}
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
INCLUSION_POLICIES = ("Honor", "Ignore")
PROTOCOLS = ("TCP", "UDP", "SCTP")
POD_PHASES = ("", "Pending", "Running", "Succeeded", "Failed", "Unknown")
UNHEALTHY_POD_EVICTION_POLICIES = ("IfHealthyBudget", "AlwaysAllow")


# --- pods --------------------------------------------------------------------------------


# --- metadata, names, labels, resource names -----------------------------------------------

UID_MAX = 256


def validate_meta(meta: ObjectMeta, *, namespaced: bool, label_name: bool) -> None:
    """Names, namespace, labels and uid of any object (upstream ValidateObjectMeta, with
    the name rule of the kind: a DNS-1123 label for namespaces, a subdomain otherwise)."""
    problem = dns1123_label(meta.name) if label_name else dns1123_subdomain(meta.name)
    if problem:
        raise fail("metadata.name", f'Invalid value: "{meta.name:.300}": {problem}')
    if namespaced:
        problem = dns1123_label(meta.namespace)
        if problem:
            raise fail("metadata.namespace", f'Invalid value: "{meta.namespace:.300}": {problem}')
    validate_labels(meta.labels, "metadata.labels")
    uid = meta.uid
    if len(uid) > UID_MAX or not uid.isprintable() or any(c.isspace() for c in uid):
        raise fail(
            "metadata.uid",
            f'Invalid value: "{uid:.300}": must be at most {UID_MAX} printable characters '
            "without spaces",
        )


def validate_labels(labels: Mapping[str, str], path: str) -> None:
    for key, value in labels.items():
        problem = qualified_name(key)
        if problem:
            raise fail(path, f'Invalid value: "{key:.300}": {problem}')
        problem = label_value(value)
        if problem:
            raise fail(f"{path}.{key}", f'Invalid value: "{value:.300}": {problem}')


def validate_resource_names(resources: Mapping[str, int], path: str, *, node: bool) -> None:
    for name in resources:
        problem = resource_name(name, node=node)
        if problem:
            raise fail(f"{path}.{name}", f'Invalid value: "{name:.300}": {problem}')


def default_pod(pod: Pod) -> None:
    """API-server defaulting: requests from limits; host ports under host networking."""
    spec = pod.spec
    for container in (*spec.containers, *spec.init_containers):
        res = container.resources
        for name, amount in res.limits.items():
            res.requests.setdefault(name, amount)
        if spec.host_network:
            for port in container.ports:
                if port.host_port == 0:
                    port.host_port = port.container_port


def _validate_container(container: Container, path: str, init: bool) -> None:
    if not container.name:
        raise fail(f"{path}.name", "Required value")
    if container.restart_policy is not None:
        if not init:
            raise fail(f"{path}.restartPolicy", "Forbidden: may not be set for non-init containers")
        if container.restart_policy != CONTAINER_RESTART_ALWAYS:
            raise unsupported(f"{path}.restartPolicy", container.restart_policy, ("Always",))
    for i, port in enumerate(container.ports):
        p = f"{path}.ports[{i}]"
        if not 1 <= port.container_port <= 65535:
            raise fail(
                f"{p}.containerPort",
                f"Invalid value: {port.container_port}: must be between 1 and 65535, inclusive",
            )
        if not 0 <= port.host_port <= 65535:
            raise fail(
                f"{p}.hostPort",
                f"Invalid value: {port.host_port}: must be between 0 and 65535, inclusive",
            )
        if port.protocol not in PROTOCOLS:
            raise unsupported(f"{p}.protocol", port.protocol, PROTOCOLS)
    res = container.resources
    validate_resource_names(res.requests, f"{path}.resources.requests", node=False)
    validate_resource_names(res.limits, f"{path}.resources.limits", node=False)
    for name, limit in res.limits.items():
        request = res.requests.get(name)
        if request is not None and request > limit:
            raise fail(
                f"{path}.resources.requests.{name}",
                "Invalid value: must be less than or equal to the limit",
            )


def _validate_containers(spec: PodSpec) -> None:
    if not spec.containers:
        raise fail("spec.containers", "Required value")
    seen: set[str] = set()
    groups = (
        ("spec.initContainers", spec.init_containers, True),
        ("spec.containers", spec.containers, False),
    )
    for path, containers, init in groups:
        for i, container in enumerate(containers):
            p = f"{path}[{i}]"
            _validate_container(container, p, init)
            if container.name in seen:
                raise fail(f"{p}.name", f'Duplicate value: "{container.name}"')
            seen.add(container.name)


def _validate_tolerations(spec: PodSpec) -> None:
    for i, tol in enumerate(spec.tolerations):
        p = f"spec.tolerations[{i}]"
        if tol.operator not in ("", "Equal", "Exists"):
            raise unsupported(f"{p}.operator", tol.operator, ("Equal", "Exists"))
        if not tol.key and tol.operator != "Exists":
            raise fail(
                f"{p}.operator",
                "Invalid value: operator must be Exists when `key` is empty, "
                'which means "match all values and all keys"',
            )
        if tol.operator == "Exists" and tol.value:
            raise fail(
                f"{p}.operator", "Invalid value: value must be empty when `operator` is 'Exists'"
            )
        if tol.effect and tol.effect not in TAINT_EFFECTS:
            raise unsupported(f"{p}.effect", tol.effect, TAINT_EFFECTS)
        if tol.toleration_seconds is not None and tol.effect != "NoExecute":
            raise fail(
                f"{p}.effect",
                "Invalid value: effect must be 'NoExecute' when `tolerationSeconds` is set",
            )


def _validate_spread(spec: PodSpec) -> None:
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(spec.topology_spread_constraints):
        p = f"spec.topologySpreadConstraints[{i}]"
        if c.max_skew <= 0:
            raise fail(f"{p}.maxSkew", f"Invalid value: {c.max_skew}: must be greater than zero")
        if c.max_skew > INT32_MAX:
            raise fail(f"{p}.maxSkew", f"Invalid value: {c.max_skew}: must be a 32-bit integer")
        if not c.topology_key:
            raise fail(f"{p}.topologyKey", "Required value: can not be empty")
        if c.when_unsatisfiable not in WHEN_UNSATISFIABLE:
            raise unsupported(f"{p}.whenUnsatisfiable", c.when_unsatisfiable, WHEN_UNSATISFIABLE)
        if c.min_domains is not None:
            if c.min_domains > INT32_MAX:
                raise fail(
                    f"{p}.minDomains", f"Invalid value: {c.min_domains}: must be a 32-bit integer"
                )
            if c.min_domains <= 0:
                raise fail(
                    f"{p}.minDomains", f"Invalid value: {c.min_domains}: must be greater than zero"
                )
            if c.when_unsatisfiable != "DoNotSchedule":
                raise fail(
                    f"{p}.minDomains",
                    "Invalid value: can only use minDomains if whenUnsatisfiable=DoNotSchedule",
                )
        for name, policy in (
            ("nodeAffinityPolicy", c.node_affinity_policy),
            ("nodeTaintsPolicy", c.node_taints_policy),
        ):
            if policy is not None and policy not in INCLUSION_POLICIES:
                raise unsupported(f"{p}.{name}", policy, INCLUSION_POLICIES)
        validate_label_selector(c.label_selector, f"{p}.labelSelector")
        if c.match_label_keys and c.label_selector is None:
            raise fail(
                f"{p}.matchLabelKeys",
                "Forbidden: must not be specified when labelSelector is not set",
            )
        pair = (c.topology_key, c.when_unsatisfiable)
        if pair in seen:
            raise fail(
                f"{p}.{{topologyKey, whenUnsatisfiable}}",
                f'Duplicate value: "{pair[0]}, {pair[1]}"',
            )
        seen.add(pair)


def validate_pod(pod: Pod) -> None:
    spec = pod.spec
    _validate_containers(spec)
    _validate_tolerations(spec)
    _validate_spread(spec)
    if spec.affinity is not None:
        a = spec.affinity
        if a.node_affinity is not None:
            validate_node_affinity(a.node_affinity, "spec.affinity.nodeAffinity")
        if a.pod_affinity is not None:
            validate_pod_affinity(
                a.pod_affinity.required_during_scheduling_ignored_during_execution,
                a.pod_affinity.preferred_during_scheduling_ignored_during_execution,
                "spec.affinity.podAffinity",
            )
        if a.pod_anti_affinity is not None:
            validate_pod_affinity(
                a.pod_anti_affinity.required_during_scheduling_ignored_during_execution,
                a.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution,
                "spec.affinity.podAntiAffinity",
            )
    gates: set[str] = set()
    for i, gate in enumerate(spec.scheduling_gates):
        if not gate.name:
            raise fail(f"spec.schedulingGates[{i}].name", "Required value")
        if gate.name in gates:
            raise fail(f"spec.schedulingGates[{i}].name", f'Duplicate value: "{gate.name}"')
        gates.add(gate.name)
    if spec.preemption_policy not in PREEMPTION_POLICIES:
        raise unsupported("spec.preemptionPolicy", spec.preemption_policy, PREEMPTION_POLICIES)
    if spec.priority is not None and not INT32_MIN <= spec.priority <= INT32_MAX:
        raise fail("spec.priority", f"Invalid value: {spec.priority}: must be a 32-bit integer")
    if (
        spec.termination_grace_period_seconds is not None
        and spec.termination_grace_period_seconds < 0
    ):
        raise fail("spec.terminationGracePeriodSeconds", "Invalid value: must be non-negative")
    if pod.status.phase not in POD_PHASES:
        raise unsupported("status.phase", pod.status.phase, POD_PHASES[1:])


# --- other kinds ---------------------------------------------------------------------------


def validate_node(node: Node) -> None:
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(node.spec.taints):
        p = f"spec.taints[{i}]"
        if not taint.key:
            raise fail(f"{p}.key", "Required value")
        if taint.effect not in TAINT_EFFECTS:
            if not taint.effect:
                raise fail(f"{p}.effect", "Required value")
            raise unsupported(f"{p}.effect", taint.effect, TAINT_EFFECTS)
        if (taint.key, taint.effect) in seen:
            raise fail(
                f"{p}",
                "Duplicate value: taints must be unique by key and effect pair "
                f'("{taint.key}", "{taint.effect}")',
            )
        seen.add((taint.key, taint.effect))
    for i, image in enumerate(node.status.images):
        if not 0 <= image.size_bytes <= MAX_EXACT_AMOUNT:
            raise fail(
                f"status.images[{i}].sizeBytes",
                f"Invalid value: {image.size_bytes}: must be between 0 and {MAX_EXACT_AMOUNT}",
            )
    validate_resource_names(node.status.capacity, "status.capacity", node=True)
    validate_resource_names(node.status.allocatable, "status.allocatable", node=True)
    validate_labels(node.metadata.labels, "metadata.labels")


def validate_priority_class(pc: PriorityClass) -> None:
    name = pc.metadata.name
    if not INT32_MIN <= pc.value <= INT32_MAX:
        raise fail("value", f"Invalid value: {pc.value}: must be a 32-bit integer")
    if name in SYSTEM_PRIORITY_CLASSES:
        if pc.value != SYSTEM_PRIORITY_CLASSES[name]:
            raise fail(
                "value",
                f"Invalid value: {pc.value}: system class {name} "
                f"must have value {SYSTEM_PRIORITY_CLASSES[name]}",
            )
    else:
        if name.startswith("system-"):
            raise fail(
                "metadata.name",
                f'Invalid value: "{name}": priority class names with '
                "'system-' prefix are reserved for system use only",
            )
        if pc.value > HIGHEST_USER_DEFINABLE_PRIORITY:
            raise fail(
                "value",
                f"Invalid value: {pc.value}: maximum allowed value of a user defined "
                f"priority is {HIGHEST_USER_DEFINABLE_PRIORITY}",
            )
    if pc.preemption_policy not in PREEMPTION_POLICIES:
        raise unsupported("preemptionPolicy", pc.preemption_policy, PREEMPTION_POLICIES)


def _check_int_or_percent(value: int | str | None, path: str) -> None:
    if value is None:
        return
    if isinstance(value, int):
        if value < 0:
            raise fail(path, f"Invalid value: {value}: must be greater than or equal to 0")
        return
    digits = value[:-1]
    if not (value.endswith("%") and digits.isascii() and digits.isdigit()):
        raise fail(path, f"Invalid value: \"{value}\": must be an integer or percentage (e.g '5%')")
    if int(digits) > 100:
        raise fail(path, f'Invalid value: "{value}": must not be greater than 100%')


def validate_pdb(pdb: PodDisruptionBudget) -> None:
    spec = pdb.spec
    if spec.min_available is not None and spec.max_unavailable is not None:
        raise fail("spec", "Invalid value: minAvailable and maxUnavailable cannot be both set")
    _check_int_or_percent(spec.min_available, "spec.minAvailable")
    _check_int_or_percent(spec.max_unavailable, "spec.maxUnavailable")
    validate_label_selector(spec.selector, "spec.selector")
    policy = spec.unhealthy_pod_eviction_policy
    if policy is not None and policy not in UNHEALTHY_POD_EVICTION_POLICIES:
        raise unsupported(
            "spec.unhealthyPodEvictionPolicy", policy, UNHEALTHY_POD_EVICTION_POLICIES
        )


def validate_pod_group(group: PodGroup) -> None:
    if group.spec.min_member > INT32_MAX:
        raise fail(
            "spec.minMember", f"Invalid value: {group.spec.min_member}: must be a 32-bit integer"
        )
    if group.spec.min_member < 0:
        raise fail(
            "spec.minMember", f"Invalid value: {group.spec.min_member}: must be non-negative"
        )
    timeout = group.spec.schedule_timeout_seconds
    if timeout is not None and timeout <= 0:
        raise fail(
            "spec.scheduleTimeoutSeconds", f"Invalid value: {timeout}: must be greater than zero"
        )


def validate_namespace(namespace: Namespace) -> None:
    """Nothing beyond the common metadata checks."""


VALIDATORS: dict[type[Any], Callable[[Any], None]] = {
    Pod: validate_pod,
    Node: validate_node,
    PriorityClass: validate_priority_class,
    PodDisruptionBudget: validate_pdb,
    PodGroup: validate_pod_group,
    Namespace: validate_namespace,
}
