"""Node-pressure eviction (the kubelet's eviction manager), simulated from declared usage.

Usage: a pod's `berth.dev/memory-usage`, `berth.dev/ephemeral-storage-usage` and
`berth.dev/pids` annotations (quantities), else what it requests (memory, ephemeral-storage;
0 PIDs). Signals per node (the seed's table):
memory.available = capacity[memory] - Σ memory usage; nodefs.available = capacity
[ephemeral-storage] - Σ storage usage; pid.available = the node's `berth.dev/max-pids`
annotation (default 32768) - Σ PIDs.

Thresholds ("memory.available<500Mi", "nodefs.available<10%": a percentage of capacity) come
from a KubeletConfiguration-like file: evictionHard, evictionSoft, evictionSoftGracePeriod,
evictionMinimumReclaim, evictionPressureTransitionPeriod. A threshold is met when available <
quantity; once met it stays met until available >= quantity + its minimum reclaim. A hard
threshold met evicts at once; a soft one only once met for its grace period. The node
conditions (MemoryPressure, DiskPressure, PIDPressure) follow every threshold met, grace
or not, and stay True for the transition period after the last time one was met. One pod is
evicted per pass (the kubelet evicts one pod per housekeeping interval), ranked:

- memory: usage above requests first, then lower priority, then larger usage - requests;
- nodefs: the same with ephemeral-storage;
- PIDs (no requests): lower priority, then more PIDs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.models import Node, Pod, pod_requests, priority_of
from shared.models.quantity import int_value, parse_quantity

MEMORY = "memory.available"
NODEFS = "nodefs.available"
PIDS = "pid.available"
SIGNALS = {MEMORY: "memory", NODEFS: "ephemeral-storage", PIDS: "pids"}
CONDITION_OF = {MEMORY: "MemoryPressure", NODEFS: "DiskPressure", PIDS: "PIDPressure"}
UNSIMULATED = frozenset(
    {
        "imagefs.available",
        "imagefs.inodesFree",
        "nodefs.inodesFree",
        "containerfs.available",
        "containerfs.inodesFree",
        "allocatableMemory.available",
    }
)
"""Signals the kubelet knows and berth does not simulate: accepted in a configuration, and
never met."""
USAGE_ANNOTATIONS = {
    "memory": "berth.dev/memory-usage",
    "ephemeral-storage": "berth.dev/ephemeral-storage-usage",
    "pids": "berth.dev/pids",
}
MAX_PIDS_ANNOTATION = "berth.dev/max-pids"
DEFAULT_MAX_PIDS = 32768
DEFAULT_TRANSITION_SECONDS = 300.0
DEFAULT_HARD = {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "imagefs.available": "15%",
    "nodefs.inodesFree": "5%",
}
"""The kubelet's hard thresholds when evictionHard is not set at all (set, it replaces them
whole: the others are not inherited)."""
_THRESHOLD = re.compile(r"^\s*([a-z.]+)\s*<\s*(\S+)\s*$")


class PressureConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Threshold:
    signal: str
    quantity: int = 0
    percentage: float | None = None
    hard: bool = True
    grace: float = 0.0
    min_reclaim: int = 0

    def value(self, capacity: int) -> int:
        if self.percentage is not None:
            return int(capacity * self.percentage)
        return self.quantity

    def text(self) -> str:
        amount = (
            f"{self.percentage * 100:g}%" if self.percentage is not None else str(self.quantity)
        )
        return f"{self.signal}<{amount}"


def parse_threshold(signal: str, value: str, where: str) -> Threshold:
    if signal not in SIGNALS and signal not in UNSIMULATED:
        raise PressureConfigError(
            f"{where}: unknown signal {signal!r} (one of {', '.join(SIGNALS)})"
        )
    text = str(value).strip()
    if text.endswith("%"):
        try:
            pct = float(text[:-1]) / 100
        except ValueError:
            raise PressureConfigError(f"{where}: {text!r} is not a percentage") from None
        if not 0 <= pct <= 1:
            raise PressureConfigError(f"{where}: {text!r} is not between 0% and 100%")
        return Threshold(signal, percentage=pct)
    try:
        return Threshold(signal, quantity=int_value(parse_quantity(text)))
    except ValueError:
        raise PressureConfigError(f"{where}: {text!r} is not a quantity") from None


def parse_flag(flag: str, where: str = "eviction-hard") -> Threshold:
    """ "memory.available<500Mi" (the --eviction-hard form)."""
    match = _THRESHOLD.match(flag)
    if match is None:
        raise PressureConfigError(f"{where}: {flag!r} is not SIGNAL<QUANTITY")
    return parse_threshold(match.group(1), match.group(2), where)


@dataclass(frozen=True, slots=True)
class PressureConfig:
    thresholds: tuple[Threshold, ...] = ()
    transition_seconds: float = DEFAULT_TRANSITION_SECONDS

    @classmethod
    def from_kubelet_config(cls, doc: Mapping[str, Any]) -> PressureConfig:
        from shared.lifecycle.kwok import parse_duration

        def section(name: str) -> Mapping[str, Any]:
            value = doc.get(name) or {}
            if not isinstance(value, Mapping):
                raise PressureConfigError(f"{name}: expected a map of signal to value")
            return value

        reclaim: dict[str, int] = {}
        for signal, value in section("evictionMinimumReclaim").items():
            parsed = parse_threshold(signal, value, f"evictionMinimumReclaim[{signal}]")
            reclaim[signal] = parsed.quantity
        graces: dict[str, float] = {}
        for signal, value in section("evictionSoftGracePeriod").items():
            try:
                graces[signal] = parse_duration(str(value))
            except ValueError as exc:
                raise PressureConfigError(f"evictionSoftGracePeriod[{signal}]: {exc}") from None
        out: list[Threshold] = []
        hard = section("evictionHard") if "evictionHard" in doc else DEFAULT_HARD
        for signal, value in hard.items():
            t = parse_threshold(signal, value, f"evictionHard[{signal}]")
            out.append(_with(t, hard=True, min_reclaim=reclaim.get(signal, 0)))
        for signal, value in section("evictionSoft").items():
            t = parse_threshold(signal, value, f"evictionSoft[{signal}]")
            if signal not in graces:
                raise PressureConfigError(
                    f"evictionSoft[{signal}]: needs evictionSoftGracePeriod[{signal}]"
                )
            out.append(
                _with(t, hard=False, grace=graces[signal], min_reclaim=reclaim.get(signal, 0))
            )
        transition = DEFAULT_TRANSITION_SECONDS
        if doc.get("evictionPressureTransitionPeriod"):
            raw = str(doc["evictionPressureTransitionPeriod"])
            try:
                transition = parse_duration(raw)
            except ValueError as exc:
                raise PressureConfigError(f"evictionPressureTransitionPeriod: {exc}") from None
        return cls(tuple(out), transition)


def _with(t: Threshold, **changes: Any) -> Threshold:
    return Threshold(
        t.signal,
        t.quantity,
        t.percentage,
        changes.get("hard", t.hard),
        changes.get("grace", t.grace),
        changes.get("min_reclaim", t.min_reclaim),
    )


# ---------------------------------------------------------------------------- usage
def usage_of(pod: Pod, resource: str) -> int:
    """The pod's declared usage of `resource` (memory, ephemeral-storage, pids), else its
    request (0 PIDs)."""
    raw = pod.metadata.annotations.get(USAGE_ANNOTATIONS[resource])
    if raw is not None:
        try:
            return int_value(parse_quantity(raw))
        except ValueError:
            pass
    if resource == "pids":
        return 0
    return pod_requests(pod).get(resource, 0)


@dataclass(frozen=True, slots=True)
class Observation:
    available: int
    capacity: int


def observe(node: Node, pods: Iterable[Pod]) -> dict[str, Observation]:
    bound = list(pods)
    out: dict[str, Observation] = {}
    for signal, resource in SIGNALS.items():
        if resource == "pids":
            try:
                capacity = int(node.metadata.annotations.get(MAX_PIDS_ANNOTATION, DEFAULT_MAX_PIDS))
            except ValueError:
                capacity = DEFAULT_MAX_PIDS
        else:
            capacity = node.status.capacity.get(resource, 0)
            if not capacity:
                continue
        used = sum(usage_of(p, resource) for p in bound)
        out[signal] = Observation(capacity - used, capacity)
    return out


# ---------------------------------------------------------------------------- ranking
def rank(pods: Sequence[Pod], signal: str) -> list[Pod]:
    """The eviction order for `signal` (first = evicted first)."""
    resource = SIGNALS[signal]
    if resource == "pids":
        return sorted(pods, key=lambda p: (priority_of(p), -usage_of(p, "pids"), p.key))

    def key(pod: Pod) -> tuple[int, int, int, str]:
        used = usage_of(pod, resource)
        requested = pod_requests(pod).get(resource, 0)
        exceeds = used > requested
        return (0 if exceeds else 1, priority_of(pod), -(used - requested), pod.key)

    return sorted(pods, key=key)


# ---------------------------------------------------------------------------- manager
@dataclass
class NodePressure:
    """What the eviction manager remembers of one node between passes."""

    first_met: dict[Threshold, float] = field(default_factory=dict)
    last_met: dict[str, float] = field(default_factory=dict)
    """condition type -> the last time one of its thresholds was met."""


@dataclass(frozen=True, slots=True)
class Decision:
    conditions: dict[str, bool]
    """MemoryPressure / DiskPressure / PIDPressure -> True or False."""
    victim: Pod | None = None
    threshold: Threshold | None = None
    message: str = ""


def decide(
    config: PressureConfig, state: NodePressure, node: Node, pods: Sequence[Pod], now: float
) -> Decision:
    observations = observe(node, pods)
    met: list[Threshold] = []
    for threshold in config.thresholds:
        seen = observations.get(threshold.signal)
        if seen is None:
            continue
        value = threshold.value(seen.capacity)
        was_met = threshold in state.first_met
        limit = value + threshold.min_reclaim if was_met else value
        if seen.available < limit:
            met.append(threshold)
            state.first_met.setdefault(threshold, now)
            state.last_met[CONDITION_OF[threshold.signal]] = now
        else:
            state.first_met.pop(threshold, None)
    conditions = {
        kind: now - state.last_met[kind] < config.transition_seconds
        if kind in state.last_met
        else False
        for kind in sorted(set(CONDITION_OF.values()))
    }
    for kind in conditions:
        if met and any(CONDITION_OF[t.signal] == kind for t in met):
            conditions[kind] = True
    firing = [t for t in met if t.hard or now - state.first_met[t] >= t.grace]
    for threshold in firing:
        order = rank(pods, threshold.signal)
        if not order:
            continue
        seen = observations[threshold.signal]
        resource = SIGNALS[threshold.signal]
        victim = order[0]
        message = (
            f"The node was low on resource: {resource}. Threshold quantity: "
            f"{threshold.value(seen.capacity)}, available: {seen.available}. "
            f"Pod {victim.key} was using {usage_of(victim, resource)}, request is "
            f"{pod_requests(victim).get(resource, 0)}."
        )
        return Decision(conditions, victim, threshold, message)
    return Decision(conditions)
