"""A stateful Kubernetes API emulator for the adapter's tests: kmock, extended.

No kube-apiserver can be installed on these machines, so the adapter is tested against kmock
(a maintained Kubernetes API mock server, aiohttp-based). kmock's own stateful mode keeps
objects but lacks what a scheduler depends on; this class keeps kmock's HTTP server, request
parsing, discovery (/api, /apis, /api/v1 ...) and Status errors, and serves the resources
itself with the API server's semantics:

- one resourceVersion counter over every write; lists carry the collection's resourceVersion;
- watches start after a resourceVersion and replay the history since then; a resourceVersion
  older than the compacted history gets the ERROR event with a 410 Status, like the real
  server; `allowWatchBookmarks` gets BOOKMARK events; `timeoutSeconds` ends the stream;
- PUT with metadata.resourceVersion is a compare-and-swap (409 Conflict), as Leases need;
- PATCH (merge patch; `status.conditions` merged by type, as the strategic patch does);
- `pods/binding` (409 when the pod is already assigned or its uid differs) and
  `pods/eviction` (deletes the pod, or 429 while `refuse_evictions` names it);
- `fail_next(method, plural, status)` makes the next matching request fail (API errors);
- `unserved` plurals are answered 404, as for a CRD that is not installed.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp.web
import attrs
import kmock

Key = tuple[str, str, str]  # (plural, namespace, name)

RESOURCES: dict[str, tuple[str, str, str, bool]] = {
    # plural: (group/version, kind, apiVersion, namespaced)
    "pods": ("v1", "Pod", "v1", True),
    "nodes": ("v1", "Node", "v1", False),
    "namespaces": ("v1", "Namespace", "v1", False),
    "events": ("v1", "Event", "v1", True),
    "priorityclasses": (
        "scheduling.k8s.io/v1",
        "PriorityClass",
        "scheduling.k8s.io/v1",
        False,
    ),
    "poddisruptionbudgets": ("policy/v1", "PodDisruptionBudget", "policy/v1", True),
    "podgroups": (
        "scheduling.x-k8s.io/v1alpha1",
        "PodGroup",
        "scheduling.x-k8s.io/v1alpha1",
        True,
    ),
    "leases": ("coordination.k8s.io/v1", "Lease", "coordination.k8s.io/v1", True),
}


@dataclass
class Failure:
    method: str
    plural: str
    status: int
    count: int = 1


@dataclass
class Watcher:
    plural: str
    namespace: str | None
    queue: asyncio.Queue[dict[str, Any] | None] = field(default_factory=asyncio.Queue)


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure" if code >= 300 else "Success",
        "code": code,
        "reason": reason,
        "message": message,
    }


def merge(target: dict[str, Any], patch: dict[str, Any], path: str = "") -> None:
    """JSON merge patch (RFC 7386), with status.conditions merged by type."""
    for key, value in patch.items():
        here = f"{path}.{key}"
        if value is None:
            target.pop(key, None)
        elif here == ".status.conditions" and isinstance(value, list):
            old = {c.get("type"): c for c in target.get(key) or []}
            for cond in value:
                old[cond.get("type")] = {**old.get(cond.get("type"), {}), **cond}
            target[key] = list(old.values())
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value, here)
        else:
            target[key] = copy.deepcopy(value)


def parse_path(path: str) -> tuple[str, str | None, str | None, str] | None:
    """(plural, namespace, name, subresource) of a resource path, None for anything else."""
    parts = path.strip("/").split("/")
    if parts[:2] == ["api", "v1"]:
        rest = parts[2:]
    elif parts[0] == "apis" and len(parts) >= 3:
        rest = parts[3:]
    else:
        return None
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or rest[0] not in RESOURCES:
        return None
    name = rest[1] if len(rest) > 1 else None
    return rest[0], namespace, name, "/".join(rest[2:])


VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def rbac_call(
    method: str, plural: str, name: str | None, sub: str, params: Mapping[str, str]
) -> tuple[str, str, str]:
    if method == "GET":
        verb = "watch" if params.get("watch") in ("true", "1") else "get" if name else "list"
    else:
        verb = VERBS.get(method, method.lower())
    group = RESOURCES[plural][0].rpartition("/")[0]
    return group, f"{plural}/{sub}" if sub else plural, verb


def selected(obj: dict[str, Any], field_selector: str) -> bool:
    """Equality field selectors ("involvedObject.name=x,type!=Normal"), as kubectl sends."""
    for term in filter(None, field_selector.split(",")):
        negate = "!=" in term
        path, _, want = term.replace("!=", "=").replace("==", "=").partition("=")
        value: Any = obj
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if (str(value if value is not None else "") == want) == negate:
            return False
    return True


@attrs.define(kw_only=True)
class ApiEmulator(kmock.KubernetesScaffold):
    history_limit: int = 10_000
    bookmark_interval: float = 0.5
    objects: dict[Key, dict[str, Any]] = attrs.field(factory=dict, init=False)
    rv: int = attrs.field(default=100, init=False)
    history: deque[tuple[int, str, dict[str, Any]]] = attrs.field(factory=deque, init=False)
    compacted: int = attrs.field(default=100, init=False)
    watchers: list[Watcher] = attrs.field(factory=list, init=False)
    failures: list[Failure] = attrs.field(factory=list, init=False)
    refuse_evictions: set[str] = attrs.field(factory=set, init=False)
    unserved: set[str] = attrs.field(factory=set, init=False)
    """Plurals answered 404 "could not find the requested resource" (a CRD not installed)."""
    calls: list[tuple[str, str, str]] = attrs.field(factory=list, init=False)
    """Every resource request as RBAC sees it: (apiGroup, resource[/subresource], verb)."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for plural, (gv, kind, _, namespaced) in RESOURCES.items():
            subresources = ["binding", "eviction", "status"] if plural == "pods" else []
            self.resources[f"{gv}/{plural}"] = kmock.ResourceInfo(
                kind=kind,
                namespaced=namespaced,
                verbs=["get", "list", "watch", "create", "update", "patch", "delete"],
                subresources=subresources,
            )

    # ------------------------------------------------------------ test-side helpers
    def upsert(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object directly (as another client would)."""
        plural = next(p for p, spec in RESOURCES.items() if spec[1] == obj["kind"])
        meta = obj.setdefault("metadata", {})
        namespaced = RESOURCES[plural][3]
        key = (plural, meta.get("namespace", "default") if namespaced else "", meta["name"])
        if namespaced:
            meta.setdefault("namespace", "default")
        old = self.objects.get(key)
        if old is None:
            return self._create(key, obj)
        meta["uid"] = old["metadata"]["uid"]
        return self._write(key, obj, "MODIFIED")

    def drop(self, plural: str, namespace: str, name: str) -> None:
        self._delete((plural, namespace, name))

    def object(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((plural, namespace, name))

    def of(self, plural: str) -> list[dict[str, Any]]:
        return [o for (p, _, _), o in sorted(self.objects.items()) if p == plural]

    def compact(self) -> None:
        """Forget the history (as etcd compaction does): older watches get 410 Gone."""
        self.history.clear()
        self.compacted = self.rv

    def fail_next(self, method: str, plural: str, code: int, count: int = 1) -> None:
        self.failures.append(Failure(method.upper(), plural, code, count))

    def drop_watches(self) -> None:
        """End every open watch stream (as an API server restart does)."""
        for w in self.watchers:
            w.queue.put_nowait(None)

    # --------------------------------------------------------------- state changes
    def _event(self, kind: str, plural: str, obj: dict[str, Any]) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        self.history.append((rv, plural, {"type": kind, "object": copy.deepcopy(obj)}))
        while len(self.history) > self.history_limit:
            self.compacted = self.history.popleft()[0]
        ns = obj["metadata"].get("namespace", "")
        for w in self.watchers:
            if w.plural == plural and (w.namespace is None or w.namespace == ns):
                w.queue.put_nowait({"type": kind, "object": copy.deepcopy(obj)})

    def _create(self, key: Key, obj: dict[str, Any]) -> dict[str, Any]:
        _gv, kind, api_version, _ = RESOURCES[key[0]]
        obj = copy.deepcopy(obj)
        obj["kind"], obj["apiVersion"] = kind, api_version
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta["creationTimestamp"] = now_rfc3339()
        return self._write(key, obj, "ADDED")

    def _write(self, key: Key, obj: dict[str, Any], kind: str) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[key] = obj
        self._event(kind, key[0], obj)
        return obj

    def _delete(self, key: Key) -> dict[str, Any]:
        obj = self.objects.pop(key)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._event("DELETED", key[0], obj)
        return obj

    # --------------------------------------------------------------------- serving
    async def __call__(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """Resource paths are served here; discovery and the rest by kmock."""
        path = raw.path.rstrip("/")
        if path == "/api/v1" or (path.startswith("/apis/") and path.count("/") == 3):
            group_version = path.removeprefix("/api/").removeprefix("/apis/")
            return self._json(self._resource_list(group_version))
        parsed = parse_path(path)
        if parsed is None:
            return await super().__call__(raw)
        if parsed[0] in self.unserved:
            message = "the server could not find the requested resource"
            return self._json(status(404, "NotFound", message))
        body = await raw.read()
        data = json.loads(body) if body else None
        return await self._serve(raw, parsed, dict(raw.query), data)

    async def _serve(
        self,
        raw: aiohttp.web.BaseRequest,
        parsed: tuple[str, str | None, str | None, str],
        params: dict[str, str],
        data: Any,
    ) -> aiohttp.web.StreamResponse:
        method = raw.method.upper()
        plural, ns, name, sub = parsed
        self.calls.append(rbac_call(method, plural, name, sub, params))
        for failure in self.failures:
            if failure.method == method and failure.plural == plural and failure.count > 0:
                failure.count -= 1
                return self._json(status(failure.status, "InjectedFailure", "injected"))
        namespaced = RESOURCES[plural][3]
        namespace = (ns or "") if namespaced else ""
        if method == "GET" and params.get("watch") in ("true", "1"):
            return await self._watch(raw, plural, ns if namespaced else None, params)
        if method == "GET" and name is None:
            return self._list(plural, ns if namespaced else None, params.get("fieldSelector", ""))
        if name is None and method == "POST":
            body = data or {}
            meta = body.get("metadata") or {}
            key = (plural, namespace or meta.get("namespace", "default"), meta.get("name", ""))
            if namespaced:
                meta["namespace"] = key[1]
            if key in self.objects:
                return self._json(
                    status(409, "AlreadyExists", f'{plural} "{key[2]}" already exists')
                )
            return self._json(self._create(key, body), 201)
        assert name is not None
        key = (plural, namespace, name)
        obj = self.objects.get(key)
        if obj is None:
            return self._json(status(404, "NotFound", f'{plural} "{name}" not found'))
        if method == "GET":
            return self._json(obj)
        if method == "DELETE":
            return self._json(self._delete(key))
        if method == "POST" and sub == "binding":
            return self._bind(key, obj, data or {})
        if method == "POST" and sub == "eviction":
            if name in self.refuse_evictions:
                msg = "Cannot evict pod as it would violate the pod's disruption budget."
                return self._json(status(429, "TooManyRequests", msg))
            self._delete(key)
            return self._json(status(201, "", ""), 201)
        if method == "PUT":
            body = data or {}
            want = (body.get("metadata") or {}).get("resourceVersion")
            if want and want != obj["metadata"]["resourceVersion"]:
                return self._json(
                    status(
                        409,
                        "Conflict",
                        "the object has been modified; please apply your "
                        "changes to the latest version and try again",
                    )
                )
            body.setdefault("metadata", {})["uid"] = obj["metadata"]["uid"]
            body["kind"], body["apiVersion"] = obj["kind"], obj["apiVersion"]
            return self._json(self._write(key, body, "MODIFIED"))
        if method == "PATCH":
            new = copy.deepcopy(obj)
            merge(new, data or {})
            return self._json(self._write(key, new, "MODIFIED"))
        return self._json(status(405, "MethodNotAllowed", method))

    def _bind(self, key: Key, pod: dict[str, Any], body: dict[str, Any]) -> aiohttp.web.Response:
        node = (body.get("target") or {}).get("name", "")
        uid = (body.get("metadata") or {}).get("uid")
        if uid and uid != pod["metadata"]["uid"]:
            return self._json(status(409, "Conflict", "Precondition failed: UID in precondition"))
        bound = (pod.get("spec") or {}).get("nodeName")
        if bound:
            msg = f'pod {key[2]} is already assigned to node "{bound}"'
            return self._json(status(409, "Conflict", msg))
        new = copy.deepcopy(pod)
        new.setdefault("spec", {})["nodeName"] = node
        merge(new, {"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}})
        self._write(key, new, "MODIFIED")
        return self._json(status(201, "", ""), 201)

    @staticmethod
    def _resource_list(group_version: str) -> dict[str, Any]:
        verbs = ["get", "list", "watch", "create", "update", "patch", "delete"]
        resources: list[dict[str, Any]] = []
        for plural, (gv, kind, _, namespaced) in RESOURCES.items():
            if gv != group_version:
                continue
            one = {"kind": kind, "singularName": kind.lower(), "namespaced": namespaced}
            resources.append({"name": plural, "verbs": verbs, **one})
            if plural == "pods":
                resources.append({"name": "pods/status", "verbs": ["get", "patch"], **one})
                resources.append({"name": "pods/binding", "verbs": ["create"], **one})
                resources.append({"name": "pods/eviction", "verbs": ["create"], **one})
        return {"kind": "APIResourceList", "groupVersion": group_version, "resources": resources}

    def _list(self, plural: str, namespace: str | None, fields: str = "") -> aiohttp.web.Response:
        _gv, kind, api_version, _ = RESOURCES[plural]
        items = [
            o
            for (p, ns, _), o in sorted(self.objects.items())
            if p == plural and (namespace is None or ns == namespace) and selected(o, fields)
        ]
        return self._json(
            {
                "kind": f"{kind}List",
                "apiVersion": api_version,
                "metadata": {"resourceVersion": str(self.rv)},
                "items": items,
            }
        )

    async def _watch(
        self,
        raw: aiohttp.web.BaseRequest,
        plural: str,
        namespace: str | None,
        params: Mapping[str, str],
    ) -> aiohttp.web.StreamResponse:
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(raw)

        async def send(event: dict[str, Any]) -> None:
            await response.write(json.dumps(event).encode() + b"\n")

        since = params.get("resourceVersion", "")
        watcher = Watcher(plural, namespace)
        if since not in ("", "0") and int(since) < self.compacted:
            gone = status(410, "Expired", f"too old resource version: {since} ({self.compacted})")
            await send({"type": "ERROR", "object": gone})
            return response
        self.watchers.append(watcher)
        try:
            if since in ("", "0"):
                for (p, ns, _), o in sorted(self.objects.items()):
                    if p == plural and (namespace is None or ns == namespace):
                        await send({"type": "ADDED", "object": o})
            else:
                for rv, p, past in list(self.history):
                    ns = past["object"]["metadata"].get("namespace", "")
                    if rv > int(since) and p == plural and (namespace in (None, ns)):
                        await send(past)
            timeout = float(params.get("timeoutSeconds") or 3600)
            deadline = asyncio.get_running_loop().time() + timeout
            bookmarks = params.get("allowWatchBookmarks") == "true"
            while (left := deadline - asyncio.get_running_loop().time()) > 0:
                try:
                    event: dict[str, Any] | None = await asyncio.wait_for(
                        watcher.queue.get(), min(left, self.bookmark_interval)
                    )
                except TimeoutError:
                    if bookmarks:
                        kind, api_version = RESOURCES[plural][1:3]
                        await send(
                            {
                                "type": "BOOKMARK",
                                "object": {
                                    "kind": kind,
                                    "apiVersion": api_version,
                                    "metadata": {"resourceVersion": str(self.rv)},
                                },
                            }
                        )
                    continue
                if event is None:
                    break
                await send(event)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.watchers.remove(watcher)
        return response

    @staticmethod
    def _json(body: dict[str, Any], code: int | None = None) -> aiohttp.web.Response:
        # Exactly "application/json", as the API server sends (clients compare it).
        return aiohttp.web.Response(
            body=json.dumps(body).encode(),
            status=code or int(body.get("code") or 200),
            headers={"Content-Type": "application/json"},
        )
