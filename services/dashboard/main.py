"""`python -m services.dashboard`: the dashboard, configured from the environment
(shared.runtime.env.StackSettings for the servers, BERTH_DASHBOARD_HOST / BERTH_DASHBOARD_PORT for
its own address, BERTH_TOKENS_FILE for the API front door's tokens), until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from services.dashboard.app import DashboardServer, make_app
from services.dashboard.auth import Tokens, TokensError
from services.dashboard.config import DashboardConfig
from services.dashboard.data import DashboardData
from services.dashboard.feed import BindingFeed
from services.dashboard.kube_auth import KubeAuthenticator
from shared.observability.health import HealthServer
from shared.runtime.env import StackError, StackSettings
from shared.runtime.redisconn import open_redis
from shared.runtime.service import ServiceRunner, ready_until_stopped


def read_tokens(config: DashboardConfig) -> Tokens | None:
    """The tokens file's tokens (StackError, one line, when it cannot be used)."""
    if not config.tokens_file:
        return None
    try:
        return Tokens(config.tokens_file)
    except (TokensError, OSError) as exc:
        raise StackError(f"tokens file: {exc}") from None


async def serve(
    settings: StackSettings, config: DashboardConfig, stop: asyncio.Event, health: HealthServer
) -> None:
    tokens = read_tokens(config)
    redis = await open_redis(settings.redis_url, settings.redis_security)
    data = DashboardData(redis, settings, refresh_seconds=config.refresh_seconds)
    feed = BindingFeed(settings.kafka_bootstrap, settings.topics, settings.kafka_security)
    api = settings.kube_api("berth-dashboard") if settings.kube else None
    kube_auth = None
    if api is not None:

        async def namespaces() -> list[str]:
            return sorted(o.metadata.name for o in await data.store.list("Namespace"))

        kube_auth = KubeAuthenticator(api, namespaces)
    app = make_app(data, feed, tokens, kube_auth, tenant_node_name=config.tenant_node_name)
    server = DashboardServer(app, config.host, config.port)

    async def start() -> None:
        await feed.start()
        await server.start()

    async def drain() -> None:
        await server.stop()
        await feed.stop()
        await redis.aclose()
        if api is not None:
            await api.close()

    await ready_until_stopped(health, stop, start, drain)


def main(argv: Sequence[str] | None = None) -> int:
    runner = ServiceRunner.from_argv("dashboard", argv)
    env = runner.configured(lambda: runner.environment(DashboardConfig))
    settings = runner.configured(lambda: StackSettings.from_env(env))
    config = runner.configured(lambda: DashboardConfig.from_env(env))
    return runner.main(lambda stop, health: serve(settings, config, stop, health))
