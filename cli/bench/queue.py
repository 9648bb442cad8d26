"""Queue benchmark (`berth bench --mode queue`): real Redis and Kafka-API broker, started here
unless given; the figures are the queue's own (services/queue/bench.py).

Three figures: store, service and wake (services/queue/bench.py says what each measures).

    python -m cli.bench.queue --pods 100000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
from collections.abc import Sequence
from typing import Any

from cli.servers import start_dev_servers
from services.queue.bench import measure


def run_queue_bench(
    pods: int = 100_000,
    *,
    tenants: int = 1,
    partitions: int = 8,
    redis_url: str | None = None,
    kafka_bootstrap: str | None = None,
    output: bool = True,
) -> dict[str, Any]:
    """Run the queue benchmark and return (and print, as JSON) its figures.

    Servers come from `redis_url` / `kafka_bootstrap`, else from the launcher (which honours
    BERTH_REDIS_URL / BERTH_KAFKA_BOOTSTRAP, else starts local ones for the run).
    """
    servers = None
    if redis_url is None or kafka_bootstrap is None:
        servers = start_dev_servers()
        redis_url = redis_url or servers.redis_url
        kafka_bootstrap = kafka_bootstrap or servers.kafka_bootstrap
    try:
        figures = asyncio.run(measure(pods, tenants, partitions, redis_url, kafka_bootstrap))
    finally:
        if servers is not None:
            servers.stop()
    report = {
        "mode": "queue",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "servers": {
            "redis": servers.redis_source if servers else "given",
            "kafka": servers.kafka_source if servers else "given",
        },
        **figures,
    }
    if output:
        print(json.dumps(report, indent=2))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="berth bench --mode queue")
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args(argv)
    run_queue_bench(args.pods, tenants=args.tenants, partitions=args.partitions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
