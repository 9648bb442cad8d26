"""The API server's validation of the fields berth stores but does not schedule by, applied to a
user's write (shared.models.admission), after the decoding checks every manifest gets
(shared.models.validation). Each rule follows upstream pkg/apis/core/validation (ValidatePod,
ValidateObjectMeta, ValidateNode) and words its error the same way: the field's path, then
the reason.

A cluster dump read by `berth schedule` is not held to these: its objects passed a real API
server already, and berth must not refuse a cluster it is asked to plan.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from shared.models.names import dns1123_label, is_extended_resource, label_value, qualified_name
from shared.models.node import Node
from shared.models.pod import Container, Pod
from shared.models.schema import KubeObject
from shared.models.selectors import LabelSelector
from shared.models.taints import Taint, Toleration

HUGEPAGES = "hugepages-"
RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
_IMAGE_SPACE = re.compile(r"\s")


def first_problem(obj: KubeObject) -> str:
    """'path: reason' of the first rule `obj` breaks ("" when it breaks none)."""
    for problem in problems(obj):
        return problem
    return ""


def problems(obj: KubeObject) -> Iterator[str]:
    yield from _metadata(obj)
    if isinstance(obj, Pod):
        yield from _pod(obj)
    elif isinstance(obj, Node):
        for i, taint in enumerate(obj.spec.taints):
            yield from _taint(taint, f"spec.taints[{i}]")


def _metadata(obj: KubeObject) -> Iterator[str]:
    meta = obj.metadata
    for key in meta.annotations:
        why = qualified_name(key)
        if why:
            yield f'metadata.annotations: Invalid value: "{key}": {why}'
    for i, ref in enumerate(meta.owner_references):
        path = f"metadata.ownerReferences[{i}]"
        for field, value in (
            ("apiVersion", ref.api_version),
            ("kind", ref.kind),
            ("name", ref.name),
        ):
            if not value:
                yield f'{path}.{field}: Invalid value: "": {field} must not be empty'
        if not ref.uid:
            yield f'{path}.uid: Invalid value: "": uid must not be empty'


def _pod(pod: Pod) -> Iterator[str]:
    spec = pod.spec
    for path, value, supported in (
        ("spec.restartPolicy", spec.restart_policy, RESTART_POLICIES),
        ("spec.dnsPolicy", spec.dns_policy, DNS_POLICIES),
    ):
        if value and value not in supported:
            listed = ", ".join(f'"{v}"' for v in supported)
            yield f'{path}: Unsupported value: "{value}": supported values: {listed}'
    host_ports: dict[str, str] = {}
    groups = (("spec.initContainers", spec.init_containers), ("spec.containers", spec.containers))
    for group, containers in groups:
        for i, container in enumerate(containers):
            path = f"{group}[{i}]"
            yield from _container(container, path, spec.host_network, host_ports)
    for key, value in spec.node_selector.items():
        yield from _label("spec.nodeSelector", key, value)
    for i, toleration in enumerate(spec.tolerations):
        yield from _toleration(toleration, f"spec.tolerations[{i}]")
    for i, constraint in enumerate(spec.topology_spread_constraints):
        yield from _selector(constraint.label_selector, f"spec.topologySpreadConstraints[{i}]")


def _container(
    container: Container, path: str, host_network: bool, host_ports: dict[str, str]
) -> Iterator[str]:
    why = dns1123_label(container.name)
    if container.name and why:
        yield f'{path}.name: Invalid value: "{container.name}": {why}'
    if not container.image:
        yield f"{path}.image: Required value"
    elif container.image != container.image.strip() or _IMAGE_SPACE.search(container.image):
        yield f"{path}.image: Invalid value: {container.image!r}: must not have spaces"
    for i, port in enumerate(container.ports):
        where = f"{path}.ports[{i}].hostPort"
        if host_network and port.host_port and port.host_port != port.container_port:
            yield (
                f"{where}: Invalid value: {port.host_port}: must match `containerPort` when "
                "`hostNetwork` is true"
            )
        if port.host_port:
            key = f"{port.protocol}/{port.host_ip}/{port.host_port}"
            if key in host_ports:
                yield f'{where}: Duplicate value: "{key}"'
            host_ports[key] = where
    resources = container.resources
    for name in sorted(set(resources.requests) | set(resources.limits)):
        if not (is_extended_resource(name) or name.startswith(HUGEPAGES)):
            continue
        request, limit = resources.requests.get(name), resources.limits.get(name)
        if limit is None:
            yield (
                f"{path}.resources.limits: Required value: Limit must be set for non "
                f"overcommitable resources ({name})"
            )
        elif request is not None and request != limit:
            yield (
                f"{path}.resources.requests[{name}]: Invalid value: {request}: must be equal "
                f"to {name} limit of {limit}"
            )
    uses_hugepages = any(n.startswith(HUGEPAGES) for n in (*resources.requests, *resources.limits))
    if uses_hugepages and not any(
        n in ("cpu", "memory") for n in (*resources.requests, *resources.limits)
    ):
        yield f"{path}.resources: Forbidden: HugePages require cpu or memory"


def _label(path: str, key: str, value: str) -> Iterator[str]:
    why = qualified_name(key)
    if why:
        yield f'{path}: Invalid value: "{key}": {why}'
    why = label_value(value)
    if why:
        yield f'{path}: Invalid value: "{value}": {why}'


def _toleration(toleration: Toleration, path: str) -> Iterator[str]:
    if toleration.key:
        why = qualified_name(toleration.key)
        if why:
            yield f'{path}.key: Invalid value: "{toleration.key}": {why}'
    if toleration.value:
        why = label_value(toleration.value)
        if why:
            yield f'{path}.value: Invalid value: "{toleration.value}": {why}'


def _taint(taint: Taint, path: str) -> Iterator[str]:
    why = qualified_name(taint.key)
    if why:
        yield f'{path}.key: Invalid value: "{taint.key}": {why}'
    why = label_value(taint.value)
    if taint.value and why:
        yield f'{path}.value: Invalid value: "{taint.value}": {why}'


def _selector(selector: LabelSelector | None, path: str) -> Iterator[str]:
    if selector is None:
        return
    for key, value in selector.match_labels.items():
        yield from _label(f"{path}.labelSelector.matchLabels", key, value)
    for i, requirement in enumerate(selector.match_expressions):
        where = f"{path}.labelSelector.matchExpressions[{i}]"
        why = qualified_name(requirement.key)
        if why:
            yield f'{where}.key: Invalid value: "{requirement.key}": {why}'
        for value in requirement.values:
            why = label_value(value)
            if why:
                yield f'{where}.values: Invalid value: "{value}": {why}'
