"""A scheduler worker process: flags/environment -> WorkerConfig, run until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

import redis.asyncio as aioredis

from services.scheduler.worker.config import WorkerConfig, config_from_args
from services.scheduler.worker.service import SchedulerWorker


async def run_worker(config: WorkerConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    redis = aioredis.Redis.from_url(config.redis_url)
    try:
        await SchedulerWorker(redis, config.kafka_bootstrap, config).run(stop)
    finally:
        await redis.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s scheduler %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    config = config_from_args(argv)
    asyncio.run(run_worker(config))
    return 0
