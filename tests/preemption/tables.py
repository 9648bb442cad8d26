"""Shared fixtures for the preemption tables (upstream default_preemption_test.go values)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shared.models import Node, PodDisruptionBudgetStatus
from tests.builders import make_node

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000

SMALL = {"cpu": "100m", "memory": "100"}
MEDIUM = {"cpu": "200m", "memory": "200"}
LARGE = {"cpu": "300m", "memory": "300"}
VERY_LARGE = {"cpu": "500m", "memory": "500"}
ONE_POD = {"pods": "1"}


def node(name: str, capacity: Mapping[str, str] = VERY_LARGE, /, **labels: str) -> Node:
    """Upstream st.MakeNode().Capacity(...): 32 pods unless the capacity says otherwise;
    labelled kubernetes.io/hostname=name as the kubelet does."""
    resources: dict[str, str | int] = {"pods": 32}
    resources.update(capacity)
    builder = make_node(name).capacity(resources).label("kubernetes.io/hostname", name)
    return builder.labels(labels).obj()


def topology_node(spec: str) -> Node:
    """ "name/zone/region" -> a node labelled hostname, zone, region (upstream's helper)."""
    parts = spec.split("/")
    labels = dict(zip(("hostname", "zone", "region"), parts, strict=False))
    return node(parts[0], **labels)


@dataclass(slots=True, kw_only=True)
class StatusWithDisrupted(PodDisruptionBudgetStatus):
    """policy/v1 status with disruptedPods (pod name -> eviction time), which the berth model
    does not carry yet; preemption and eviction read it when present."""

    disrupted_pods: dict[str, float] = field(default_factory=dict)


def status_with_disrupted(allowed: int, disrupted: Sequence[str]) -> StatusWithDisrupted:
    return StatusWithDisrupted(
        disruptions_allowed=allowed, disrupted_pods=dict.fromkeys(disrupted, 1.0)
    )
