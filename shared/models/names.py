"""Upstream's name rules (k8s.io/apimachinery/pkg/util/validation, pkg/apis/core/validation),
each returning the problem in upstream's wording, "" when the value is fine.

berth carries names in Redis keys, stream entries and Kafka messages: anything these rules let
through is safe on every path, so a name the pipeline cannot carry is refused at the door.
"""

from __future__ import annotations

import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(f"^{_LABEL}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
HUGEPAGES_PREFIX = "hugepages-"


def dns1123_label(value: str) -> str:
    if len(value) > DNS1123_LABEL_MAX:
        return f"must be no more than {DNS1123_LABEL_MAX} characters"
    if not _DNS1123_LABEL.match(value):
        return (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character"
        )
    return ""


def dns1123_subdomain(value: str) -> str:
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        return f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters"
    if not _DNS1123_SUBDOMAIN.match(value):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character"
        )
    return ""


def qualified_name(value: str) -> str:
    """IsQualifiedName: an optional DNS subdomain prefix and '/', then a name part."""
    prefix, slash, name = value.rpartition("/")
    if slash:
        if not prefix:
            return "prefix part must be non-empty"
        problem = dns1123_subdomain(prefix)
        if problem:
            return f"prefix part {problem}"
        if "/" in prefix:
            return "a qualified name must have at most one '/'"
    if not name:
        return "name part must be non-empty"
    if len(name) > QUALIFIED_NAME_MAX:
        return f"name part must be no more than {QUALIFIED_NAME_MAX} characters"
    if not _QUALIFIED_NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character"
        )
    return ""


def label_value(value: str) -> str:
    if len(value) > LABEL_VALUE_MAX:
        return f"must be no more than {LABEL_VALUE_MAX} characters"
    if not _LABEL_VALUE.match(value):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character"
        )
    return ""


def is_extended_resource(name: str) -> bool:
    """Upstream IsExtendedResourceName: a domain-prefixed name outside kubernetes.io."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def resource_name(name: str, *, node: bool = False) -> str:
    """A container request/limit (or, `node`, an allocatable/capacity) resource name:
    cpu, memory, ephemeral-storage, hugepages-<size>, (for nodes) pods, or an extended
    resource `<domain>/<name>` whose domain has a dot (example.com/foo): upstream's
    IsQualifiedName plus the documented "fully qualified, outside kubernetes.io" rule, which
    also refuses typos such as hugepages/2Mi for hugepages-2Mi."""
    if name in STANDARD_CONTAINER_RESOURCES or (node and name == "pods"):
        return ""
    if name.startswith(HUGEPAGES_PREFIX) and len(name) > len(HUGEPAGES_PREFIX):
        return ""
    if "/" not in name:
        return "must be a standard resource name or fully qualified (example.com/name)"
    problem = qualified_name(name)
    if problem:
        return problem
    domain = name.split("/", 1)[0]
    if "." not in domain:
        return "an extended resource's prefix must be a domain name (example.com/name)"
    if not is_extended_resource(name):
        return "must be a standard resource name or an extended resource outside kubernetes.io"
    return ""
