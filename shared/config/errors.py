"""Errors raised while loading a KubeSchedulerConfiguration or expanding its profiles.

    ConfigError                 a profile cannot be built from the config (expand_plugins)
    └── InvalidConfigError      the file does not decode or fails validation (load_config);
                                `errors` lists every problem, each naming its field path

Field problems are worded like upstream `field.Error`s
("profiles[0].parallelism: Invalid value: 0: should be ...") so they can be compared with
kube-scheduler's own messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

KIND = "KubeSchedulerConfiguration"


class ConfigError(ValueError):
    """The scheduler configuration cannot be used."""


class InvalidConfigError(ConfigError):
    """A KubeSchedulerConfiguration that cannot be decoded or fails validation."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors: tuple[str, ...] = tuple(errors)
        super().__init__("\n".join(f"{KIND}: {error}" for error in self.errors))


def show(value: object) -> str:
    """A value the way Go's field errors print it: strings quoted, booleans lowercase."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(show(item) for item in value) + "]"
    return str(value)


def invalid(path: str, value: object, detail: str) -> str:
    return f"{path}: Invalid value: {show(value)}: {detail}"


def required(path: str, detail: str = "") -> str:
    return f"{path}: Required value" + (f": {detail}" if detail else "")


def forbidden(path: str, detail: str) -> str:
    return f"{path}: Forbidden: {detail}"


def duplicate(path: str, value: object) -> str:
    return f"{path}: Duplicate value: {show(value)}"


def not_supported(path: str, value: object, supported: Iterable[str]) -> str:
    choices = ", ".join(f'"{choice}"' for choice in supported)
    return f"{path}: Unsupported value: {show(value)}: supported values: {choices}"
