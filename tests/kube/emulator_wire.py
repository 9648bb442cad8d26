"""The API server's wire and rules as the emulator (tests/kube/emulator.py) serves them: the
resources it knows, Status bodies, merge patches, paths, RBAC names of requests, field
selectors (lists and watches), continue tokens and the events.k8s.io <-> core/v1 Event
conversion."""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
    # Kueue's CRDs, in Kueue's storage version since 0.15 (ApiEmulator.versions serves
    # another, and ApiEmulator.unserved none: Kueue not installed).
    **{
        plural: ("kueue.x-k8s.io/v1beta2", kind, "kueue.x-k8s.io/v1beta2", namespaced)
        for plural, kind, namespaced in (
            ("resourceflavors", "ResourceFlavor", False),
            ("clusterqueues", "ClusterQueue", False),
            ("localqueues", "LocalQueue", True),
            ("cohorts", "Cohort", False),
        )
    },
    "tokenreviews": (
        "authentication.k8s.io/v1",
        "TokenReview",
        "authentication.k8s.io/v1",
        False,
    ),
    "subjectaccessreviews": (
        "authorization.k8s.io/v1",
        "SubjectAccessReview",
        "authorization.k8s.io/v1",
        False,
    ),
}


@dataclass
class Failure:
    method: str
    plural: str
    status: int
    count: int = 1
    retry_after: int | None = None


@dataclass
class Watcher:
    plural: str
    namespace: str | None
    fields: str = ""
    queue: asyncio.Queue[dict[str, Any] | None] = field(default_factory=asyncio.Queue)
    stalled: bool = False


@dataclass
class Cache:
    """A lagging watch cache: the objects and resourceVersion it is stuck at."""

    rv: int
    objects: dict[Key, dict[str, Any]]


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


def filtered(
    kind: str, obj: dict[str, Any], old: dict[str, Any] | None, fields: str
) -> dict[str, Any] | None:
    """The event a watcher with this field selector sees, as the API server sends it: an
    object leaving the selection is DELETED, one entering it ADDED, None when neither the
    old nor the new state is selected."""
    if not fields:
        return {"type": kind, "object": copy.deepcopy(obj)}
    now = selected(obj, fields)
    before = old is not None and selected(old, fields)
    if kind == "MODIFIED":
        if now and not before:
            kind = "ADDED"
        elif before and not now:
            kind = "DELETED"
        elif not now:
            return None
    elif not now:
        return None
    return {"type": kind, "object": copy.deepcopy(obj)}


def page_token(rv: int, after: Key) -> str:
    return base64.urlsafe_b64encode(json.dumps([rv, list(after)]).encode()).decode()


def read_token(token: str) -> tuple[int, Key]:
    rv, after = json.loads(base64.urlsafe_b64decode(token.encode()))
    return int(rv), (after[0], after[1], after[2])


def core_event(v1: dict[str, Any]) -> dict[str, Any]:
    """An events.k8s.io/v1 Event (or a patch of one) with the core/v1 fields the API server
    converts it to (note -> message, regarding -> involvedObject, series -> count ...)."""
    out = dict(v1)
    for new, old in (
        ("note", "message"),
        ("regarding", "involvedObject"),
        ("reportingController", "reportingComponent"),
    ):
        if new in v1:
            out[old] = v1[new]
    if "reportingController" in v1:
        out["source"] = {"component": v1["reportingController"]}
    if "eventTime" in v1:
        out["firstTimestamp"] = out["lastTimestamp"] = v1["eventTime"][:19] + "Z"
        out.setdefault("count", 1)
    series = v1.get("series")
    if isinstance(series, dict):
        out["count"] = series.get("count")
        if series.get("lastObservedTime"):
            out["lastTimestamp"] = str(series["lastObservedTime"])[:19] + "Z"
    return out
