"""`python -m services.binder`: one binder replica, configured from the environment
(shared.runtime.env.StackSettings), until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from services.binder.config import BinderConfig
from services.binder.kube_api import KubeWriter
from services.binder.service import BinderService
from shared.observability.health import HealthServer
from shared.runtime.env import REDIS_CONNECTIONS, StackSettings
from shared.runtime.redisconn import connect
from shared.runtime.service import ServiceRunner, ready_until_stopped, wait_for_servers


async def serve(
    settings: StackSettings, name: str, stop: asyncio.Event, health: HealthServer
) -> None:
    config = BinderConfig(
        cluster=settings.cluster,
        key_prefix=settings.store_prefix,
        topics=settings.topics,
        scheduler_config=settings.scheduler_config(),
        service_name=name or "binder",
        queue_key_prefix=settings.queue_prefix,
        group_id=settings.group_id("binder"),
        consumer_options=settings.consumer_options(),
    )
    if settings.ordered:
        # Proposals checked concurrently may be checked out of the order they were decided
        # in (the cross-node checks then see a different cluster than the worker did).
        config = replace(config, max_in_flight=1)
    redis = connect(settings.redis_url, settings.redis_security, max_connections=REDIS_CONNECTIONS)
    api = settings.kube_api(f"berth-{config.service_name}") if settings.kube else None
    kube = None if api is None else KubeWriter(api, config.service_name)
    service = BinderService(
        redis,
        settings.kafka_bootstrap,
        config,
        kafka_security=settings.kafka_security,
        kube=kube,
    )

    async def start() -> None:
        if await wait_for_servers(redis, settings, stop, "binder"):
            await service.start()

    async def drain() -> None:
        await service.stop()
        await redis.aclose()
        if api is not None:
            await api.close()

    await ready_until_stopped(health, stop, start, drain)


def main(argv: Sequence[str] | None = None) -> int:
    runner = ServiceRunner.from_argv("binder", argv)
    settings = runner.configured(lambda: StackSettings.from_env(runner.environment()))
    return runner.main(lambda stop, health: serve(settings, runner.name, stop, health))
