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

import json
from collections.abc import AsyncIterator, Mapping
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

from shared.kube.connection import ClientSettings, TokenBucket, load_config
from shared.kube.errors import (
    KubeApiError,
    KubeUnavailableError,
    error_from_response,
    error_from_status,
    translate,
)
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
    "ClientSettings",
    "Kind",
    "KubeApi",
    "KubeApiError",
    "KubeUnavailableError",
    "TokenBucket",
    "error_from_response",
    "error_from_status",
    "load_config",
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


NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"
"""The field selector of pod lists and watches: finished pods hold no resources, so the
adapter never reads them (a batch cluster keeps many more finished pods than live ones)."""

FIELD_SELECTORS: dict[str, str] = {"Pod": NON_TERMINAL_PODS}


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
            raise translate(e) from e
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
            raise translate(e) from e
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
            raise translate(e) from e
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
            raise translate(e) from e
