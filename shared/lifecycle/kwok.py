"""KWOK's pod stage annotations: when a bound pod completes or is deleted.

KWOK's default pod stages read their delay from annotations
(`<stage>.stage.kwok.x-k8s.io/delay`, a Go duration such as "30s" or "1m30s") and, optionally,
the latest delay from `<stage>.stage.kwok.x-k8s.io/jitter-delay`: the stage then fires at a
uniformly random moment between the two (KWOK's jitterDurationMilliseconds is "the latest
delay"). A jitter below the delay is ignored. `pod-complete` ends the pod Succeeded;
`pod-delete` deletes it. A pod with neither keeps running.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass

COMPLETE = "pod-complete"
DELETE = "pod-delete"
_SUFFIX = ".stage.kwok.x-k8s.io/"

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


class StageError(ValueError):
    """An annotation that is not a Go duration (the message names pod and annotation)."""


def delay_annotation(stage: str) -> str:
    return f"{stage}{_SUFFIX}delay"


def jitter_annotation(stage: str) -> str:
    return f"{stage}{_SUFFIX}jitter-delay"


def parse_duration(text: str) -> float:
    """A Go time.ParseDuration string in seconds ("1m30s" -> 90.0; "0" -> 0.0). Negative
    durations are refused (a stage cannot fire in the past)."""
    raw = text.strip()
    if raw == "0":
        return 0.0
    if not raw or raw.startswith("-"):
        raise ValueError(f"invalid duration {text!r}")
    body = raw[1:] if raw.startswith("+") else raw
    total = 0.0
    at = 0
    for match in _PART.finditer(body):
        if match.start() != at:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        at = match.end()
    if at != len(body) or at == 0:
        raise ValueError(f"invalid duration {text!r} (a Go duration such as 30s or 1m30s)")
    return total


@dataclass(frozen=True, slots=True)
class StageDelay:
    """One stage's delay: fires `low` seconds after the pod started, or at a uniformly random
    moment up to `high` when a jitter was given."""

    low: float
    high: float

    def draw(self, rng: random.Random) -> float:
        return self.low if self.high <= self.low else rng.uniform(self.low, self.high)


def stage_delay(annotations: Mapping[str, str], stage: str, pod: str = "") -> StageDelay | None:
    """The stage's delay from the pod's annotations, None when it has no delay annotation.
    StageError naming the pod and annotation when either value is not a duration."""
    raw = annotations.get(delay_annotation(stage))
    if raw is None:
        return None
    low = _parse(raw, pod, delay_annotation(stage))
    jitter = annotations.get(jitter_annotation(stage))
    high = low if jitter is None else _parse(jitter, pod, jitter_annotation(stage))
    return StageDelay(low, max(low, high))


def _parse(raw: str, pod: str, annotation: str) -> float:
    try:
        return parse_duration(raw)
    except ValueError as exc:
        raise StageError(f"pod {pod}: metadata.annotations[{annotation!r}]: {exc}") from None


@dataclass(frozen=True, slots=True)
class StagePlan:
    """What happens to a running pod and when (seconds after it started running)."""

    action: str
    """COMPLETE or DELETE."""
    after: float


def plan(annotations: Mapping[str, str], pod: str, rng: random.Random) -> StagePlan | None:
    """The first stage to fire for a bound pod, or None (the pod keeps running). When both
    stages are annotated the earlier wins (a completed pod is gone from berth's store, and a
    deleted one never completes); on a tie completion wins."""
    choices: list[StagePlan] = []
    for action in (COMPLETE, DELETE):
        delay = stage_delay(annotations, action, pod)
        if delay is not None:
            choices.append(StagePlan(action, delay.draw(rng)))
    if not choices:
        return None
    return min(choices, key=lambda p: p.after)
