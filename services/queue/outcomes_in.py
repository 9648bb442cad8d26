"""What the queue takes from `berth.outcomes`: each consumed record's outcomes (one, or a
batch), checked one by one, with where each came from for its dead letter."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from aiokafka import ConsumerRecord

from services.queue.keys import InvalidTenantError
from shared.messaging.kafka import refusal
from shared.messaging.message_auth import Verifier
from shared.messaging.messages import DeadLetter, Outcome
from shared.messaging.wire import BatchItem, MessageError, checked


@dataclass(frozen=True, slots=True)
class Source:
    """A consumed record, and which of its outcomes (None: the record as a whole)."""

    record: ConsumerRecord
    item: BatchItem | None = None

    @property
    def headers(self) -> Sequence[tuple[str, bytes]]:
        return self.item.headers if self.item is not None else (self.record.headers or ())

    def dead_letter(self, service: str, error: str) -> DeadLetter:
        """The record's dead letter; for one bad outcome of a batch, that outcome alone."""
        payload = None if self.item is None else self.item.alone(Outcome.TYPE)
        return DeadLetter.of_record(service, self.record, error, payload)


async def read_outcomes(
    records: Sequence[ConsumerRecord],
    topic: str,
    verifier: Verifier | None,
    dead_letter: Callable[[Source, str], Awaitable[None]],
) -> list[tuple[Source, Outcome]]:
    """The usable outcomes of `records` (of `topic`), in order; the rest to `dead_letter`:
    a record that is not authentic or not outcomes as a whole, a bad outcome of a batch
    alone (the others are kept)."""
    out: list[tuple[Source, Outcome]] = []
    for record in records:
        refused = refusal(verifier, record)
        if refused:
            await dead_letter(Source(record), refused)
            continue
        if record.topic != topic:
            await dead_letter(Source(record), f"unexpected record on topic {record.topic}")
            continue
        try:
            items = Outcome.items_of(record.value or b"", record.headers or ())
        except MessageError as e:
            await dead_letter(Source(record), str(e))
            continue
        for item in items:
            try:
                outcome = Outcome.from_body(checked(item))
            except (MessageError, InvalidTenantError) as e:
                await dead_letter(Source(record, item), str(e))
                continue
            out.append((Source(record, item), outcome))
    return out
