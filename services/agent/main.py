"""`python -m services.agent`: one node agent replica, configured from the environment
(shared.runtime.env.StackSettings and services/agent/config.py), until SIGTERM/SIGINT. Standalone
mode only: in Kubernetes mode the kubelets and controllers of the real cluster do this."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from services.agent.config import AgentConfig
from services.agent.service import AgentService
from shared.observability.health import HealthServer
from shared.runtime.env import REDIS_CONNECTIONS, StackSettings
from shared.runtime.redisconn import connect
from shared.runtime.service import ServiceRunner, ready_until_stopped, wait_for_servers


async def serve(
    settings: StackSettings, config: AgentConfig, stop: asyncio.Event, health: HealthServer
) -> None:
    redis = connect(settings.redis_url, settings.redis_security, max_connections=REDIS_CONNECTIONS)
    service = AgentService(redis, config)

    async def start() -> None:
        if await wait_for_servers(redis, settings, stop, "agent"):
            await service.start()

    async def drain() -> None:
        await service.stop()
        await redis.aclose()

    await ready_until_stopped(health, stop, start, drain)


def main(argv: Sequence[str] | None = None) -> int:
    runner = ServiceRunner.from_argv("agent", argv)
    env = runner.configured(lambda: runner.environment(AgentConfig))
    settings = runner.configured(lambda: StackSettings.from_env(env))
    config = runner.configured(
        lambda: AgentConfig.from_env(
            env,
            cluster=settings.cluster,
            key_prefix=settings.store_prefix,
            name=runner.name or f"agent-{os.getpid()}",
        )
    )
    return runner.main(lambda stop, health: serve(settings, config, stop, health))
