"""Scheduler worker settings: a frozen dataclass, read from flags and the environment."""

from __future__ import annotations

import argparse
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from shared.config import SchedulerConfiguration, default_config, load_config
from shared.env import (
    ENV_CLUSTER,
    ENV_CONFIG,
    ENV_KAFKA_BOOTSTRAP,
    ENV_KEY_PREFIX,
    ENV_REDIS_URL,
    ENV_SEED,
    ENV_SESSION_MS,
    ENV_TOPIC_SUFFIX,
    group_options,
)
from shared.kafka import Topics
from shared.security import KafkaSecurity, RedisSecurity

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_KAFKA_BOOTSTRAP = "127.0.0.1:9092"


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    redis_url: str = DEFAULT_REDIS_URL
    kafka_bootstrap: str = DEFAULT_KAFKA_BOOTSTRAP
    cluster: str = "default"
    """The store's cluster name (its Redis hash tag)."""
    key_prefix: str = "berth:"
    """Prefix of the store's Redis keys (tests use a unique one each)."""
    topics: Topics = field(default_factory=Topics)
    group_id: str = "berth-scheduler"
    """The Kafka consumer group every worker replica joins on `berth.schedule`."""
    scheduler_config: SchedulerConfiguration | None = None
    """Profiles; upstream defaults when None."""
    seed: int | None = None
    """Tie-break seed (`berth run --seed`); None: random."""
    worker_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    view_barrier_seconds: float = 2.0
    """Before a batch, wait this long at most for the view to reach the store's current
    resourceVersion (so a pod never meets a cluster older than the one it was queued in)."""
    assume_ttl_seconds: float = 60.0
    """An assumed pod whose binding neither arrived nor failed within this long is dropped
    (its binder died and the queue will dispatch the pod again)."""
    heartbeat_seconds: float = 1.0
    """How often the worker publishes its view position (`berth get`, `berth run`)."""
    consumer_options: Mapping[str, Any] = field(default_factory=dict)
    """Overrides for shared.kafka.make_consumer (tests: session_timeout_ms...)."""
    producer_options: Mapping[str, Any] = field(default_factory=dict)
    service_name: str = "scheduler"
    redis_security: RedisSecurity = field(default_factory=RedisSecurity)
    """Password and TLS files for Redis (shared.security)."""
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)
    """TLS and SASL for the brokers (shared.security)."""

    def profiles(self) -> SchedulerConfiguration:
        return self.scheduler_config if self.scheduler_config is not None else default_config()


def _add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the servers and keys are (each flag falls back to its environment variable)."""
    parser.add_argument("--redis-url", help=f"default ${ENV_REDIS_URL}")
    parser.add_argument("--kafka-bootstrap", help=f"default ${ENV_KAFKA_BOOTSTRAP}")
    parser.add_argument("--config", help=f"KubeSchedulerConfiguration file (${ENV_CONFIG})")
    parser.add_argument("--cluster", help=f"store cluster name (${ENV_CLUSTER}, default 'default')")
    parser.add_argument("--key-prefix", help=f"store key prefix (${ENV_KEY_PREFIX})")
    parser.add_argument("--topic-suffix", help=f"suffix of every topic (${ENV_TOPIC_SUFFIX})")


def config_from_args(
    argv: Sequence[str] | None, env: Mapping[str, str] | None = None
) -> WorkerConfig:
    """`python -m services.scheduler [flags]`; flags override the environment."""
    env = os.environ if env is None else env
    parser = argparse.ArgumentParser(
        prog="python -m services.scheduler",
        description="A berth scheduler worker: consume berth.schedule, publish proposals.",
    )
    _add_server_arguments(parser)
    parser.add_argument("--seed", type=int, help=f"tie-break seed (${ENV_SEED})")
    parser.add_argument("--group-id", default="berth-scheduler")
    parser.add_argument("--worker-id", help="name in heartbeats (default: random)")
    args = parser.parse_args(argv)
    config_path = args.config or env.get(ENV_CONFIG)
    seed = args.seed if args.seed is not None else env.get(ENV_SEED)
    suffix = args.topic_suffix or env.get(ENV_TOPIC_SUFFIX)
    config = WorkerConfig(
        redis_url=args.redis_url or env.get(ENV_REDIS_URL, DEFAULT_REDIS_URL),
        kafka_bootstrap=args.kafka_bootstrap
        or env.get(ENV_KAFKA_BOOTSTRAP, DEFAULT_KAFKA_BOOTSTRAP),
        cluster=args.cluster or env.get(ENV_CLUSTER, "default"),
        key_prefix=args.key_prefix or env.get(ENV_KEY_PREFIX, "berth:"),
        topics=Topics().suffixed(suffix) if suffix else Topics(),
        group_id=args.group_id,
        scheduler_config=load_config(config_path) if config_path else None,
        seed=None if seed is None or seed == "" else int(seed),
        redis_security=RedisSecurity.from_env(env),
        kafka_security=KafkaSecurity.from_env(env),
    )
    if args.worker_id:
        config = replace(config, worker_id=args.worker_id)
    options = group_options(int(env.get(ENV_SESSION_MS) or 0))
    if options:
        config = replace(config, consumer_options=options)
    return config
