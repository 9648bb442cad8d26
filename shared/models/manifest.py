"""Load Kubernetes manifests (multi-document YAML or JSON) into berth models.

Supported kinds: v1 Node, Pod, Namespace, Service, ReplicationController; apps/v1 ReplicaSet,
StatefulSet; scheduling.k8s.io/v1 PriorityClass; policy/v1 PodDisruptionBudget;
scheduling.x-k8s.io/v1alpha1 PodGroup; and ``kind: List`` wrapping them.
Validation is strict (like ``kubectl --validate=strict`` plus the API server's own checks);
every problem is a ManifestError naming the kind, namespace/name and field path:

    Pod default/web-1: spec.containers[0].resources.requests.cpu: invalid quantity "abc"
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from shared.models.decoding import FieldError, Mode, object_decoder, paused_gc, type_name
from shared.models.kueue import ClusterQueue, LocalQueue, ResourceFlavor
from shared.models.kueue import Cohort as KueueCohort
from shared.models.kueue_validation import KUEUE_VALIDATORS
from shared.models.kueue_versions import ALSO_SERVED, as_berth
from shared.models.node import Node
from shared.models.pod import Pod
from shared.models.policy import Namespace, PodDisruptionBudget, PodGroup, PriorityClass
from shared.models.schema import KIND_BY_NAME, KindInfo, KubeObject
from shared.models.strict_text import (
    StrictLoader,
    StrictTextError,
    check_aliases,
    check_unicode,
    no_duplicate_keys,
)
from shared.models.validation import (
    VALIDATORS,
    default_pod,
    validate_meta,
)
from shared.models.workload_validation import WORKLOAD_DEFAULTERS, WORKLOAD_VALIDATORS
from shared.models.workloads import ReplicaSet, ReplicationController, Service, StatefulSet


class ManifestError(ValueError):
    """An invalid manifest: bad syntax, unknown kind, or an invalid field."""

    def __init__(
        self,
        message: str,
        *,
        kind: str = "",
        name: str = "",
        path: str = "",
        source: str = "",
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name
        self.path = path
        self.source = source


@dataclass(slots=True, kw_only=True)
class Manifests:
    """Loaded objects, one list per kind, each in input order."""

    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    namespaces: list[Namespace] = field(default_factory=list)
    priority_classes: list[PriorityClass] = field(default_factory=list)
    pod_disruption_budgets: list[PodDisruptionBudget] = field(default_factory=list)
    pod_groups: list[PodGroup] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    replication_controllers: list[ReplicationController] = field(default_factory=list)
    replica_sets: list[ReplicaSet] = field(default_factory=list)
    stateful_sets: list[StatefulSet] = field(default_factory=list)
    queue_objects: list[ResourceFlavor | ClusterQueue | LocalQueue | KueueCohort] = field(
        default_factory=list
    )
    """Kueue's ResourceFlavors, ClusterQueues, LocalQueues and Cohorts."""

    def add(self, obj: KubeObject) -> None:
        if isinstance(obj, Pod):
            self.pods.append(obj)
        elif isinstance(obj, Node):
            self.nodes.append(obj)
        elif isinstance(obj, Namespace):
            self.namespaces.append(obj)
        elif isinstance(obj, PriorityClass):
            self.priority_classes.append(obj)
        elif isinstance(obj, PodDisruptionBudget):
            self.pod_disruption_budgets.append(obj)
        elif isinstance(obj, PodGroup):
            self.pod_groups.append(obj)
        elif isinstance(obj, Service):
            self.services.append(obj)
        elif isinstance(obj, ReplicationController):
            self.replication_controllers.append(obj)
        elif isinstance(obj, ReplicaSet):
            self.replica_sets.append(obj)
        elif isinstance(obj, StatefulSet):
            self.stateful_sets.append(obj)
        else:
            self.queue_objects.append(obj)

    def objects(self) -> Iterator[KubeObject]:
        """All objects, dependencies first: namespaces, classes, nodes, groups, PDBs, then
        the pods' Services and controllers (Service, ReplicationController, ReplicaSet,
        StatefulSet), then pods."""
        yield from self.namespaces
        yield from self.queue_objects
        yield from self.priority_classes
        yield from self.nodes
        yield from self.pod_groups
        yield from self.pod_disruption_budgets
        yield from self.services
        yield from self.replication_controllers
        yield from self.replica_sets
        yield from self.stateful_sets
        yield from self.pods

    def __len__(self) -> int:
        return sum(
            len(group)
            for group in (
                self.nodes,
                self.pods,
                self.namespaces,
                self.priority_classes,
                self.pod_disruption_budgets,
                self.pod_groups,
                self.services,
                self.replication_controllers,
                self.replica_sets,
                self.stateful_sets,
                self.queue_objects,
            )
        )


def _describe(info: KindInfo | None, kind: str, doc: Mapping[str, Any]) -> tuple[str, str]:
    """("Pod", "default/web-1") for error messages, from the raw document."""
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    name_text = name if isinstance(name, str) and name else "<unnamed>"
    if info is not None and info.namespaced:
        ns = namespace if isinstance(namespace, str) and namespace else "default"
        return kind, f"{ns}/{name_text}"
    return kind, name_text


