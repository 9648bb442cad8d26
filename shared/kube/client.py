"""The Kubernetes API as berth uses it: list, watch, bind, evict, status, events, leases.

Built on lightkube (asyncio, httpx). Every resource is a lightkube *generic* resource, so
objects arrive as the plain dicts the API served (msgspec-decoded, no model classes built and
thrown away) and go straight into berth's own strict decoder (`shared.models` in API mode).
lightkube's typed resource modules are never imported: they would register typed models
under the same names and turn the dicts into structs.

Every method raises `KubeApiError` (status code, reason, message, Retry-After) for an API
answer other than success, and `KubeUnavailableError` when the server cannot be reached or
a watch goes silent; callers decide what a 409, 410 or 429 means to them. Every request
waits for the client-side rate limiter (`ClientSettings`: clientConnection's qps/burst).
Lists and watches are built here on lightkube's request builder and its httpx client (not
its list/watch helpers): paginated lists served from the watch cache with a field selector,
and watch errors read in full (a streamed error answer is never left unread).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
from lightkube import ALL_NS, ApiError, AsyncClient, KubeConfig
from lightkube.core import resource as res
from lightkube.generic_resource import (
    GenericNamespacedStatus,
    create_global_resource,
    create_namespaced_resource,
)
from lightkube.types import PatchType

from shared.kube.kinds import (
    ADAPTER_CALLS,
    API_CALLS,
    BINDER_CALLS,
    DASHBOARD_CALLS,
    WATCHED,
    Kind,
)
from shared.models.kueue_versions import as_berth

__all__ = [
    "ADAPTER_CALLS",
    "API_CALLS",
    "BINDER_CALLS",
    "DASHBOARD_CALLS",
    "WATCHED",
    "Kind",
    "KubeApi",
    "KubeApiError",
    "KubeUnavailableError",
]


Listed = tuple[list[dict[str, Any]], str]
"""A list's items and its resourceVersion."""

_POD = WATCHED["Pod"].resource
_EVENT = create_namespaced_resource("", "v1", "Event", "events")
_EVENT_V1 = create_namespaced_resource("events.k8s.io", "v1", "Event", "events")
_TOKEN_REVIEW = create_global_resource("authentication.k8s.io", "v1", "TokenReview", "tokenreviews")
_ACCESS_REVIEW = create_global_resource(
    "authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews"
)
LEASE = create_namespaced_resource("coordination.k8s.io", "v1", "Lease", "leases")


class _PodBinding(GenericNamespacedStatus):
    _api_info = res.ApiInfo(
        resource=res.ResourceDef("", "v1", "Binding"),
        parent=res.ResourceDef("", "v1", "Pod"),
        plural="pods",
        verbs=["post"],
        action="binding",
    )


class _PodEviction(GenericNamespacedStatus):
    _api_info = res.ApiInfo(
        resource=res.ResourceDef("policy", "v1", "Eviction"),
        parent=res.ResourceDef("", "v1", "Pod"),
        plural="pods",
        verbs=["post"],
        action="eviction",
    )


