"""`berth simulate`'s trace: arrivals of pods (KWOK-annotated workloads welcome) and node
events at simulated times, and how a trace is compressed in time.

    apiVersion: berth.dev/v1alpha1
    kind: Trace
    spec:
      duration: 120s            # optional: stop then (default: when every pod has ended)
      events:
      - at: 0s
        pods:                   # pod templates; `replicas` copies named <name>-<i>
        - replicas: 20
          template: {apiVersion: v1, kind: Pod, metadata: {...}, spec: {...}}
      - at: 30s
        fail: {zone: zone-b}    # or {nodes: [n1, n2]}; `notReady: true` for Ready=False
      - at: 90s
        recover: {zone: zone-b}

Time compression (`--speed S`): every time is divided by S: event times, the pods' KWOK stage
delays and tolerationSeconds, and the agent's grace period and heartbeat, so a run keeps the
trace's proportions in 1/S of its wall time. Reported times are simulated seconds again.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from shared.lifecycle.kwok import (
    COMPLETE,
    DELETE,
    delay_annotation,
    jitter_annotation,
    parse_duration,
)
from shared.models import ManifestError, Node, Pod, load_manifest_text, new_uid

ZONE_LABEL = "topology.kubernetes.io/zone"
TRACE_KIND = "Trace"


class TraceError(ValueError):
    """A trace that cannot be run; the message names the file, the event and the field."""


@dataclass(frozen=True, slots=True)
class NodeSelection:
    nodes: tuple[str, ...] = ()
    zone: str = ""

    def resolve(self, nodes: Sequence[Node]) -> list[str]:
        if self.zone:
            return sorted(
                n.metadata.name for n in nodes if n.metadata.labels.get(ZONE_LABEL) == self.zone
            )
        return list(self.nodes)

    def text(self) -> str:
        return f"zone {self.zone}" if self.zone else ", ".join(self.nodes)


@dataclass(frozen=True, slots=True)
class TraceEvent:
    at: float
    kind: str
    """"pods", "fail" or "recover"."""
    pods: tuple[Pod, ...] = ()
    nodes: NodeSelection = field(default_factory=NodeSelection)
    not_ready: bool = False

    def text(self) -> str:
        if self.kind == "pods":
            return f"{len(self.pods)} pods arrive"
        return f"{self.kind} {self.nodes.text()}"


@dataclass(frozen=True, slots=True)
class Trace:
    events: tuple[TraceEvent, ...]
    duration: float | None = None

    @property
    def pods(self) -> list[Pod]:
        return [p for e in self.events for p in e.pods]

    def scaled(self, speed: float) -> Trace:
        """Every time divided by `speed` (see the module docstring)."""
        if speed == 1:
            return self
        events = tuple(
            TraceEvent(
                e.at / speed,
                e.kind,
                tuple(scale_pod(p, speed) for p in e.pods),
                e.nodes,
                e.not_ready,
            )
            for e in self.events
        )
        return Trace(events, None if self.duration is None else self.duration / speed)


def scale_pod(pod: Pod, speed: float) -> Pod:
    out = copy.deepcopy(pod)
    notes = out.metadata.annotations
    for stage in (COMPLETE, DELETE):
        for name in (delay_annotation(stage), jitter_annotation(stage)):
            if name in notes:
                notes[name] = f"{parse_duration(notes[name]) / speed:.3f}s"
    for toleration in out.spec.tolerations:
        if toleration.toleration_seconds is not None and toleration.toleration_seconds > 0:
            toleration.toleration_seconds = max(1, math.ceil(toleration.toleration_seconds / speed))
    return out


def is_trace(doc: Any) -> bool:
    return isinstance(doc, Mapping) and doc.get("kind") == TRACE_KIND


def parse_trace(doc: Mapping[str, Any], source: str) -> Trace:
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        raise TraceError(f"{source}: Trace: spec: expected a map")
    raw_events = spec.get("events")
    if not isinstance(raw_events, list) or not raw_events:
        raise TraceError(f"{source}: Trace: spec.events: expected a non-empty list")
    duration = None
    if spec.get("duration") is not None:
        duration = _time(spec["duration"], f"{source}: Trace: spec.duration")
    events = [_event(raw, f"{source}: Trace: spec.events[{i}]") for i, raw in enumerate(raw_events)]
    names = [p.key for e in events for p in e.pods]
    duplicates = sorted({k for k in names if names.count(k) > 1})
    if duplicates:
        raise TraceError(f"{source}: Trace: pod {duplicates[0]} arrives more than once")
    return Trace(tuple(sorted(events, key=lambda e: e.at)), duration)


def _time(value: Any, where: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        try:
            seconds = parse_duration(str(value))
        except ValueError as exc:
            raise TraceError(f"{where}: {exc}") from None
    if seconds < 0:
        raise TraceError(f"{where}: must not be negative")
    return seconds


def _event(raw: Any, where: str) -> TraceEvent:
    if not isinstance(raw, Mapping):
        raise TraceError(f"{where}: expected a map")
    if "at" not in raw:
        raise TraceError(f"{where}.at: required")
    at = _time(raw["at"], f"{where}.at")
    kinds = [k for k in ("pods", "fail", "recover") if k in raw]
    if len(kinds) != 1:
        raise TraceError(f"{where}: exactly one of pods, fail, recover (got {kinds or 'none'})")
    kind = kinds[0]
    if kind == "pods":
        return TraceEvent(at, kind, tuple(_pods(raw["pods"], f"{where}.pods")))
    selection = raw[kind]
    if not isinstance(selection, Mapping):
        raise TraceError(f"{where}.{kind}: expected {{zone: Z}} or {{nodes: [...]}}")
    zone = str(selection.get("zone") or "")
    nodes = selection.get("nodes") or []
    if bool(zone) == bool(nodes) or not isinstance(nodes, list):
        raise TraceError(f"{where}.{kind}: give either zone or a list of nodes")
    return TraceEvent(
        at,
        kind,
        nodes=NodeSelection(tuple(str(n) for n in nodes), zone),
        not_ready=bool(selection.get("notReady", False)),
    )


def _pods(raw: Any, where: str) -> list[Pod]:
    if not isinstance(raw, list):
        raise TraceError(f"{where}: expected a list of {{replicas, template}}")
    out: list[Pod] = []
    for i, item in enumerate(raw):
        here = f"{where}[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("template"), Mapping):
            raise TraceError(f"{here}.template: expected a Pod manifest")
        replicas = item.get("replicas", 1)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
            raise TraceError(f"{here}.replicas: expected a positive integer")
        try:
            loaded = load_manifest_text(yaml.safe_dump(dict(item["template"])), source=here)
        except ManifestError as exc:
            raise TraceError(str(exc)) from None
        if len(loaded.pods) != 1 or len(list(loaded.objects())) != 1:
            raise TraceError(f"{here}.template: expected one Pod")
        (template,) = loaded.pods
        for r in range(replicas):
            pod = copy.deepcopy(template)
            pod.metadata.uid = new_uid()  # each copy is a pod of its own
            if replicas > 1:
                pod.metadata.name = f"{template.metadata.name}-{r}"
            out.append(pod)
    return out


def split_files(paths: Sequence[str]) -> tuple[list[str], Trace]:
    """The cluster files and the one trace among `paths` (the file whose document is a
    Trace)."""
    cluster: list[str] = []
    traces: list[Trace] = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as handle:
                docs = [d for d in yaml.safe_load_all(handle) if d is not None]
        except OSError as exc:
            raise TraceError(f"{path}: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            raise TraceError(f"{path}: not YAML: {exc}") from None
        found = [d for d in docs if is_trace(d)]
        if found and len(found) != len(docs):
            raise TraceError(f"{path}: a trace file holds the Trace alone")
        if found:
            traces.extend(parse_trace(d, path) for d in found)
        else:
            cluster.append(path)
    if len(traces) != 1:
        raise TraceError(f"expected exactly one Trace among the files (found {len(traces)})")
    return cluster, traces[0]