def decode_object(doc: Any, *, source: str = "", mode: Mode = Mode.MANIFEST) -> KubeObject:
    """Decode, default and validate one manifest object (a parsed JSON/YAML mapping).

    `mode=Mode.API` is for objects an API server served: fields berth does not model are
    dropped instead of rejected; everything else is checked the same way.
    """
    where = f" ({source})" if source else ""
    if not isinstance(doc, dict):
        raise ManifestError(
            f"expected a mapping (an object), got {type_name(doc)}{where}", source=source
        )
    kind = doc.get("kind")
    api_version = doc.get("apiVersion")
    if not isinstance(kind, str) or not kind:
        raise ManifestError(f"kind: Required value{where}", path="kind", source=source)
    info = KIND_BY_NAME.get(kind)
    label, name = _describe(info, kind, doc)
    prefix = f"{label} {name}"
    if info is None:
        supported = ", ".join(sorted(KIND_BY_NAME))
        raise ManifestError(
            f'{prefix}: kind: unknown kind "{kind}" (supported: {supported}){where}',
            kind=kind,
            name=name,
            path="kind",
            source=source,
        )
    if api_version != info.api_version and api_version in ALSO_SERVED.get(kind, ()):
        # Another version of Kueue's (v1beta2, Cohort v1beta1): read in berth's field names.
        doc = {**as_berth(kind, str(api_version), doc), "apiVersion": info.api_version}
        api_version = info.api_version
    if api_version != info.api_version:
        raise ManifestError(
            f'{prefix}: apiVersion: unknown apiVersion "{api_version}" for kind {kind} '
            f'(expected "{info.api_version}"){where}',
            kind=kind,
            name=name,
            path="apiVersion",
            source=source,
        )
    try:
        obj = object_decoder(info.cls, mode)(doc)
        _finish(obj, info)
        (
            VALIDATORS.get(info.cls)
            or WORKLOAD_VALIDATORS.get(info.cls)
            or KUEUE_VALIDATORS[info.cls]
        )(obj)
    except FieldError as e:
        raise ManifestError(
            f"{prefix}: {e.path}: {e.reason}{where}",
            kind=kind,
            name=name,
            path=e.path,
            source=source,
        ) from None
    return obj  # type: ignore[no-any-return]


_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_MAX_GENERATED_BASE = 63 - 5


def generated_name(base: str) -> str:
    """The API server's name for an object created with only metadata.generateName (upstream
    SimpleNameGenerator: the base, cut to leave room, and five random characters)."""
    suffix = "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))
    return base[:_MAX_GENERATED_BASE] + suffix


def _finish(obj: Any, info: KindInfo) -> None:
    meta = obj.metadata
    if not meta.name and meta.generate_name:
        meta.name = generated_name(meta.generate_name)
    if not meta.name:
        raise FieldError("Required value", ".metadata.name")
    if info.namespaced:
        meta.namespace = meta.namespace or "default"
    else:
        meta.namespace = ""
    validate_meta(meta, namespaced=info.namespaced, label_name=info.cls is Namespace)
    if isinstance(obj, Pod):
        default_pod(obj)
    defaulter = WORKLOAD_DEFAULTERS.get(info.cls)
    if defaulter is not None:
        defaulter(obj)


class ManifestLoader:
    """Accumulates objects from several sources, rejecting duplicates across all of them."""

    def __init__(self) -> None:
        self.manifests = Manifests()
        self._seen: dict[tuple[str, str, str], str] = {}
        self._uids: dict[str, tuple[str, str, str]] = {}

    def add_document(self, doc: Any, *, source: str = "") -> None:
        if doc is None:  # an empty YAML document (e.g. a trailing "---")
            return
        if isinstance(doc, dict) and doc.get("kind") == "List":
            self._add_list(doc, source)
            return
        obj = decode_object(doc, source=source)
        meta = obj.metadata
        kind = type(obj).__name__
        key = (kind, meta.namespace, meta.name)
        name = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
        owner = self._uids.get(meta.uid)
        if owner is not None and owner != key:
            raise ManifestError(
                f'{kind} {name}: metadata.uid: Duplicate value: "{meta.uid}" '
                f"(also the uid of {owner[0]} {'/'.join(p for p in owner[1:] if p)})"
                + (f" ({source})" if source else ""),
                kind=kind,
                name=name,
                path="metadata.uid",
                source=source,
            )
        self._uids[meta.uid] = key
        if key in self._seen:
            name = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
            first = self._seen[key]
            raise ManifestError(
                f"{kind} {name}: duplicate object (first defined in {first})"
                + (f" ({source})" if source else ""),
                kind=kind,
                name=name,
                source=source,
            )
        self._seen[key] = source or "an earlier document"
        self.manifests.add(obj)

    def _add_list(self, doc: dict[str, Any], source: str) -> None:
        if doc.get("apiVersion") != "v1":
            raise ManifestError(
                f'List: apiVersion: unknown apiVersion "{doc.get("apiVersion")}" '
                f'(expected "v1") ({source})',
                kind="List",
                path="apiVersion",
                source=source,
            )
        unknown = set(doc) - {"apiVersion", "kind", "items", "metadata"}
        if unknown:
            key = sorted(map(str, unknown))[0]
            raise ManifestError(
                f"List: {key}: unknown field ({source})", kind="List", path=key, source=source
            )
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise ManifestError(
                f"List: items: expected array, got {type_name(items)} ({source})",
                kind="List",
                path="items",
                source=source,
            )
        for i, item in enumerate(items):
            self.add_document(item, source=f"{source}, items[{i}]" if source else f"items[{i}]")

    def add_text(self, text: str, *, source: str = "<string>") -> None:
        with paused_gc():
            for index, doc in enumerate(_parse(text, source), start=1):
                self.add_document(doc, source=f"{source} document {index}")

    def add_file(self, path: str | os.PathLike[str]) -> None:
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ManifestError(f"{file}: cannot read: {e}", source=str(file)) from e
        self.add_text(text, source=str(file))


