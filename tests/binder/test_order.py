"""CheckOrder: cross-node checks one at a time, in ticket order (no servers needed)."""

from __future__ import annotations

import asyncio

import pytest

from services.binder.order import CheckOrder


@pytest.mark.parametrize(
    ("finish_order", "expected"),
    [
        pytest.param([0, 1, 2, 3], [0, 1, 2, 3], id="in-order"),
        pytest.param([3, 2, 1, 0], [0, 1, 2, 3], id="reverse-arrivals"),
        pytest.param([2, 0, 3, 1], [0, 1, 2, 3], id="shuffled"),
    ],
)
async def test_checks_run_in_ticket_order(finish_order: list[int], expected: list[int]):
    """Tickets become ready (their reservation came back) in `finish_order`; the checks
    still run in ticket order."""
    order = CheckOrder()
    tickets = [order.take() for _ in range(4)]
    ready = {t: asyncio.Event() for t in tickets}
    checked: list[int] = []

    async def proposal(ticket: int) -> None:
        await ready[ticket].wait()
        await order.turn(ticket)
        checked.append(ticket)
        order.done(ticket)

    tasks = [asyncio.create_task(proposal(t)) for t in tickets]
    for ticket in finish_order:
        ready[ticket].set()
        await asyncio.sleep(0)
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert checked == expected
    assert order.pending == 0


async def test_a_ticket_done_without_a_check_lets_the_next_one_go():
    order = CheckOrder()
    first, second, third = order.take(), order.take(), order.take()
    waiting = asyncio.create_task(order.turn(third))
    await asyncio.sleep(0)
    order.done(second)  # finished early (e.g. a node-local conflict): third still waits
    await asyncio.sleep(0)
    assert not waiting.done()
    order.done(first)
    await asyncio.wait_for(waiting, 1)
    order.done(first)  # idempotent
    order.done(third)
    assert order.pending == 0
