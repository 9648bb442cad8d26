"""API-server style defaulting and validation of Services and pod controllers (upstream
pkg/apis/core/validation ValidateService / ValidateReplicationController and
pkg/apis/apps/validation ValidateReplicaSet / ValidateStatefulSet, trimmed to the fields
berth models).

One deliberate difference: upstream requires ``spec.template`` of a controller (and then
validates it as a pod); berth makes it optional and, when it is there, checks only what
the scheduler depends on: its ``metadata.labels`` are a string map that the selector
matches.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from shared.models.decoding import type_name
from shared.models.field_checks import fail
from shared.models.selector_validation import validate_label_selector
from shared.models.selectors import LabelSelector
from shared.models.validation import PROTOCOLS
from shared.models.workloads import (
    CLUSTER_IP_NONE,
    SERVICE_TYPES,
    PodTemplate,
    ReplicaSet,
    ReplicationController,
    Service,
    StatefulSet,
)

TEMPLATE_LABELS = "spec.template.metadata.labels"
# IANA_SVC_NAME (a named targetPort): at most 15 of [a-z0-9-], a letter, no "--" or edge "-".
_PORT_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$")


def _supported(path: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        supported = ", ".join(f'"{v}"' for v in sorted(allowed))
        raise fail(path, f'Unsupported value: "{value}": supported values: {supported}')


def _port_in_range(value: int, path: str) -> None:
    if not 1 <= value <= 65535:
        raise fail(path, f"Invalid value: {value}: must be between 1 and 65535, inclusive")


def _check_replicas(replicas: int) -> None:
    if replicas < 0:
        raise fail(
            "spec.replicas", f"Invalid value: {replicas}: must be greater than or equal to 0"
        )


def template_labels(template: PodTemplate) -> dict[str, str]:
    """metadata.labels of a pod template ({} when absent); FieldError when not a string map."""
    meta = template.get("metadata")
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise fail("spec.template.metadata", f"expected object, got {type_name(meta)}")
    labels = meta.get("labels")
    if labels is None:
        return {}
    if not isinstance(labels, dict):
        raise fail(TEMPLATE_LABELS, f"expected object, got {type_name(labels)}")
    for key, value in labels.items():
        if not isinstance(value, str):
            raise fail(f"{TEMPLATE_LABELS}.{key}", f"expected string, got {type_name(value)}")
    return dict(labels)


def _check_template(template: PodTemplate, matches: Callable[[Mapping[str, str]], bool]) -> None:
    """Upstream ValidatePodTemplateSpecFor*: the selector must select the template's pods."""
    if not template:  # optional in berth, see the module docstring
        return
    labels = template_labels(template)
    if not matches(labels):
        raise fail(
            TEMPLATE_LABELS,
            f"Invalid value: {json.dumps(labels, sort_keys=True)}: "
            "`selector` does not match template `labels`",
        )


# --- Service -------------------------------------------------------------------------------


def default_service(service: Service) -> None:
    """SetDefaults_Service: a port's targetPort defaults to its port."""
    for port in service.spec.ports:
        if port.target_port in (0, ""):
            port.target_port = port.port


def _validate_target_port(value: int | str, path: str) -> None:
    if isinstance(value, int):
        _port_in_range(value, path)
    elif not _PORT_NAME.match(value) or "--" in value or value.isdigit():
        raise fail(
            path,
            f'Invalid value: "{value}": must be a port number or a port name (at most 15 '
            "lowercase letters, digits and '-', with a letter, not starting or ending in '-')",
        )


def validate_service(service: Service) -> None:
    spec = service.spec
    _supported("spec.type", spec.type, SERVICE_TYPES)
    for key in spec.selector:
        if not key:
            raise fail("spec.selector", "label key must not be empty")
    ip = spec.cluster_ip
    if ip not in ("", CLUSTER_IP_NONE):
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise fail(
                "spec.clusterIP",
                f"Invalid value: \"{ip}\": must be empty, 'None', or a valid IP address",
            ) from None
    if ip == CLUSTER_IP_NONE and spec.type in ("NodePort", "LoadBalancer"):
        raise fail(
            "spec.clusterIP",
            f"Invalid value: \"None\": may not be set to 'None' for {spec.type} services",
        )
    headless = ip == CLUSTER_IP_NONE
    if not spec.ports and not headless and spec.type != "ExternalName":
        raise fail("spec.ports", "Required value")
    names: set[str] = set()
    ports: set[tuple[int, str]] = set()
    for i, port in enumerate(spec.ports):
        p = f"spec.ports[{i}]"
        if len(spec.ports) > 1 and not port.name:
            raise fail(f"{p}.name", "Required value")
        if port.name in names:
            raise fail(f"{p}.name", f'Duplicate value: "{port.name}"')
        names.add(port.name)
        _port_in_range(port.port, f"{p}.port")
        _supported(f"{p}.protocol", port.protocol, PROTOCOLS)
        _validate_target_port(port.target_port, f"{p}.targetPort")
        if port.node_port:
            if spec.type in ("ClusterIP", "ExternalName"):
                raise fail(
                    f"{p}.nodePort", f"Forbidden: may not be used when `type` is '{spec.type}'"
                )
            _port_in_range(port.node_port, f"{p}.nodePort")
        if (port.port, port.protocol) in ports:
            raise fail(p, f'Duplicate value: "{port.port}/{port.protocol}"')
        ports.add((port.port, port.protocol))


# --- controllers ---------------------------------------------------------------------------


def default_replication_controller(rc: ReplicationController) -> None:
    """SetDefaults_ReplicationController: the selector, and the controller's own labels when
    it has none, default to the template's labels."""
    labels = template_labels(rc.spec.template)
    if labels:
        if not rc.spec.selector:
            rc.spec.selector = dict(labels)
        if not rc.metadata.labels:
            rc.metadata.labels = dict(labels)


def validate_replication_controller(rc: ReplicationController) -> None:
    spec = rc.spec
    if not spec.selector:
        raise fail("spec.selector", "Required value")
    for key in spec.selector:
        if not key:
            raise fail("spec.selector", "label key must not be empty")
    _check_replicas(spec.replicas)
    selector = spec.selector
    _check_template(
        spec.template, lambda labels: all(labels.get(k) == v for k, v in selector.items())
    )


def _validate_set_selector(selector: LabelSelector | None, kind: str) -> LabelSelector:
    if selector is None:
        raise fail("spec.selector", "Required value")
    validate_label_selector(selector, "spec.selector")
    if selector.is_empty():
        # Upstream's wording, "deployment" for a ReplicaSet included.
        raise fail("spec.selector", f"Invalid value: empty selector is invalid for {kind}")
    return selector


def validate_replica_set(rs: ReplicaSet) -> None:
    _check_replicas(rs.spec.replicas)
    selector = _validate_set_selector(rs.spec.selector, "deployment")
    _check_template(rs.spec.template, selector.matches)


def validate_stateful_set(ss: StatefulSet) -> None:
    _check_replicas(ss.spec.replicas)
    selector = _validate_set_selector(ss.spec.selector, "statefulset")
    _check_template(ss.spec.template, selector.matches)


WORKLOAD_DEFAULTERS: dict[type[Any], Callable[[Any], None]] = {
    Service: default_service,
    ReplicationController: default_replication_controller,
}
WORKLOAD_VALIDATORS: dict[type[Any], Callable[[Any], None]] = {
    Service: validate_service,
    ReplicationController: validate_replication_controller,
    ReplicaSet: validate_replica_set,
    StatefulSet: validate_stateful_set,
}
