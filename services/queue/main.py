"""`python -m services.queue`: one queue replica, configured from the environment
(shared.runtime.env.StackSettings), until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from services.queue.config import QueueConfig, QueueSettings, WaitForPodsReady
from services.queue.rejections import RejectionGauge, count_rejections
from services.queue.service import QueueService
from services.queue.spans import schedule_headers
from services.queue.store import QueueStore
from services.queue.views import QueueCounts
from shared.observability.health import HealthServer
from shared.observability.metrics import BerthMetrics, default_metrics
from shared.runtime.env import REDIS_CONNECTIONS, StackSettings
from shared.runtime.redisconn import connect
from shared.runtime.retry import Retry
from shared.runtime.service import ServiceRunner, ready_until_stopped, wait_for_servers
from shared.runtime.settings import add_flags, read
from shared.store import ClusterStore

log = logging.getLogger(__name__)


class NamespaceLabels:
    """The queue's namespace-label lookup (namespaceSelector terms), cached for a moment."""

    def __init__(self, store: ClusterStore, ttl: float = 5.0) -> None:
        self._store = store
        self._ttl = ttl
        self._cache: dict[str, tuple[float, dict[str, str]]] = {}

    async def __call__(self, namespace: str) -> Mapping[str, str]:
        now = time.monotonic()
        hit = self._cache.get(namespace)
        if hit is not None and now - hit[0] < self._ttl:
            return hit[1]
        obj = await self._store.get("Namespace", "", namespace)
        labels = dict(obj.metadata.labels) if obj is not None else {}
        self._cache[namespace] = (now, labels)
        return labels


async def report_pending(store: QueueStore, metrics: BerthMetrics, interval: float = 5.0) -> None:
    """scheduler_pending_pods and scheduler_unschedulable_pods from the queue's Redis state
    (the same on every replica)."""
    retry = Retry("queue: refreshing scheduler_pending_pods", log)
    rejections = RejectionGauge(metrics.unschedulable_pods)
    while True:
        pause = interval
        try:
            tenants = await store.tenants()
            rejections.set(
                await count_rejections(
                    store.redis, store.keys, tenants, store.config.scheduler_names
                )
            )
            by_tenant = await store.counts(tenants)
            total = sum(by_tenant.values(), QueueCounts())
            for tenant, counts in by_tenant.items():
                for queue, value in (
                    ("active", counts.active),
                    ("backoff", counts.backoff),
                    ("unschedulable", counts.unschedulable),
                    ("gated", counts.gated),
                    ("in_flight", counts.inflight),
                ):
                    metrics.tenant_pending.labels(tenant=tenant, queue=queue).set(value)
            metrics.set_pending(
                {
                    "active": total.active,
                    "backoff": total.backoff,
                    "unschedulable": total.unschedulable,
                    "gated": total.gated,
                }
            )
            retry.succeeded()
        except Exception as exc:  # noqa: BLE001 (Retry logs it)
            # metrics must never stop the service
            pause = max(interval, retry.failed(exc))
        await asyncio.sleep(pause)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m services.queue",
        description="One berth queue replica (servers, prefixes and topics from BERTH_*; "
        "each flag falls back to its variable, docs/settings.md).",
    )
    parser.add_argument("--name", default="", help="this replica's name")
    add_flags(parser, QueueSettings)
    return parser


def config_from_args(
    args: argparse.Namespace, settings: StackSettings, env: Mapping[str, str] | None = None
) -> QueueConfig:
    """The queue's configuration: the stack's settings, then the queue's own (each flag, else
    its variable); SettingsError naming a refused one."""
    own = read(QueueSettings, os.environ if env is None else env, vars(args))
    config = QueueConfig.from_scheduler_config(
        settings.scheduler_config(),
        key_prefix=settings.queue_prefix,
        topics=settings.topics,
        single_tenant=settings.single_tenant,
        group_id=settings.group_id("queue"),
        tenant_label=own.tenant_label,
        tenant_weights=own.tenant_weights,
        max_inflight_per_tenant=own.max_inflight,
        lease_seconds=own.lease_seconds,
        reclaim_by_requeue=not settings.kube,
        fair_sharing_strategies=own.fair_sharing,
        admission_fair_sharing_half_life_s=own.admission_fair_sharing_half_life,
        kueue_mode=own.kueue_mode,
        wait_for_pods_ready=WaitForPodsReady(
            own.wait_for_pods_ready_timeout,
            own.wait_for_pods_ready_block,
            own.requeue_backoff_base,
            own.requeue_backoff_max,
            own.requeue_backoff_limit,
        ),
    )
    if settings.ordered:
        # Concurrent dispatch loops would interleave their batches on berth.schedule.
        config = replace(config, dispatch_concurrency=1)
    return config


async def serve(
    settings: StackSettings,
    config: QueueConfig,
    name: str,
    stop: asyncio.Event,
    health: HealthServer,
) -> None:
    redis = connect(settings.redis_url, settings.redis_security, max_connections=REDIS_CONNECTIONS)
    store = ClusterStore(redis, cluster=settings.cluster, prefix=settings.store_prefix)
    service = QueueService(
        redis,
        settings.kafka_bootstrap,
        config,
        namespace_labels=NamespaceLabels(store),
        replica_id=name or None,
        consumer_options=settings.consumer_options(),
        headers_hook=schedule_headers,
        cluster_store=store,
        kafka_security=settings.kafka_security,
    )
    pending: list[asyncio.Task[None]] = []

    async def start() -> None:
        if not await wait_for_servers(redis, settings, stop, "queue"):
            return
        await service.start()
        pending.append(asyncio.create_task(report_pending(service.store, default_metrics())))

    async def drain() -> None:
        for task in pending:
            task.cancel()
        await service.stop()
        await redis.aclose()

    await ready_until_stopped(health, stop, start, drain)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    runner = ServiceRunner("queue", args.name)
    env = runner.configured(lambda: runner.environment(QueueSettings))
    settings = runner.configured(lambda: StackSettings.from_env(env))
    config = runner.configured(lambda: config_from_args(args, settings, env))
    return runner.main(lambda stop, health: serve(settings, config, args.name, stop, health))
