"""Taint-based eviction (upstream pkg/controller/tainteviction), as a pure state machine.

The rules (the seed's "Taint based Evictions", the controller's processPodOnNode):

- Only `NoExecute` taints of the pod's node count.
- A pod that does not tolerate every one of them is evicted at once.
- Each taint is matched by the pod's first toleration that tolerates it (upstream
  GetMatchingTolerations); the pod stays bound for the least `tolerationSeconds` among those
  tolerations (a value <= 0 means at once), and forever when none of them sets it.
- The countdown starts when the pod first became subject to eviction on that node (upstream:
  when the controller scheduled the eviction) and is kept while the pod stays subject to it:
  a toleration changed to a shorter time fires earlier, a longer one later, both counted from
  the same start. Lifting the taints, or a toleration without `tolerationSeconds` covering them,
  cancels it.

Berth adds no default tolerations here: the not-ready / unreachable 300 s tolerations are the
admission step's (DefaultTolerationSeconds), applied when the pod is written. A pod reaches this
controller with the tolerations it has in the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from shared.models import Taint, Toleration

NO_EXECUTE = "NoExecute"
EVICTION_REASON = "TaintManagerEviction"
"""The Event reason upstream records on a pod the controller deletes."""


def no_execute_taints(taints: Iterable[Taint]) -> list[Taint]:
    return [t for t in taints if t.effect == NO_EXECUTE]


def matching_tolerations(
    taints: Sequence[Taint], tolerations: Sequence[Toleration]
) -> tuple[bool, list[Toleration]]:
    """(every taint tolerated, the first toleration tolerating each taint)."""
    used: list[Toleration] = []
    for taint in taints:
        match = next((t for t in tolerations if t.tolerates(taint)), None)
        if match is None:
            return False, []
        used.append(match)
    return True, used


def toleration_time(used: Sequence[Toleration]) -> float | None:
    """How long the used tolerations keep the pod: the least tolerationSeconds (0 when any is
    <= 0), None (forever) when none sets it."""
    least: int | None = None
    for toleration in used:
        seconds = toleration.toleration_seconds
        if seconds is None:
            continue
        if seconds <= 0:
            return 0.0
        least = seconds if least is None else min(least, seconds)
    return None if least is None else float(least)


def taint_text(taint: Taint) -> str:
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the taints of a pod's node mean for it now."""

    delay: float | None
    """None: not subject to eviction; 0: at once; else seconds after the countdown started."""
    reason: str = ""
    """The taint(s) behind it, as an Event message says."""


def verdict(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> Verdict:
    relevant = no_execute_taints(taints)
    if not relevant:
        return Verdict(None)
    tolerated, used = matching_tolerations(relevant, tolerations)
    if not tolerated:
        missing = [t for t in relevant if not any(x.tolerates(t) for x in tolerations)]
        return Verdict(0.0, f"taint {', '.join(taint_text(t) for t in missing)} not tolerated")
    seconds = toleration_time(used)
    if seconds is None:
        return Verdict(None)
    texts = ", ".join(taint_text(t) for t in relevant)
    return Verdict(seconds, f"taint {texts} tolerated for {seconds:g}s")


@dataclass(frozen=True, slots=True)
class Scheduled:
    """A pod's pending eviction."""

    uid: str
    node: str
    started: float
    fires: float
    reason: str


class TaintEvictionQueue:
    """Pending evictions by pod key; `update` is processPodOnNode, `due` what has fired."""

    def __init__(self) -> None:
        self.scheduled: dict[str, Scheduled] = {}

    def update(
        self,
        pod_key: str,
        uid: str,
        node: str,
        taints: Iterable[Taint],
        tolerations: Sequence[Toleration],
        now: float,
    ) -> Scheduled | None:
        """The pod (bound to `node`, whose taints these are) as it is now: schedule, keep,
        move or cancel its eviction. Returns the eviction now pending, if any."""
        decision = verdict(taints, tolerations)
        held = self.scheduled.get(pod_key)
        if held is not None and (held.uid != uid or held.node != node):
            held = None
        if decision.delay is None:
            self.scheduled.pop(pod_key, None)
            return None
        started = now if held is None else held.started
        fires = now if decision.delay == 0 else started + decision.delay
        entry = Scheduled(uid, node, started, fires, decision.reason)
        self.scheduled[pod_key] = entry
        return entry

    def forget(self, pod_key: str) -> None:
        self.scheduled.pop(pod_key, None)

    def due(self, now: float) -> list[tuple[str, Scheduled]]:
        """Evictions whose time has come (removed from the queue)."""
        fired = [(k, s) for k, s in self.scheduled.items() if s.fires <= now]
        for key, _ in fired:
            del self.scheduled[key]
        return sorted(fired, key=lambda item: (item[1].fires, item[0]))

    def next_due(self) -> float | None:
        return min((s.fires for s in self.scheduled.values()), default=None)
