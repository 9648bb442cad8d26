"""The Kubernetes API as berth uses it: list, watch, bind, evict, status, events, leases.

Built on lightkube (asyncio, httpx). Every resource is a lightkube *generic* resource, so
objects arrive as the plain dicts the API served (msgspec-decoded, no model classes built and
thrown away) and go straight into berth's own strict decoder (`shared.models` in API mode).
lightkube's typed resource modules are never imported: they would register typed models
under the same names and turn the dicts into structs.

Every method raises `KubeApiError` (status code, reason, message) for an API answer other
than success, and `KubeUnavailableError` when the server cannot be reached; callers decide
what a 409, 410 or 429 means to them.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
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
from lightkube.types import PatchType, on_error_raise


@dataclass(frozen=True)
class Kind:
    """One watched kind: berth's kind name, its apiVersion and the lightkube resource."""

    kind: str
    api_version: str
    resource: Any
    namespaced: bool


_LISTED: list[tuple[str, str]] = []


def _kind(group: str, version: str, kind: str, plural: str, namespaced: bool) -> Kind:
    _LISTED.append((group, plural))
    make = create_namespaced_resource if namespaced else create_global_resource
    api_version = f"{group}/{version}" if group else version
    return Kind(kind, api_version, make(group, version, kind, plural), namespaced)


WATCHED: dict[str, Kind] = {
    k.kind: k
    for k in (
        _kind("", "v1", "Node", "nodes", False),
        _kind("", "v1", "Pod", "pods", True),
        _kind("", "v1", "Namespace", "namespaces", False),
        _kind("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False),
        _kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True),
        _kind("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups", True),
    )
}
"""The kinds the adapter lists and watches into the store, by berth kind name."""

API_CALLS: frozenset[tuple[str, str, str]] = frozenset(
    {(group, plural, verb) for group, plural in _LISTED for verb in ("list", "watch")}
    | {
        ("", "pods/binding", "create"),
        ("", "pods/eviction", "create"),
        ("", "pods/status", "patch"),
        ("", "events", "create"),
        ("coordination.k8s.io", "leases", "create"),
        ("coordination.k8s.io", "leases", "get"),
        ("coordination.k8s.io", "leases", "update"),
    }
)
"""Every (apiGroup, resource, verb) berth calls, and nothing else: the Helm chart's RBAC
grants exactly these (tests/deploy), and the Kubernetes-mode tests check that the emulator
saw no other call."""

_POD = WATCHED["Pod"].resource
_EVENT = create_namespaced_resource("", "v1", "Event", "events")
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
    """The API server answered with a failure Status."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


class KubeUnavailableError(ConnectionError):
    """The API server could not be reached (connection refused, reset, timed out): an
    outage (shared.retry), retried."""


def _translate(exc: BaseException) -> Exception:
    if isinstance(exc, ApiError):
        st = exc.status
        return KubeApiError(int(st.code or 0), str(st.reason or ""), str(st.message or ""))
    if isinstance(exc, httpx.HTTPStatusError):  # an answer that is not a Status (a proxy's)
        response = exc.response
        return KubeApiError(response.status_code, response.reason_phrase, response.text[:300])
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


class KubeApi:
    """The calls berth makes, with lightkube's errors turned into KubeApiError."""

    def __init__(self, config: KubeConfig, *, field_manager: str = "berth") -> None:
        self.client = AsyncClient(config, field_manager=field_manager, timeout=httpx.Timeout(30.0))

    async def close(self) -> None:
        await self.client.close()

    # ------------------------------------------------------------ reading
    async def list(self, kind: str) -> tuple[list[dict[str, Any]], str]:
        """Every object of `kind` (all namespaces) and the list's resourceVersion."""
        k = WATCHED[kind]
        items: list[dict[str, Any]] = []
        try:
            listing = self.client.list(k.resource, namespace=ALL_NS if k.namespaced else None)
            async for obj in listing:
                items.append(self._typed(k, obj))
            version = str(listing.resourceVersion)
        except (ApiError, httpx.HTTPError, OSError) as e:
            raise _translate(e) from e
        return items, version

    async def watch(
        self, kind: str, resource_version: str, *, timeout_seconds: int = 300
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Events after `resource_version`, BOOKMARKs included, until the server ends the
        stream. A 410 (history compacted) arrives as KubeApiError(410)."""
        k = WATCHED[kind]
        # lightkube's public watch() has no allowWatchBookmarks; its request builder does.
        request = self.client._client.prepare_request(
            "list",
            res=k.resource,
            namespace=ALL_NS if k.namespaced else None,
            watch=True,
            params={
                "resourceVersion": resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": timeout_seconds,
            },
        )
        stream = self.client._client.watch(request, on_error=on_error_raise)
        try:
            async for event_type, obj in stream:
                yield str(event_type), self._typed(k, obj)
        except (ApiError, httpx.HTTPError, OSError) as e:
            raise _translate(e) from e

    @staticmethod
    def _typed(k: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The object as a manifest: list items and some watch events lack kind/apiVersion."""
        body = dict(obj)
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

    async def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """A strategic merge patch of pods/{name}/status (conditions merge by type)."""
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

    @staticmethod
    async def _call(awaitable: Any) -> Any:
        try:
            return await awaitable
        except (ApiError, httpx.HTTPError, OSError) as e:
            raise _translate(e) from e
