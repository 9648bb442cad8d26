"""`python -m services.adapter`: one adapter replica, configured from the environment
(shared.runtime.env.StackSettings; BERTH_KUBE names the API), until SIGTERM/SIGINT. Exits with 1
when it loses the Lease (its supervisor starts it again as a candidate)."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Sequence

from services.adapter.config import AdapterSettings
from services.adapter.leader import LeaseSettings
from services.adapter.service import AdapterConfig, AdapterService
from shared.observability.health import HealthServer
from shared.runtime.env import StackError, StackSettings, profile_refusal
from shared.runtime.redisconn import connect
from shared.runtime.service import ServiceRunner, wait_for_servers


async def serve(
    settings: StackSettings,
    own: AdapterSettings,
    name: str,
    stop: asyncio.Event,
    health: HealthServer,
) -> None:
    if not settings.kube:
        raise StackError("the adapter needs BERTH_KUBE (a kubeconfig path, or in-cluster)")
    identity = f"{socket.gethostname()}_{name or 'adapter'}_{uuid.uuid4().hex[:8]}"
    scheduler_names = settings.scheduler_names()
    refusal = profile_refusal(scheduler_names, settings.take_default_scheduler)
    if refusal:
        raise StackError(refusal)
    election = settings.scheduler_config().leader_election
    lease = LeaseSettings.from_config(
        election,
        namespace=own.lease_namespace,
        name=own.lease_name,
    )
    config = AdapterConfig(
        identity=identity,
        leader_elect=election.leader_elect,
        scheduler_names=scheduler_names,
        cluster=settings.cluster,
        key_prefix=settings.store_prefix,
        queue_prefix=settings.queue_prefix,
        topics=settings.topics,
        group_id=settings.group_id("adapter"),
        lease=lease,
        consumer_options=settings.consumer_options(),
        kafka_security=settings.kafka_security,
    )
    api = settings.kube_api("berth-adapter")
    redis = connect(settings.redis_url, settings.redis_security)
    service = AdapterService(redis, settings.kafka_bootstrap, api, config)
    try:
        answered = await wait_for_servers(redis, settings, stop, "adapter")
        if not answered:
            return
        # A standby replica is healthy and ready: it is doing its job (waiting for the Lease).
        health.set_ready(True)
        await service.run(stop)
    finally:
        health.set_ready(False, "stopping")
        await redis.aclose()
        await api.close()


def main(argv: Sequence[str] | None = None) -> int:
    runner = ServiceRunner.from_argv("adapter", argv)
    env = runner.configured(lambda: runner.environment(AdapterSettings))
    settings = runner.configured(lambda: StackSettings.from_env(env))
    own = runner.configured(lambda: AdapterSettings.from_env(env))
    return runner.main(lambda stop, health: serve(settings, own, runner.name, stop, health))
