"""Name syntax checks of k8s.io/apimachinery/pkg/util/validation, with upstream's messages."""

from __future__ import annotations

import re

_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    f"validation is '{_QUALIFIED_NAME_FMT}')"
)
_LABEL_VALUE_FMT = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_LABEL_VALUE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_NAME_MAX = 63
_SUBDOMAIN_MAX = 253


def qualified_name_errors(value: str) -> list[str]:
    """IsQualifiedName: an optional DNS subdomain prefix and '/', then a name of <= 63 chars."""
    parts = value.split("/")
    errors: list[str] = []
    if len(parts) > 2:
        return [
            f"a qualified name {_QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        ]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(f"prefix part {error}" for error in dns1123_subdomain_errors(prefix))
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > _NAME_MAX:
        errors.append(f"name part must be no more than {_NAME_MAX} characters")
    if not _QUALIFIED_NAME.match(name):
        errors.append(f"name part {_QUALIFIED_NAME_MSG}")
    return errors


def dns1123_subdomain_errors(value: str) -> list[str]:
    errors: list[str] = []
    if len(value) > _SUBDOMAIN_MAX:
        errors.append(f"must be no more than {_SUBDOMAIN_MAX} characters")
    if not _DNS1123_SUBDOMAIN.match(value):
        errors.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character (e.g. "
            f"'example.com', regex used for validation is '{_DNS1123_SUBDOMAIN_FMT}')"
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    """IsValidLabelValue: empty, or <= 63 chars of [-A-Za-z0-9_.] starting and ending alnum."""
    errors: list[str] = []
    if len(value) > _NAME_MAX:
        errors.append(f"must be no more than {_NAME_MAX} characters")
    if not _LABEL_VALUE.match(value):
        errors.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  "
            f"or 'my_value',  or '12345', regex used for validation is '{_LABEL_VALUE_FMT}')"
        )
    return errors


def is_extended_resource_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName: prefixed, outside kubernetes.io, and quota-nameable."""
    native = "/" not in name or "kubernetes.io/" in name
    if native or name.startswith("requests."):
        return False
    return not qualified_name_errors(f"requests.{name}")
