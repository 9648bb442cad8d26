"""The order of the binder's cross-node checks.

Proposals for different nodes arrive on different partitions and run concurrently; their
Redis round trips finish in any order. The cross-node check of a proposal must count every
proposal this binder took before it (the worker decided it with those pods in place), so the
checks run one at a time, in the order the proposals were submitted: a proposal waits for its
turn only around its check (a few hundred microseconds of CPU, no I/O) and everything before
(check-and-reserve, waiting for the view) and after (Permit, Bind) stays concurrent.

    order = CheckOrder()
    ticket = order.take()          # at submission, in arrival order
    ...
    await order.turn(ticket)       # every earlier ticket is done
    check(); assume()              # no await in between
    order.done(ticket)             # also when the proposal ends without a check

A ticket that is never checked (a duplicate, a node-local conflict, an error) must still be
marked done, or every later check would wait for it: `done` is idempotent and the binder calls
it when the proposal finishes, whatever happened.
"""

from __future__ import annotations

import asyncio


class CheckOrder:
    def __init__(self) -> None:
        self._next = 0
        self._low = 0
        """Every ticket below this one is done."""
        self._done_above: set[int] = set()
        """Done tickets above `_low` (their predecessors are not all done yet)."""
        self._waiters: dict[int, asyncio.Future[None]] = {}
        """ticket -> woken when every ticket below it is done."""

    def take(self) -> int:
        ticket = self._next
        self._next += 1
        return ticket

    @property
    def pending(self) -> int:
        """Tickets taken and not done."""
        return self._next - self._low - len(self._done_above)

    def is_turn(self, ticket: int) -> bool:
        return ticket <= self._low

    async def turn(self, ticket: int) -> None:
        """Until every ticket below `ticket` is done."""
        if ticket <= self._low:
            return
        future = self._waiters.get(ticket)
        if future is None or future.done():
            future = self._waiters[ticket] = asyncio.get_running_loop().create_future()
        await future

    def done(self, ticket: int) -> None:
        """`ticket` checked (or never will be). Idempotent."""
        if ticket < self._low or ticket in self._done_above or ticket >= self._next:
            return
        if ticket != self._low:
            self._done_above.add(ticket)
            return
        low = ticket + 1
        while low in self._done_above:
            self._done_above.discard(low)
            low += 1
        self._low = low
        future = self._waiters.pop(low, None)
        if future is not None and not future.done():
            future.set_result(None)
