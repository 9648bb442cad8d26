"""Kafka topic names, apart from the clients (shared.messaging.kafka) so that settings and readers
of the store import them without loading aiokafka."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class Topics:
    """Topic names; tests use `suffixed()` so that each test has its own topics.

    Kafka carries work only: cluster facts (pods, nodes, PodGroups) travel once, on the
    store's change stream (shared.store), which the queue and the views follow."""

    schedule: str = "berth.schedule"
    """Schedule requests from the queue to the scheduler workers."""
    proposals: str = "berth.proposals"
    """Worker proposals to the binder, keyed by node name."""
    outcomes: str = "berth.outcomes"
    """Attempt outcomes back to the queue, keyed by pod uid."""
    dlq: str = "berth.dlq"
    """Messages that could not be decoded or were invalid, with the error."""

    def suffixed(self, suffix: str) -> Topics:
        return Topics(**{f.name: f"{getattr(self, f.name)}.{suffix}" for f in fields(self)})

    def all(self) -> tuple[str, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))
