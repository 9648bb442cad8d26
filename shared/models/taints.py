"""Taints (on nodes) and tolerations (on pods), with upstream v1 helper semantics."""

from __future__ import annotations

from dataclasses import dataclass

TAINT_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})


@dataclass(slots=True, kw_only=True)
class Taint:
    key: str = ""
    value: str = ""
    effect: str = ""
    # Epoch seconds; set by the node controller for NoExecute taints.
    time_added: float | None = None


@dataclass(slots=True, kw_only=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Upstream Toleration.ToleratesTaint.

        An empty effect matches every effect; an empty key (only valid with Exists) matches
        every key; Exists ignores the value; Equal (or "") compares values.
        """
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


def tolerates_taint(tolerations: list[Toleration], taint: Taint) -> bool:
    """True when any toleration tolerates the taint (upstream TolerationsTolerateTaint)."""
    return any(t.tolerates(taint) for t in tolerations)
