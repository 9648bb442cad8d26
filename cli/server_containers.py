"""Redis and Kafka in Docker (testcontainers) for the launcher (cli/servers.py), or None
where the package or a Docker engine is missing."""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


def start_redis_container() -> tuple[str, Callable[[], None]] | None:
    """Redis in Docker via testcontainers, or None when unavailable (no package, no engine)."""
    try:
        from testcontainers.redis import RedisContainer  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        container = RedisContainer("redis:7")
        container.start()
        host = container.get_container_host_ip()
        port = container.get_exposed_port(6379)
    except Exception as exc:  # noqa: BLE001 (DockerException, pull errors: fall back)
        log.debug("testcontainers Redis unavailable: %s", exc)
        return None
    return f"redis://{host}:{port}/0", container.stop


def start_kafka_container() -> tuple[str, Callable[[], None]] | None:
    try:
        from testcontainers.kafka import KafkaContainer  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        container = KafkaContainer()
        container.start()
        bootstrap: str = container.get_bootstrap_server()
    except Exception as exc:  # noqa: BLE001 (DockerException, pull errors: fall back)
        log.debug("testcontainers Kafka unavailable: %s", exc)
        return None
    return bootstrap, container.stop
