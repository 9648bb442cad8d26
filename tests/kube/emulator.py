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
  method "LIST" or "WATCH" picks one kind of GET, and `retry_after` adds the Retry-After
  header and details.retryAfterSeconds, as API priority and fairness answers a 429;
- `unserved` plurals are answered 404, as for a CRD that is not installed; `versions` serves
  a plural in another version of its group than RESOURCES' (a request for any other version
  of the group is answered 404, as for a version the CRD does not serve);
- lists page with `limit`/`continue` (a token older than the compacted history: 410);
  field selectors filter lists *and* watches (an object leaving the selection is a DELETED
  event to that watcher, one entering it an ADDED);
- `stall_watches()`: the open streams go silent without closing (a connection lost behind
  a load balancer); `delay` holds answers of a plural back (a slow server);
- graceful deletion: a pod deleted (or evicted) with a grace period keeps existing with a
  deletionTimestamp until the period ends; binding a pod being deleted is refused;
- `lag()` freezes a watch cache: resourceVersion=0 lists are served from it (stale), and a
  list or watch from a newer resourceVersion is answered 504 "Too large resource version"
  with retryAfterSeconds, until `catch_up()`.
"""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from collections import deque
from collections.abc import Mapping
from typing import Any

import aiohttp.web
import attrs
import kmock

from tests.kube.emulator_wire import (
    RESOURCES,
    Cache,
    Failure,
    Key,
    Watcher,
    core_event,
    filtered,
    merge,
    now_rfc3339,
    page_token,
    parse_path,
    rbac_call,
    read_token,
    selected,
    status,
)


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
    versions: dict[str, str] = attrs.field(factory=dict, init=False)
    """plural -> the one group/version it is served in, instead of RESOURCES' (e.g.
    "kueue.x-k8s.io/v1beta1": an older Kueue)."""
    calls: list[tuple[str, str, str]] = attrs.field(factory=list, init=False)
    """Every resource request as RBAC sees it: (apiGroup, resource[/subresource], verb)."""
    requests: list[tuple[str, str, dict[str, str]]] = attrs.field(factory=list, init=False)
    """Every resource request: (method, path, query parameters)."""
    delay: dict[str, float] = attrs.field(factory=dict, init=False)
    """plural -> seconds every answer about it is held back (a slow server)."""
    eviction_grace: float = 0.0
    expire_continue_tokens: bool = False
    """Every continue token is answered 410 (a list slower than compaction)."""
    """Seconds an evicted pod lingers (terminating) before it is gone."""
    cache: Cache | None = attrs.field(default=None, init=False)
    users: dict[str, dict[str, Any]] = attrs.field(factory=dict, init=False)
    """token -> TokenReview user ({username, uid, groups}): the tokens the server knows."""
    grants: set[tuple[str, str, str, str]] = attrs.field(factory=set, init=False)
    """(username, verb, resource, namespace) RBAC allows; namespace "" is cluster-wide."""
    _timers: set[asyncio.TimerHandle] = attrs.field(factory=set, init=False)

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
    def spec(self, plural: str) -> tuple[str, str, str, bool]:
        """(group/version, kind, apiVersion, namespaced) as served now (see `versions`)."""
        gv, kind, api_version, namespaced = RESOURCES[plural]
        served = self.versions.get(plural)
        return (served, kind, served, namespaced) if served else (gv, kind, api_version, namespaced)

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

    def fail_next(
        self, method: str, plural: str, code: int, count: int = 1, retry_after: int | None = None
    ) -> None:
        self.failures.append(Failure(method.upper(), plural, code, count, retry_after))

    def drop_watches(self) -> None:
        """End every open watch stream (as an API server restart does)."""
        for w in self.watchers:
            w.queue.put_nowait(None)

    def stall_watches(self) -> None:
        """The open watch streams send nothing more, and stay open (a dead connection)."""
        for w in self.watchers:
            w.stalled = True

    def lag(self) -> None:
        """The watch cache stops here (see the module docstring)."""
        self.cache = Cache(self.rv, copy.deepcopy(self.objects))

    def catch_up(self) -> None:
        self.cache = None

    def delete_gracefully(self, plural: str, namespace: str, name: str, grace: float) -> None:
        """DELETE with gracePeriodSeconds: the object lingers with a deletionTimestamp."""
        key = (plural, namespace, name)
        obj = copy.deepcopy(self.objects[key])
        if grace <= 0:
            self._delete(key)
            return
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return
        meta["deletionTimestamp"] = now_rfc3339()
        meta["deletionGracePeriodSeconds"] = int(grace)
        self._write(key, obj, "MODIFIED")
        uid = meta["uid"]

        def gone() -> None:
            current = self.objects.get(key)
            if current is not None and current["metadata"]["uid"] == uid:
                self._delete(key)

        handle = asyncio.get_running_loop().call_later(grace, gone)
        self._timers.add(handle)

    # --------------------------------------------------------------- state changes
    def _event(
        self, kind: str, plural: str, obj: dict[str, Any], old: dict[str, Any] | None = None
    ) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        self.history.append((rv, plural, {"type": kind, "object": copy.deepcopy(obj), "old": old}))
        while len(self.history) > self.history_limit:
            self.compacted = self.history.popleft()[0]
        ns = obj["metadata"].get("namespace", "")
        for w in self.watchers:
            if w.plural == plural and (w.namespace is None or w.namespace == ns):
                seen = filtered(kind, obj, old, w.fields)
                if seen is not None:
                    w.queue.put_nowait(seen)

    def _create(self, key: Key, obj: dict[str, Any]) -> dict[str, Any]:
        _gv, kind, api_version, _ = self.spec(key[0])
        obj = copy.deepcopy(obj)
        obj["kind"], obj["apiVersion"] = kind, api_version
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta["creationTimestamp"] = now_rfc3339()
        return self._write(key, obj, "ADDED")

    def _write(self, key: Key, obj: dict[str, Any], kind: str) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        old = self.objects.get(key)
        self.objects[key] = obj
        self._event(kind, key[0], obj, copy.deepcopy(old) if old is not None else None)
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
        if parsed[0] in self.unserved or not self._serves(path, parsed[0]):
            self.requests.append((raw.method.upper(), raw.path, dict(raw.query)))
            message = "the server could not find the requested resource"
            return self._json(status(404, "NotFound", message))
        body = await raw.read()
        data = json.loads(body) if body else None
        return await self._serve(raw, parsed, dict(raw.query), data)

    def _serves(self, path: str, plural: str) -> bool:
        """Whether the path asks for the version of its group the plural is served in."""
        parts = path.strip("/").split("/")
        asked = "/".join(parts[1:3]) if parts[0] == "apis" else "v1"
        group, _, version = self.spec(plural)[0].rpartition("/")
        asked_group, _, asked_version = asked.rpartition("/")
        return asked_group != group or asked_version == version

    async def _serve(
        self,
        raw: aiohttp.web.BaseRequest,
        parsed: tuple[str, str | None, str | None, str],
        params: dict[str, str],
        data: Any,
    ) -> aiohttp.web.StreamResponse:
        method = raw.method.upper()
        plural, ns, name, sub = parsed
        call = rbac_call(method, plural, name, sub, params)
        if raw.path.startswith("/apis/events.k8s.io/"):
            # events.k8s.io/v1 and core/v1 Events are one resource in two versions: stored
            # once, in core's form (the v1 fields kept beside).
            call = ("events.k8s.io", *call[1:])
            data = core_event(data) if isinstance(data, dict) else data
        self.calls.append(call)
        self.requests.append((method, raw.path, dict(params)))
        if self.delay.get(plural):
            await asyncio.sleep(self.delay[plural])
        watching = method == "GET" and params.get("watch") in ("true", "1")
        listing = method == "GET" and name is None and not watching
        aliases = {method} | ({"WATCH"} if watching else set()) | ({"LIST"} if listing else set())
        for failure in self.failures:
            if failure.method in aliases and failure.plural == plural and failure.count > 0:
                failure.count -= 1
                answer = status(failure.status, "InjectedFailure", "injected")
                headers = {}
                if failure.retry_after is not None:
                    answer["details"] = {"retryAfterSeconds": failure.retry_after}
                    headers["Retry-After"] = str(failure.retry_after)
                return self._json(answer, headers=headers)
        namespaced = RESOURCES[plural][3]
        namespace = (ns or "") if namespaced else ""
        too_large = self._too_large(params.get("resourceVersion", ""))
        if (watching or listing) and too_large is not None:
            return too_large
        if watching:
            return await self._watch(raw, plural, ns if namespaced else None, params)
        if listing:
            return self._list(plural, ns if namespaced else None, params)
        if name is None and method == "POST" and plural in ("tokenreviews", "subjectaccessreviews"):
            return self._json(self._review(plural, data or {}), 201)
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
            grace = (data or {}).get("gracePeriodSeconds", params.get("gracePeriodSeconds"))
            if plural == "pods" and grace:
                self.delete_gracefully(plural, namespace, name, float(grace))
                return self._json(self.objects.get(key) or obj)
            return self._json(self._delete(key))
        if method == "POST" and sub == "binding":
            return self._bind(key, obj, data or {})
        if method == "POST" and sub == "eviction":
            if name in self.refuse_evictions:
                msg = "Cannot evict pod as it would violate the pod's disruption budget."
                return self._json(status(429, "TooManyRequests", msg))
            self.delete_gracefully(plural, namespace, name, self.eviction_grace)
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
            want_uid = ((data or {}).get("metadata") or {}).get("uid")
            if want_uid and want_uid != obj["metadata"]["uid"]:
                msg = (
                    f"Precondition failed: UID in precondition: {want_uid}, "
                    f"UID in object meta: {obj['metadata']['uid']}"
                )
                return self._json(status(409, "Conflict", msg))
            new = copy.deepcopy(obj)
            merge(new, data or {})
            return self._json(self._write(key, new, "MODIFIED"))
        return self._json(status(405, "MethodNotAllowed", method))

    def _bind(self, key: Key, pod: dict[str, Any], body: dict[str, Any]) -> aiohttp.web.Response:
        node = (body.get("target") or {}).get("name", "")
        uid = (body.get("metadata") or {}).get("uid")
        if uid and uid != pod["metadata"]["uid"]:
            return self._json(status(409, "Conflict", "Precondition failed: UID in precondition"))
        if pod["metadata"].get("deletionTimestamp"):
            msg = f"pod {key[2]} is being deleted, cannot be assigned to a host"
            return self._json(status(409, "Conflict", msg))
        bound = (pod.get("spec") or {}).get("nodeName")
        if bound:
            msg = f'pod {key[2]} is already assigned to node "{bound}"'
            return self._json(status(409, "Conflict", msg))
        new = copy.deepcopy(pod)
        new.setdefault("spec", {})["nodeName"] = node
        merge(new, {"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}})
        self._write(key, new, "MODIFIED")
        return self._json(status(201, "", ""), 201)

    def _resource_list(self, group_version: str) -> dict[str, Any]:
        verbs = ["get", "list", "watch", "create", "update", "patch", "delete"]
        resources: list[dict[str, Any]] = []
        for plural in RESOURCES:
            gv, kind, _, namespaced = self.spec(plural)
            if gv != group_version or plural in self.unserved:
                continue
            one = {"kind": kind, "singularName": kind.lower(), "namespaced": namespaced}
            resources.append({"name": plural, "verbs": verbs, **one})
            if plural == "pods":
                resources.append({"name": "pods/status", "verbs": ["get", "patch"], **one})
                resources.append({"name": "pods/binding", "verbs": ["create"], **one})
                resources.append({"name": "pods/eviction", "verbs": ["create"], **one})
        return {"kind": "APIResourceList", "groupVersion": group_version, "resources": resources}

    def _review(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        spec = body.get("spec") or {}
        if plural == "tokenreviews":
            user = self.users.get(str(spec.get("token") or ""))
            answer: dict[str, Any] = {"authenticated": user is not None}
            if user is not None:
                answer["user"] = user
        else:
            attrs_ = spec.get("resourceAttributes") or {}
            who, verb = spec.get("user"), attrs_.get("verb")
            resource, namespace = attrs_.get("resource"), attrs_.get("namespace") or ""
            allowed = (who, verb, resource, "") in self.grants or (
                namespace and (who, verb, resource, namespace) in self.grants
            )
            answer = {"allowed": bool(allowed)}
        return {**body, "status": answer}

    def _too_large(self, version: str) -> aiohttp.web.Response | None:
        """A lagging cache asked for a version it has not reached: 504, retry in a second."""
        if self.cache is None or version in ("", "0") or int(version) <= self.cache.rv:
            return None
        answer = status(
            504, "Timeout", f"Too large resource version: {version}, current: {self.cache.rv}"
        )
        answer["details"] = {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        }
        return self._json(answer, headers={"Retry-After": "1"})

    def _list(
        self, plural: str, namespace: str | None, params: Mapping[str, str]
    ) -> aiohttp.web.Response:
        _gv, kind, api_version, _ = self.spec(plural)
        fields = params.get("fieldSelector", "")
        objects, rv = self.objects, self.rv
        if self.cache is not None and params.get("resourceVersion") == "0":
            objects, rv = self.cache.objects, self.cache.rv
        token = params.get("continue", "")
        after: Key | None = None
        if token:
            rv, after = read_token(token)
            if rv < self.compacted or self.expire_continue_tokens:
                msg = (
                    "The provided continue parameter is too old to display a consistent "
                    "list result."
                )
                return self._json(status(410, "Expired", msg))
        items = [
            o
            for key, o in sorted(objects.items())
            if key[0] == plural
            and (after is None or key > after)
            and (namespace is None or key[1] == namespace)
            and selected(o, fields)
        ]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        limit = int(params.get("limit") or 0)
        if limit and len(items) > limit:
            items = items[:limit]
            last = items[-1]["metadata"]
            meta["continue"] = page_token(
                rv,
                (plural, last.get("namespace", "") if RESOURCES[plural][3] else "", last["name"]),
            )
            meta["remainingItemCount"] = 0
        return self._json(
            {"kind": f"{kind}List", "apiVersion": api_version, "metadata": meta, "items": items}
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
        fields = params.get("fieldSelector", "")
        watcher = Watcher(plural, namespace, fields)
        if since not in ("", "0") and int(since) < self.compacted:
            gone = status(410, "Expired", f"too old resource version: {since} ({self.compacted})")
            await send({"type": "ERROR", "object": gone})
            return response
        self.watchers.append(watcher)
        try:
            if since in ("", "0"):
                for (p, ns, _), o in sorted(self.objects.items()):
                    mine = p == plural and (namespace is None or ns == namespace)
                    if mine and selected(o, fields):
                        await send({"type": "ADDED", "object": o})
            else:
                for rv, p, past in list(self.history):
                    ns = past["object"]["metadata"].get("namespace", "")
                    if rv > int(since) and p == plural and (namespace in (None, ns)):
                        seen = filtered(past["type"], past["object"], past.get("old"), fields)
                        if seen is not None:
                            await send(seen)
            timeout = float(params.get("timeoutSeconds") or 3600)
            deadline = asyncio.get_running_loop().time() + timeout
            bookmarks = params.get("allowWatchBookmarks") == "true"
            while (left := deadline - asyncio.get_running_loop().time()) > 0 or watcher.stalled:
                if watcher.stalled:  # a dead connection: nothing, not even the end
                    await asyncio.sleep(0.05)
                    continue
                try:
                    event: dict[str, Any] | None = await asyncio.wait_for(
                        watcher.queue.get(), min(left, self.bookmark_interval)
                    )
                except TimeoutError:
                    if bookmarks:
                        kind, api_version = self.spec(plural)[1:3]
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
    def _json(
        body: dict[str, Any], code: int | None = None, headers: Mapping[str, str] | None = None
    ) -> aiohttp.web.Response:
        # Exactly "application/json", as the API server sends (clients compare it).
        return aiohttp.web.Response(
            body=json.dumps(body).encode(),
            status=code or int(body.get("code") or 200),
            headers={"Content-Type": "application/json", **(headers or {})},
        )
