"""A scheduler worker process: flags/environment -> WorkerConfig, run until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import redis.asyncio as aioredis

from services.scheduler.config import WorkerConfig, config_from_args
from services.scheduler.service import SchedulerWorker, WorkerFailedError
from shared.health import HealthServer
from shared.tracing import TracingConfig, setup_tracing

ENV_PROFILE_DIR = "BERTH_PROFILE_DIR"
"""When set, a service process writes a cProfile dump there when it stops."""


@contextlib.contextmanager
def profiled(name: str) -> Iterator[None]:
    """cProfile the block when $BERTH_PROFILE_DIR is set (dump `<dir>/<name>-<pid>.prof`)."""
    directory = os.environ.get(ENV_PROFILE_DIR)
    if not directory:
        yield
        return
    import cProfile

    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        Path(directory).mkdir(parents=True, exist_ok=True)
        profile.dump_stats(str(Path(directory) / f"{name}-{os.getpid()}.prof"))


async def run_worker(config: WorkerConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    tracing = setup_tracing(TracingConfig.from_env("berth-scheduler", os.environ))
    health = HealthServer.from_env(os.environ)
    await health.start()
    redis = aioredis.Redis.from_url(config.redis_url)
    try:
        await SchedulerWorker(redis, config.kafka_bootstrap, config).run(stop, health)
    finally:
        await redis.aclose()
        await health.stop()
        await tracing.ashutdown()


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s scheduler %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    config = config_from_args(argv)
    with profiled(f"worker-{config.worker_id}"):
        try:
            asyncio.run(run_worker(config))
        except WorkerFailedError:
            logging.getLogger(__name__).exception("worker failed")
            return 1
    return 0
