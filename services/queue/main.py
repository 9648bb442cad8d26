"""`python -m services.queue`: one queue replica, configured from the environment
(shared.env.StackSettings), until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from services.queue.config import KUEUE_MODE_BERTH, KUEUE_MODES, QueueConfig, WaitForPodsReady
from services.queue.quota.fair_preemption import STRATEGIES
from services.queue.rejections import RejectionGauge, count_rejections
from services.queue.service import QueueService
from services.queue.spans import schedule_headers
from services.queue.store import QueueStore
from services.queue.views import QueueCounts
from shared.env import REDIS_CONNECTIONS, StackSettings
from shared.health import HealthServer
from shared.metrics import BerthMetrics, default_metrics
from shared.redisconn import connect
from shared.retry import Retry
from shared.service import ServiceRunner, ready_until_stopped, wait_for_servers
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
        description="One berth queue replica (servers, prefixes and topics from BERTH_*).",
    )
    parser.add_argument("--name", default="", help="this replica's name")
    parser.add_argument("--tenant-label", help="pod label naming the tenant (default: namespace)")
    parser.add_argument(
        "--tenant-weight",
        action="append",
        default=[],
        metavar="TENANT=WEIGHT",
        help="weighted round-robin weight of a tenant (repeatable)",
    )
    parser.add_argument("--max-inflight", type=int, default=1000, help="per tenant; 0: no cap")
    parser.add_argument("--lease-seconds", type=float, default=30.0)
    parser.add_argument(
        "--fair-sharing",
        default=os.environ.get(ENV_FAIR_SHARING, ""),
        metavar="STRATEGIES",
        help="Kueue's fair sharing preemption strategies, comma-separated "
        "(LessThanOrEqualToFinalShare,LessThanInitialShare); empty: classical preemption",
    )
    parser.add_argument(
        "--admission-fair-sharing-half-life",
        type=float,
        default=float(os.environ.get(ENV_ADMISSION_FAIR_SHARING, "0") or 0),
        metavar="SECONDS",
        help="Kueue's admission fair sharing: LocalQueue usage half-life (0: off)",
    )
    parser.add_argument(
        "--wait-for-pods-ready-timeout",
        type=float,
        default=float(os.environ.get(ENV_WAIT_FOR_PODS_READY, "0") or 0),
        metavar="SECONDS",
        help="Kueue's waitForPodsReady: requeue an admitted workload not bound in time (0: off)",
    )
    parser.add_argument(
        "--kueue-mode",
        default=os.environ.get(ENV_KUEUE_MODE) or KUEUE_MODE_BERTH,
        choices=KUEUE_MODES,
        help="who admits pods to Kueue's queues: berth (default; pods Kueue gates or labels "
        "as its own excepted), or kueue (Kueue runs in the cluster: berth admits none)",
    )
    parser.add_argument("--wait-for-pods-ready-block", action="store_true")
    parser.add_argument("--requeue-backoff-base", type=float, default=60.0, metavar="SECONDS")
    parser.add_argument("--requeue-backoff-max", type=float, default=3600.0, metavar="SECONDS")
    parser.add_argument("--requeue-backoff-limit", type=int, default=None, metavar="N")
    return parser


ENV_WAIT_FOR_PODS_READY = "BERTH_WAIT_FOR_PODS_READY_TIMEOUT"
"""waitForPodsReady's timeout in seconds (the queue's flag's default)."""
ENV_KUEUE_MODE = "BERTH_KUEUE_MODE"
"""Who admits pods to Kueue's queues, berth or kueue (the queue's --kueue-mode default)."""
ENV_FAIR_SHARING = "BERTH_FAIR_SHARING"
"""Fair sharing's preemption strategies for the queue (its --fair-sharing flag's default)."""
ENV_ADMISSION_FAIR_SHARING = "BERTH_ADMISSION_FAIR_SHARING_HALF_LIFE"
"""Admission fair sharing's usage half-life in seconds (the queue's flag's default)."""


def fair_sharing_strategies(text: str) -> tuple[str, ...]:
    """The strategies named in `text` (comma-separated), refused with the known ones."""
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    for name in names:
        if name not in STRATEGIES:
            raise SystemExit(
                f"--fair-sharing: unknown strategy {name!r} (known: {', '.join(STRATEGIES)})"
            )
    if len(names) > 2 or (len(names) == 2 and names[1] != STRATEGIES[1]):
        raise SystemExit(f"--fair-sharing: at most two strategies, the second {STRATEGIES[1]}")
    return names


def config_from_args(args: argparse.Namespace, settings: StackSettings) -> QueueConfig:
    """The queue's configuration: the environment's settings, then the flags."""
    weights = {}
    for item in args.tenant_weight:
        tenant, _, weight = item.partition("=")
        weights[tenant] = int(weight)
    config = QueueConfig.from_scheduler_config(
        settings.scheduler_config(),
        key_prefix=settings.queue_prefix,
        topics=settings.topics,
        single_tenant=settings.single_tenant,
        group_id=settings.group_id("queue"),
        tenant_label=args.tenant_label,
        tenant_weights=weights,
        max_inflight_per_tenant=args.max_inflight,
        lease_seconds=args.lease_seconds,
        reclaim_by_requeue=not settings.kube,
        fair_sharing_strategies=fair_sharing_strategies(args.fair_sharing),
        admission_fair_sharing_half_life_s=args.admission_fair_sharing_half_life,
        kueue_mode=args.kueue_mode,
        wait_for_pods_ready=WaitForPodsReady(
            args.wait_for_pods_ready_timeout,
            args.wait_for_pods_ready_block,
            args.requeue_backoff_base,
            args.requeue_backoff_max,
            args.requeue_backoff_limit,
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
    settings = runner.configured(lambda: StackSettings.from_env(os.environ))
    config = config_from_args(args, settings)
    return runner.main(lambda stop, health: serve(settings, config, args.name, stop, health))
