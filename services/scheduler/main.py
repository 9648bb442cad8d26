"""A scheduler worker process: flags/environment -> WorkerConfig, run until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from services.scheduler.config import WorkerConfig, WorkerSettings, config_from_args
from services.scheduler.service import SchedulerWorker, WorkerFailedError
from shared.observability.health import HealthServer
from shared.runtime.redisconn import connect
from shared.runtime.service import ServiceRunner, wait_for_servers

log = logging.getLogger(__name__)


async def serve(config: WorkerConfig, stop: asyncio.Event, health: HealthServer) -> None:
    redis = connect(config.redis_url, config.redis_security)
    try:
        if not await wait_for_servers(redis, config, stop, "scheduler"):
            return
        await SchedulerWorker(redis, config.kafka_bootstrap, config).run(stop, health)
    finally:
        await redis.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    reader = ServiceRunner("scheduler")
    env = reader.configured(lambda: reader.environment(WorkerSettings))
    config = reader.configured(lambda: config_from_args(argv, env))
    runner = ServiceRunner("scheduler", f"worker-{config.worker_id}")
    try:
        return runner.main(lambda stop, health: serve(config, stop, health))
    except WorkerFailedError:
        log.exception("worker failed")
        return 1
