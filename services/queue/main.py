"""Run one queue replica: `python -m services.queue.main` (or `berth queue`, once wired).

Servers come from --redis-url / --kafka-bootstrap, else BERTH_REDIS_URL /
BERTH_KAFKA_BOOTSTRAP. SIGTERM or Ctrl-C drains and stops the replica.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Sequence

from cli.servers import ENV_KAFKA_BOOTSTRAP, ENV_REDIS_URL
from services.queue.config import QueueConfig
from services.queue.service import QueueService
from shared.config import default_config, load_config


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="berth queue", description=__doc__)
    parser.add_argument("--redis-url", default=os.environ.get(ENV_REDIS_URL))
    parser.add_argument("--kafka-bootstrap", default=os.environ.get(ENV_KAFKA_BOOTSTRAP))
    parser.add_argument("--config", help="KubeSchedulerConfiguration file (backoff, profiles)")
    parser.add_argument("--key-prefix", default="berth:q:")
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
    parser.add_argument("--group-id", default="berth-queue")
    parser.add_argument("--log-level", default="INFO")
    return parser


def config_from_args(args: argparse.Namespace) -> QueueConfig:
    scheduler = load_config(args.config) if args.config else default_config()
    weights = {}
    for item in args.tenant_weight:
        tenant, _, weight = item.partition("=")
        weights[tenant] = int(weight)
    return QueueConfig.from_scheduler_config(
        scheduler,
        key_prefix=args.key_prefix,
        tenant_label=args.tenant_label,
        tenant_weights=weights,
        max_inflight_per_tenant=args.max_inflight,
        lease_seconds=args.lease_seconds,
        group_id=args.group_id,
    )


async def serve(redis_url: str, bootstrap: str, config: QueueConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with QueueService(redis_url, bootstrap, config):
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.redis_url or not args.kafka_bootstrap:
        _parser().error(f"--redis-url/--kafka-bootstrap (or {ENV_REDIS_URL}/{ENV_KAFKA_BOOTSTRAP})")
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    asyncio.run(serve(args.redis_url, args.kafka_bootstrap, config_from_args(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
