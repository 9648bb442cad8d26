"""`wait_until_settled` (what `berth run` and the benches wait with), on the session's Redis:
while the store keeps changing it does not count every pending pod at each poll (that count
reads a hash entry per pod and ran beside the services a bench measures), and it still
settles only after `quiet_seconds` without a change."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

import pytest

import cli.run
from cli.client import StackClient
from cli.run import Progress, wait_until_settled
from cli.servers import DevServers
from shared.models import Pod
from tests.builders import make_node, make_pod

QUIET = 0.6
MOVING = 1.2


async def _keep_changing(client: StackClient, seconds: float) -> float:
    """Relabel a node every 50 ms for `seconds`; returns when the last change was made."""
    started = time.monotonic()
    turn = 0
    last = started
    while time.monotonic() - started < seconds:
        turn += 1
        await client.store.apply([make_node("n1").label("turn", str(turn)).obj()])
        last = time.monotonic()
        await asyncio.sleep(0.05)
    return last


@pytest.mark.parametrize("watched", [False, True], ids=["bench", "progress-shown"])
async def test_a_moving_store_is_not_counted_pod_by_pod_and_settles_after_the_quiet(
    dev_servers: DevServers, monkeypatch: pytest.MonkeyPatch, watched: bool
) -> None:
    counted: list[float] = []
    real = cli.run.pending_progress

    async def counting(
        client: StackClient, pending: Mapping[str, Pod], names: frozenset[str]
    ) -> tuple[Progress, int]:
        counted.append(time.monotonic())
        return await real(client, pending, names)

    monkeypatch.setattr(cli.run, "pending_progress", counting)
    shown: list[Progress] = []
    async with StackClient(dev_servers.isolated_settings()) as client:
        pod = make_pod("p").node("n1").obj()  # bound as applied: nothing waits
        await client.store.apply([make_node("n1").obj(), pod])
        changing = asyncio.create_task(_keep_changing(client, MOVING))
        started = time.monotonic()
        settled = await wait_until_settled(
            client,
            {pod.key: pod},
            seconds=MOVING + 5 * QUIET,
            quiet_seconds=QUIET,
            on_progress=shown.append if watched else None,
        )
        ended = time.monotonic()
        last_change = await changing
    assert settled
    assert ended - last_change >= QUIET  # a change restarts the quiet period
    while_moving = [at for at in counted if at < last_change]
    if watched:
        # Shown progress is counted at every poll (about five a second).
        assert len(shown) == len(counted)
        assert len(while_moving) >= int(MOVING / 0.2) - 1
    else:
        # The first poll counts; then a moved resourceVersion is enough to go on waiting.
        assert len(while_moving) <= 2, (len(while_moving), last_change - started)
        assert counted[-1] > last_change  # the quiet is still judged on a full count