def _make(resource: Any, body: dict[str, Any]) -> Any:
    """A generic resource object holding `body` (they are dicts; lightkube's stubs only
    declare the keyword constructor)."""
    return resource(body)


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
    watch that went silent for longer than its read timeout): an outage (shared.retry),
    retried."""


def _retry_after(header: str | None, details: Any = None) -> float | None:
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
        _retry_after(header, status.get("details")),
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
    return KubeApiError(response.status_code, response.reason_phrase, text, _retry_after(header))


def _translate(exc: BaseException) -> Exception:
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
            _retry_after(header, details),
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
            _retry_after(response.headers.get("Retry-After")),
        )
    return KubeUnavailableError(f"{type(exc).__name__}: {exc}")


def load_config(kubeconfig: str | None = None, context: str | None = None) -> KubeConfig:
    """A kubeconfig file (KUBECONFIG-style path), or the pod's service account in a cluster.

    Raises ValueError naming what is missing when neither is available."""
    if kubeconfig:
        path = Path(kubeconfig).expanduser()
        if not path.is_file():
            raise ValueError(f"kubeconfig {path}: no such file")
        return KubeConfig.from_file(path)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return KubeConfig.from_service_account()
    raise ValueError(
        "no Kubernetes API: pass --kubeconfig PATH (or BERTH_KUBECONFIG), "
        "or run in a cluster (KUBERNETES_SERVICE_HOST)"
    )


NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"
"""The field selector of pod lists and watches: finished pods hold no resources, so the
adapter never reads them (a batch cluster keeps many more finished pods than live ones)."""

FIELD_SELECTORS: dict[str, str] = {"Pod": NON_TERMINAL_PODS}


@dataclass(frozen=True)
class ClientSettings:
    """How berth behaves as an API client (kube-scheduler's `clientConnection`, plus the
    timeouts it takes as flags).

    - qps/burst: client-side rate limit on requests (a token bucket, as client-go's);
      kube-scheduler's defaults, 50 and 100. qps < 0 turns the limiter off.
    - request_timeout: any request but a watch.
    - watch_read_timeout: a watch stream that sends nothing (no event, no BOOKMARK) for
      this long is dead (a connection lost behind a load balancer): dropped and resumed.
      Must exceed the server's bookmark interval (about a minute on kube-apiserver).
    - page_size: objects per list page (limit/continue).
    """

    qps: float = 50.0
    burst: int = 100
    request_timeout: float = 30.0
    watch_read_timeout: float = 90.0
    page_size: int = 500


class TokenBucket:
    """client-go's flowcontrol token bucket: `burst` tokens, refilled at `qps` a second;
    `take` waits for a token."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self.clock = clock
        self.tokens = float(self.burst)
        self.stamp = clock()
        self.waited = 0.0
        """Seconds spent waiting for tokens (a metric: how much the limit held us back)."""
        self._lock = asyncio.Lock()

    async def take(self) -> None:
        if self.qps < 0:
            return
        async with self._lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.qps)
            self.stamp = now
            self.tokens -= 1.0
            if self.tokens < 0:
                pause = -self.tokens / self.qps
                self.waited += pause
                await asyncio.sleep(pause)


