"""Binder settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.config import SchedulerConfiguration
from shared.messaging.kafka import Topics


@dataclass(frozen=True, slots=True)
class BinderConfig:
    cluster: str = "default"
    key_prefix: str = "berth:"
    """Prefix of the store's Redis keys (tests use a unique one each)."""
    topics: Topics = field(default_factory=Topics)
    group_id: str = "berth-binder"
    """Kafka consumer group of the binder replicas."""
    scheduler_config: SchedulerConfiguration | None = None
    """Profiles (plugin args, enabled Filter plugins, Coscheduling at Permit and its args: the
    gangs' Permit timeout); berth's defaults when None."""
    max_in_flight: int = 256
    """Proposals being checked or bound at once (pods waiting at Permit do not count)."""
    max_waiting: int = 20_000
    """Pods waiting at Permit at once (their reservations are held)."""
    reservation_margin_seconds: float = 30.0
    """A reservation outlives its longest possible Permit wait by this much before another
    binder's sweeper may release it (its binder is presumed dead)."""
    lease_margin_seconds: float = 10.0
    """Added to the Permit timeout in the "extend" outcome sent when a pod starts waiting."""
    gang_poll_seconds: float = 0.02
    """How often waiting gangs' state is read (members may wait in other binders)."""
    expire_interval_seconds: float = 2.0
    view_timeout_seconds: float = 5.0
    """How long a proposal waits for the binder's view to reach its reservation."""
    node_changed_retries: int = 3
    preemption_honors_pdb: bool = False
    """False (upstream): a victim is deleted even when its PodDisruptionBudget refuses the
    eviction (the worker already preferred victims whose budgets allow it). True: a refusal
    stops the preemption and the attempt is reported unschedulable."""
    commit_interval_seconds: float = 0.2
    consumer_options: Mapping[str, Any] = field(default_factory=dict)
    """Overrides for shared.messaging.kafka.make_consumer (tests: session_timeout_ms...)."""
    producer_options: Mapping[str, Any] = field(default_factory=dict)
    service_name: str = "binder"
    queue_key_prefix: str | None = None
    """The queue's Redis key prefix: each proposal's attempt is checked against the queue's
    lease of the pod before anything is done (a forged or stale attempt number must not be
    recorded, or every later attempt would look stale). None: not checked (a binder
    without a queue, in unit tests)."""
