"""Scheduler worker settings: WorkerSettings (each flag, else its variable; shared.runtime.settings
reads them) and the WorkerConfig a worker runs with."""

from __future__ import annotations

import argparse
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

from msgspec import Meta

from shared.config import SchedulerConfiguration, default_config, load_config
from shared.messaging.kafka import Topics
from shared.runtime.env import (
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
from shared.runtime.security import KafkaSecurity, RedisSecurity
from shared.runtime.settings import add_flags, read, setting

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_KAFKA_BOOTSTRAP = "127.0.0.1:9092"
ENV_WORKER_GROUP_ID = "BERTH_WORKER_GROUP_ID"
"""The workers' consumer group (their --group-id flag's variable)."""
ENV_WORKER_ID = "BERTH_WORKER_ID"
"""A worker's name in heartbeats (its --worker-id flag's variable)."""


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
    """Overrides for shared.messaging.kafka.make_consumer (tests: session_timeout_ms...)."""
    producer_options: Mapping[str, Any] = field(default_factory=dict)
    service_name: str = "scheduler"
    redis_security: RedisSecurity = field(default_factory=RedisSecurity)
    """Password and TLS files for Redis (shared.runtime.security)."""
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)
    """TLS and SASL for the brokers (shared.runtime.security)."""

    def profiles(self) -> SchedulerConfiguration:
        return self.scheduler_config if self.scheduler_config is not None else default_config()


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """A worker's settings as given (each flag, else its variable, else the default); the
    same variables as shared.runtime.env.StackSettings, but the servers default to localhost."""

    redis_url: Annotated[str, setting(ENV_REDIS_URL, "Redis URL", flag="--redis-url")] = (
        DEFAULT_REDIS_URL
    )
    kafka_bootstrap: Annotated[
        str, setting(ENV_KAFKA_BOOTSTRAP, "Kafka bootstrap servers", flag="--kafka-bootstrap")
    ] = DEFAULT_KAFKA_BOOTSTRAP
    config: Annotated[
        str | None,
        setting(ENV_CONFIG, "a KubeSchedulerConfiguration file", flag="--config", kind="path"),
    ] = None
    cluster: Annotated[
        str, setting(ENV_CLUSTER, "the store's cluster name (Redis hash tag)", flag="--cluster")
    ] = "default"
    key_prefix: Annotated[
        str, setting(ENV_KEY_PREFIX, "prefix of the store's Redis keys", flag="--key-prefix")
    ] = "berth:"
    topic_suffix: Annotated[
        str,
        setting(ENV_TOPIC_SUFFIX, "appended to every topic name", flag="--topic-suffix"),
    ] = ""
    seed: Annotated[int | None, setting(ENV_SEED, "the tie-break seed", flag="--seed")] = None
    session_ms: Annotated[
        int,
        Meta(ge=0),
        setting(ENV_SESSION_MS, "consumer group session timeout in ms (0: the client's)"),
    ] = 0
    group_id: Annotated[
        str,
        Meta(min_length=1),
        setting(
            ENV_WORKER_GROUP_ID,
            "the Kafka consumer group every worker joins on berth.schedule",
            flag="--group-id",
        ),
    ] = "berth-scheduler"
    worker_id: Annotated[
        str | None,
        setting(
            ENV_WORKER_ID, "the worker's name in heartbeats (unset: random)", flag="--worker-id"
        ),
    ] = None


def config_from_args(
    argv: Sequence[str] | None, env: Mapping[str, str] | None = None
) -> WorkerConfig:
    """`python -m services.scheduler [flags]`; flags override the environment; SettingsError
    naming a refused setting."""
    env = os.environ if env is None else env
    parser = argparse.ArgumentParser(
        prog="python -m services.scheduler",
        description="A berth scheduler worker: consume berth.schedule, publish proposals "
        "(each flag falls back to its variable, docs/settings.md).",
    )
    add_flags(parser, WorkerSettings)
    given = read(WorkerSettings, env, vars(parser.parse_args(argv)))
    suffix = given.topic_suffix
    config = WorkerConfig(
        redis_url=given.redis_url,
        kafka_bootstrap=given.kafka_bootstrap,
        cluster=given.cluster,
        key_prefix=given.key_prefix,
        topics=Topics().suffixed(suffix) if suffix else Topics(),
        group_id=given.group_id,
        scheduler_config=load_config(given.config) if given.config else None,
        seed=given.seed,
        redis_security=RedisSecurity.from_env(env),
        kafka_security=KafkaSecurity.from_env(env),
    )
    if given.worker_id:
        config = replace(config, worker_id=given.worker_id)
    options = group_options(given.session_ms)
    if options:
        config = replace(config, consumer_options=options)
    return config
