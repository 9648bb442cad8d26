"""The FieldError of a failed API-server check: `fail(path, reason)`, and upstream's
"Unsupported value" wording (`unsupported`)."""

from __future__ import annotations

from shared.models.decoding import FieldError


def fail(path: str, reason: str) -> FieldError:
    return FieldError(reason, "." + path)


def unsupported(path: str, value: str, allowed: tuple[str, ...] | frozenset[str]) -> FieldError:
    supported = ", ".join(f'"{v}"' for v in sorted(allowed))
    return fail(path, f'Unsupported value: "{value}": supported values: {supported}')
