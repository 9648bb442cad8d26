"""Stopping background tasks without cancelling them in the middle of a Redis command.

Cancelling a task blocked in a redis-py asyncio command can leave the task hanging in the
client's disconnect path; the binder's loops therefore watch a stop event and are only
cancelled as a last resort.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

log = logging.getLogger(__name__)


async def finish(task: asyncio.Task[None], seconds: float) -> None:
    """Wait up to `seconds` for `task` (already told to stop), then cancel it and wait one
    more second; never raises and never waits longer."""
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=1.0)
        if not done:
            log.warning("task %s did not stop", task.get_name())
            return
    if not task.cancelled():
        with contextlib.suppress(BaseException):
            task.result()
