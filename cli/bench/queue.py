"""Queue benchmark (`berth bench --mode queue`): real Redis and Kafka-API broker, started here
unless given; the figures are the queue's own (services/queue/bench.py).

Three figures: store, service and wake (services/queue/bench.py says what each measures).

    python -m cli.bench.queue --pods 100000     # = berth bench queue --pods 100000 -o json
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import sys
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
    """`python -m cli.bench.queue ARGV...` is `berth bench queue -o json ARGV...`."""
    from cli.main import main as berth

    return berth(["bench", "queue", "-o", "json", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
