"""Weighted round-robin across tenants (fair share and quotas come later)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")


class WeightedRoundRobin:
    """Smooth weighted round-robin (as nginx does): with weights 3 and 1 the order is
    A A B A, not A A A B, so no tenant waits a whole turn of the others."""

    def __init__(self, weight: Callable[[str], int]) -> None:
        self.weight = weight

    def order(self, tenants: Sequence[str], picks: int) -> list[str]:
        """The first `picks` turns among `tenants`."""
        current = dict.fromkeys(tenants, 0)
        out: list[str] = []
        if not tenants:
            return out
        total = sum(self.weight(t) for t in tenants)
        for _ in range(picks):
            for tenant in tenants:
                current[tenant] += self.weight(tenant)
            chosen = max(tenants, key=lambda t: current[t])
            current[chosen] -= total
            out.append(chosen)
        return out

    def interleave(self, queues: Mapping[str, Sequence[T]]) -> list[tuple[str, T]]:
        """Every item of every tenant, tenants taking turns by weight."""
        remaining = {tenant: list(items) for tenant, items in queues.items() if items}
        current = dict.fromkeys(remaining, 0)
        out: list[tuple[str, T]] = []
        while remaining:
            active = sorted(remaining)
            total = sum(self.weight(t) for t in active)
            for tenant in active:
                current[tenant] += self.weight(tenant)
            chosen = max(active, key=lambda t: current[t])
            current[chosen] -= total
            out.append((chosen, remaining[chosen].pop(0)))
            if not remaining[chosen]:
                del remaining[chosen]
                del current[chosen]
        return out