class KubeApi:
    """The calls berth makes, with lightkube's errors turned into KubeApiError."""

    def __init__(
        self,
        config: KubeConfig,
        *,
        field_manager: str = "berth",
        settings: ClientSettings | None = None,
    ) -> None:
        self.settings = settings if settings is not None else ClientSettings()
        self.client = AsyncClient(
            config,
            field_manager=field_manager,
            timeout=httpx.Timeout(self.settings.request_timeout),
        )
        self.limiter = TokenBucket(self.settings.qps, self.settings.burst)
        self.requests = 0
        self.served: dict[str, int] = {}
        """Kind -> which of its versions (Kind.served) the server answered the last list in."""
        self._http: httpx.AsyncClient = self.client._client._client

    async def close(self) -> None:
        await self.client.close()

    # ------------------------------------------------------------ reading
    async def list(self, kind: str) -> tuple[list[dict[str, Any]], str]:
        """Every object of `kind` (all namespaces; pods: the non-terminal ones) and the
        list's resourceVersion.

        Served from the API server's watch cache (resourceVersion=0: etcd is not read),
        in pages of `page_size` (limit/continue). A continue token that expired
        meanwhile (410) starts the list again; after two, unpaginated. A kind served in
        several versions (shared.kube.kinds) is listed in the first one not answered 404,
        and watched in that one; 404 in all of them is raised (the CRD is not installed)."""
        k = WATCHED[kind]
        for index in range(len(k.served)):
            try:
                listed = await self._list_served(k, index)
            except KubeApiError as e:
                if e.code != 404 or index == len(k.served) - 1:
                    raise
                continue  # not served in this version: the next one
            self.served[kind] = index
            return listed
        raise AssertionError("unreachable: a kind is served in one version at least")

    async def _list_served(self, k: Kind, index: int) -> Listed:
        expired = 0
        while True:
            items: list[dict[str, Any]] = []
            token = ""
            # Continue tokens that keep expiring (a list slower than compaction): after two,
            # one unpaginated list, as client-go's pager falls back to.
            limit = self.settings.page_size if expired < 2 else 0
            try:
                while True:
                    params: dict[str, Any] = {"limit": limit} if limit else {}
                    if token:
                        params["continue"] = token
                    else:
                        params["resourceVersion"] = "0"
                    if k.kind in FIELD_SELECTORS:
                        params["fieldSelector"] = FIELD_SELECTORS[k.kind]
                    page = await self._get(k, index, params)
                    items.extend(self._typed(k, index, obj) for obj in page.get("items") or ())
                    meta = page.get("metadata") or {}
                    token = str(meta.get("continue") or "")
                    if not token:
                        return items, str(meta.get("resourceVersion") or "")
            except KubeApiError as e:
                if e.code == 410 and token:
                    expired += 1
                    continue  # the continue token expired: list again from the start
                raise

    async def _get(self, k: Kind, index: int, params: dict[str, Any]) -> dict[str, Any]:
        request = self._request(k, index, params, watch=False)
        await self.limiter.take()
        self.requests += 1
        try:
            response = await self._http.send(request)
            if response.status_code >= 400:
                raise error_from_response(response)
            body = json.loads(response.content)
        except (httpx.HTTPError, OSError) as e:
            raise _translate(e) from e
        except ValueError as e:
            raise KubeUnavailableError(f"unreadable list answer: {e}") from e
        if not isinstance(body, dict):
            raise KubeUnavailableError("unreadable list answer: not an object")
        return body

    def _request(self, k: Kind, index: int, params: dict[str, Any], *, watch: bool) -> Any:
        generic = self.client._client
        resource = k.served[index][1]
        br = generic.prepare_request(
            "list", res=resource, namespace=ALL_NS if k.namespaced else None, watch=watch
        )
        br.params.update(params)
        if watch:
            br.timeout = httpx.Timeout(
                self.settings.request_timeout, read=self.settings.watch_read_timeout
            )
        return generic.build_adapter_request(br)

    async def watch(
        self, kind: str, resource_version: str, *, timeout_seconds: int = 300
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Events after `resource_version`, BOOKMARKs included, until the server ends the
        stream.

        Every failure is a KubeApiError (an HTTP error answer, read in full, with its
        Retry-After; or an ERROR event: 410 when the history was compacted) or a
        KubeUnavailableError (connection lost, or nothing received for
        `watch_read_timeout`): never anything else, so the reflector keeps going."""
        k = WATCHED[kind]
        index = self.served.get(kind, 0)  # the version the last list was served in
        params: dict[str, Any] = {
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds,
        }
        if kind in FIELD_SELECTORS:
            params["fieldSelector"] = FIELD_SELECTORS[kind]
        request = self._request(k, index, params, watch=True)
        await self.limiter.take()
        self.requests += 1
        try:
            response = await self._http.send(request, stream=True)
        except (httpx.HTTPError, OSError) as e:
            raise _translate(e) from e
        try:
            if response.status_code >= 400:
                await response.aread()
                raise error_from_response(response)
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                except ValueError as e:
                    raise KubeUnavailableError(f"unreadable watch event: {e}") from e
                event_type = str(event.get("type") or "")
                obj = event.get("object")
                if not isinstance(obj, dict):
                    raise KubeUnavailableError(f"watch event {event_type!r} without an object")
                if event_type == "ERROR":
                    raise error_from_status(obj)
                yield event_type, self._typed(k, index, obj)
        except httpx.ReadTimeout as e:
            raise KubeUnavailableError(
                f"{kind} watch received nothing for {self.settings.watch_read_timeout:.0f}s"
            ) from e
        except (httpx.HTTPError, OSError) as e:
            raise _translate(e) from e
        finally:
            await response.aclose()

    @staticmethod
    def _typed(k: Kind, index: int, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The object as a manifest of berth's model: list items and some watch events lack
        kind/apiVersion, and a version berth does not model names some fields otherwise
        (shared.models.kueue_versions)."""
        body = as_berth(k.kind, k.served[index][0], dict(obj))
        body["kind"] = k.kind
        body["apiVersion"] = k.api_version
        return body

    # ------------------------------------------------------------ writing
    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """POST pods/{name}/binding with the pod's uid as precondition."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        await self._call(self.client.create(_make(_PodBinding, body), name, namespace=namespace))

    async def evict(self, namespace: str, name: str, uid: str) -> None:
        """POST pods/{name}/eviction (policy/v1), only for this uid."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}},
        }
        await self._call(self.client.create(_make(_PodEviction, body), name, namespace=namespace))

    async def patch_pod_status(
        self, namespace: str, name: str, patch: dict[str, Any], *, uid: str = ""
    ) -> None:
        """A strategic merge patch of pods/{name}/status (conditions merge by type). With
        `uid`, the patch carries metadata.uid: the server refuses it (409) when the name now
        belongs to another pod, as kube-scheduler's status updates do."""
        if uid:
            patch = {**patch, "metadata": {**(patch.get("metadata") or {}), "uid": uid}}
        await self._call(
            self.client.patch(
                _POD.Status,
                name,
                patch,
                namespace=namespace,
                patch_type=PatchType.STRATEGIC,
            )
        )

    async def create_event(self, event: dict[str, Any]) -> None:
        await self._call(self.client.create(_make(_EVENT, event)))

    async def create_event_v1(self, event: dict[str, Any]) -> None:
        """An events.k8s.io/v1 Event (kube-scheduler's recorder writes these)."""
        await self._call(self.client.create(_make(_EVENT_V1, event)))

    async def patch_event_v1(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """A merge patch of an events.k8s.io/v1 Event (its series)."""
        await self._call(
            self.client.patch(
                _EVENT_V1, name, patch, namespace=namespace, patch_type=PatchType.MERGE
            )
        )

    async def review_token(self, token: str) -> dict[str, Any]:
        """A TokenReview's status: {authenticated, user: {username, uid, groups}}."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        answer = await self._call(self.client.create(_make(_TOKEN_REVIEW, body)))
        return dict(dict(answer).get("status") or {})

    async def may(
        self,
        user: str,
        uid: str,
        groups: tuple[str, ...],
        verb: str,
        resource: str,
        namespace: str,
        group: str = "",
    ) -> bool:
        """A SubjectAccessReview: may `user` `verb` `resource` in `namespace` ("": all)?"""
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "uid": uid,
                "groups": list(groups),
                "resourceAttributes": {
                    "group": group,
                    "resource": resource,
                    "verb": verb,
                    "namespace": namespace,
                },
            },
        }
        answer = await self._call(self.client.create(_make(_ACCESS_REVIEW, body)))
        return bool((dict(answer).get("status") or {}).get("allowed"))

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return dict(await self._call(self.client.get(LEASE, name, namespace=namespace)))
        except KubeApiError as e:
            if e.code == 404:
                return None
            raise

    async def create_lease(self, lease: dict[str, Any]) -> dict[str, Any]:
        return dict(await self._call(self.client.create(_make(LEASE, lease))))

    async def replace_lease(self, lease: dict[str, Any]) -> dict[str, Any]:
        """PUT with metadata.resourceVersion: 409 when someone else wrote it first."""
        return dict(await self._call(self.client.replace(_make(LEASE, lease))))

    async def _call(self, awaitable: Any) -> Any:
        try:
            await self.limiter.take()
        except BaseException:
            awaitable.close()  # never started
            raise
        self.requests += 1
        try:
            return await awaitable
        except (ApiError, httpx.HTTPError, OSError) as e:
            raise _translate(e) from e
