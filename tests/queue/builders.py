"""Small builders for queue tests (pods, records, outcomes)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from services.queue.records import PodRecord
from shared.messaging.messages import Outcome, OutcomeResult, ScheduleRequest
from shared.models import (
    Affinity,
    Container,
    LabelSelector,
    ObjectMeta,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodSchedulingGate,
    PodSpec,
    PodStatus,
    ResourceRequirements,
)

_uids = itertools.count(1)


def make_pod(
    name: str,
    namespace: str = "default",
    *,
    priority: int | None = None,
    gates: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    uid: str | None = None,
    rv: int = 0,
    nominated: str = "",
    scheduler: str = "default-scheduler",
    node_name: str = "",
    affinity_to: Mapping[str, str] | None = None,
    cpu: int | None = None,
) -> Pod:
    affinity = None
    if affinity_to is not None:
        term = PodAffinityTerm(
            label_selector=LabelSelector(match_labels=dict(affinity_to)),
            topology_key="kubernetes.io/hostname",
        )
        affinity = Affinity(
            pod_affinity=PodAffinity(required_during_scheduling_ignored_during_execution=[term])
        )
    containers = []
    if cpu is not None:
        containers.append(
            Container(name="c", resources=ResourceRequirements(requests={"cpu": cpu}))
        )
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace,
            uid=uid or f"uid-{next(_uids):06d}-{name}",
            labels=dict(labels or {}),
            resource_version=rv,
        ),
        spec=PodSpec(
            priority=priority,
            scheduling_gates=[PodSchedulingGate(name=g) for g in gates],
            scheduler_name=scheduler,
            node_name=node_name,
            affinity=affinity,
            containers=containers,
        ),
        status=PodStatus(nominated_node_name=nominated),
    )


def record(name: str, namespace: str = "default", **kwargs: object) -> PodRecord:
    return PodRecord.from_pod(make_pod(name, namespace, **kwargs))  # type: ignore[arg-type]


def outcome(
    request: ScheduleRequest,
    result: OutcomeResult = "unschedulable",
    plugins: Sequence[str] = ("NodeResourcesFit",),
    **kwargs: object,
) -> Outcome:
    return Outcome(
        tenant=request.tenant,
        pod_key=request.pod_key,
        uid=request.uid,
        attempt=request.attempt,
        result=result,
        unschedulable_plugins=tuple(plugins) if result in ("unschedulable", "error") else (),
        **kwargs,  # type: ignore[arg-type]
    )