MAX_TEXT_BYTES = 256 * 1024 * 1024
"""The largest manifest text berth reads (one file or stdin)."""
MAX_DEPTH = 64
"""The deepest nesting of mappings and sequences a manifest may have (Kubernetes objects
need about 15 levels). Checked before parsing: the parsers recurse per level, and text
nested thousands deep would exhaust the stack (a RecursionError, or a crash in C)."""


def _nesting_depth(text: str, limit: int) -> int:
    """An upper bound of the text's nesting, cheap and without parsing: per line, the block
    depth (indentation over two, plus one level per leading "- " of a compact sequence; none
    inside a flow collection) plus the open flow brackets ([ and {, outside quoted strings).
    Stops early past `limit`."""
    deepest = 0
    flow = 0
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if not stripped.strip():
            continue  # a blank line opens nothing, however many spaces it has
        indent = len(line) - len(stripped)
        dashes = 0
        while stripped.startswith("- "):
            dashes += 1
            stripped = stripped[2:].lstrip(" ")
        at_start = flow
        quote = ""
        for char in stripped:
            if quote:
                if char == quote:
                    quote = ""
            elif char in "\"'":
                quote = char
            elif char in "[{":
                flow += 1
                deepest = max(deepest, flow)
            elif char in "]}":
                flow -= 1
            elif char == "#":
                break
        # Inside a flow collection (JSON, say) indentation means nothing: brackets count.
        block = 0 if at_start > 0 else indent // 2 + dashes
        deepest = max(deepest, block + max(flow, 0))
        if deepest > limit:
            return deepest
    return deepest


def _parse(text: str, source: str) -> Iterator[Any]:
    """Documents of a JSON text (one value) or a YAML stream (any number of documents).

    JSON is tried first when the text looks like it (much faster); YAML, a superset, is the
    fallback, e.g. for JSON-style documents separated by "---". Size and nesting are bounded
    first; numbers too long for any field are an error, not a crash.
    """
    if len(text) > MAX_TEXT_BYTES:
        raise ManifestError(
            f"{source}: too large: {len(text)} bytes (at most {MAX_TEXT_BYTES})", source=source
        )
    if _nesting_depth(text, MAX_DEPTH) > MAX_DEPTH:
        raise ManifestError(
            f"{source}: nested too deeply (more than {MAX_DEPTH} levels of mappings and sequences)",
            source=source,
        )
    try:
        yield from _parse_text(text, source)
    except (ValueError, RecursionError) as e:
        if isinstance(e, ManifestError):
            raise
        # Python refuses to convert integers of 4,300 digits or more (a ValueError from the
        # JSON or YAML parser); nothing in a manifest needs a number that long.
        raise ManifestError(f"{source}: cannot read a value: {e!s:.200}", source=source) from None


def _parse_text(text: str, source: str) -> Iterator[Any]:
    try:
        for doc in _parse_strict(text, source):
            check_unicode(text, doc)
            yield doc
    except StrictTextError as e:
        raise ManifestError(f"{source}: {e}", source=source) from None


def _parse_strict(text: str, source: str) -> Iterator[Any]:
    if text.lstrip()[:1] in ("{", "["):
        try:
            doc = json.loads(text, object_pairs_hook=no_duplicate_keys)
        except json.JSONDecodeError as e:
            if source.endswith(".json"):
                raise ManifestError(
                    f"{source}:{e.lineno}: invalid JSON: {e.msg} "
                    f"(line {e.lineno}, column {e.colno})",
                    source=source,
                ) from None
        else:
            yield doc
            return
    try:
        check_aliases(text)
        yield from yaml.load_all(text, Loader=StrictLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise ManifestError(
            f"{source}{line}: YAML syntax error: {problem}{at}", source=source
        ) from None


def load_manifest_text(text: str, *, source: str = "<string>") -> Manifests:
    loader = ManifestLoader()
    loader.add_text(text, source=source)
    return loader.manifests


def load_manifests(*paths: str | os.PathLike[str]) -> Manifests:
    """Load files (YAML or JSON, any number of documents each) into one Manifests."""
    loader = ManifestLoader()
    for path in paths:
        loader.add_file(path)
    return loader.manifests
