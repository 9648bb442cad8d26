"""How the Kubernetes API's failures reach berth: KubeApiError (an answer: code, reason,
message, Retry-After) and KubeUnavailableError (no answer: an outage), from a Status, an
error response, or lightkube's and httpx's exceptions."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

import httpx2 as httpx
from lightkube import ApiError


class KubeApiError(Exception):
    """The API server answered with a failure Status. `retry_after` is the server's
    Retry-After (header, or the Status's details.retryAfterSeconds) in seconds, if any."""

    def __init__(
        self, code: int, reason: str, message: str, retry_after: float | None = None
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.retry_after = retry_after


class KubeUnavailableError(ConnectionError):
    """The API server could not be reached (connection refused, reset, timed out, or a
    watch that went silent for longer than its read timeout): an outage (shared.runtime.retry),
    retried."""


def retry_after(header: str | None, details: Any = None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds; HTTP dates are not sent by the API
    server) or from a Status's details.retryAfterSeconds."""
    if header:
        try:
            return max(0.0, float(header))
        except ValueError:
            pass
    seconds = details.get("retryAfterSeconds") if isinstance(details, dict) else None
    if isinstance(seconds, int | float) and seconds > 0:
        return float(seconds)
    return None


def error_from_status(status: Mapping[str, Any], header: str | None = None) -> KubeApiError:
    """A KubeApiError from a Status object (a watch ERROR event's, or an error body)."""
    return KubeApiError(
        int(status.get("code") or 0),
        str(status.get("reason") or ""),
        str(status.get("message") or ""),
        retry_after(header, status.get("details")),
    )


def error_from_response(response: httpx.Response) -> KubeApiError:
    """A KubeApiError from a read error response: its Status when it has one, else (a
    proxy's or load balancer's answer) the status line and the start of the body."""
    header = response.headers.get("Retry-After")
    try:
        body = json.loads(response.content)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        error = error_from_status(body, header)
        error.code = error.code or response.status_code
        return error
    text = response.content[:300].decode("utf-8", "replace")
    return KubeApiError(response.status_code, response.reason_phrase, text, retry_after(header))


def translate(exc: BaseException) -> Exception:
    if isinstance(exc, ApiError):
        st = exc.status
        header = None
        with contextlib.suppress(Exception):
            header = exc.response.headers.get("Retry-After")
        details = st.details.to_dict() if st.details is not None else None
        return KubeApiError(
            int(st.code or 0),
            str(st.reason or ""),
            str(st.message or ""),
            retry_after(header, details),
        )
    if isinstance(exc, httpx.HTTPStatusError):  # an answer that is not a Status (a proxy's)
        response = exc.response
        try:
            text = response.text[:300]
        except httpx.ResponseNotRead:  # a streamed answer nobody read
            text = ""
        return KubeApiError(
            response.status_code,
            response.reason_phrase,
            text,
            retry_after(response.headers.get("Retry-After")),
        )
    return KubeUnavailableError(f"{type(exc).__name__}: {exc}")
