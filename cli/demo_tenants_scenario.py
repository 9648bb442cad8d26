"""The act of `berth demo --tenants` (cli/demo_tenants.py): the tenants, their Kueue
ClusterQueues in one cohort, the jobs each submits, and the counts of those jobs as they run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import yaml

from cli.run import Pipeline
from shared.lifecycle.kwok import COMPLETE, delay_annotation
from shared.lifecycle.state import LifecycleState
from shared.models import (
    Container,
    Manifests,
    Namespace,
    Node,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodSpec,
    ResourceRequirements,
    cluster_meta,
    load_manifest_text,
)
from shared.models.kueue import QUEUE_NAME_LABEL

GI = 1024**3
COHORT = "tenants"
FLAVOR = "default"
LOCAL_QUEUE = "jobs"
DRAIN_SECONDS = 5.0
"""After the last job, how long usage may take to come back to 0."""


GI = 1024**3
COHORT = "tenants"
FLAVOR = "default"
LOCAL_QUEUE = "jobs"
DRAIN_SECONDS = 5.0
"""After the last job, how long usage may take to come back to 0."""


@dataclass(frozen=True, slots=True)
class Tenant:
    """One team: its ClusterQueue (and namespace, and LocalQueue `jobs`), and its jobs."""

    name: str
    nominal: int
    """CPUs."""
    borrowing_limit: int | None
    weight: int
    arrives: float
    """Seconds after the act starts."""
    jobs: int


@dataclass(frozen=True, slots=True)
class Scenario:
    tenants: tuple[Tenant, ...]
    job_seconds: float = 6.0
    """How long a job runs once bound."""
    nodes: int = 4
    node_cpus: int = 8
    sample_seconds: float = 0.5

    @property
    def cohort_quota(self) -> int:
        return sum(t.nominal for t in self.tenants)

    def tenant(self, name: str) -> Tenant:
        return next(t for t in self.tenants if t.name == name)


def default_scenario(job_seconds: float = 6.0) -> Scenario:
    """The act of the module docstring (about 30 s of jobs)."""
    return Scenario(
        (
            Tenant("batch", nominal=4, borrowing_limit=12, weight=1, arrives=0.0, jobs=32),
            Tenant("prod", nominal=8, borrowing_limit=4, weight=2, arrives=5.0, jobs=20),
            Tenant("research", nominal=6, borrowing_limit=4, weight=1, arrives=10.0, jobs=10),
        ),
        job_seconds=job_seconds,
    )


def queue_manifests(scenario: Scenario) -> Manifests:
    """Nodes, namespaces, the ResourceFlavor, the ClusterQueues and LocalQueues (the Kueue
    objects as a user writes them, loaded and validated like `berth apply -f`)."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": FLAVOR},
        }
    ]
    for t in scenario.tenants:
        cpu: dict[str, Any] = {"name": "cpu", "nominalQuota": t.nominal}
        if t.borrowing_limit is not None:
            cpu["borrowingLimit"] = t.borrowing_limit
        docs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "ClusterQueue",
                "metadata": {"name": t.name},
                "spec": {
                    "cohort": COHORT,
                    "namespaceSelector": {},
                    "fairSharing": {"weight": t.weight},
                    "preemption": {"reclaimWithinCohort": "Any"},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [{"name": FLAVOR, "resources": [cpu]}],
                        }
                    ],
                },
            }
        )
        docs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "LocalQueue",
                "metadata": {"name": LOCAL_QUEUE, "namespace": t.name},
                "spec": {"clusterQueue": t.name},
            }
        )
    manifests = load_manifest_text(yaml.safe_dump_all(docs), source="berth demo --tenants")
    manifests.namespaces = [Namespace(metadata=cluster_meta(t.name)) for t in scenario.tenants]
    for i in range(scenario.nodes):
        name = f"node-{i}"
        capacity = {"cpu": scenario.node_cpus * 1000, "memory": 64 * GI, "pods": 110}
        manifests.nodes.append(
            Node(
                metadata=ObjectMeta(
                    name=name, namespace="", labels={"kubernetes.io/hostname": name}
                ),
                spec=NodeSpec(),
                status=NodeStatus(capacity=dict(capacity), allocatable=dict(capacity)),
            )
        )
    return manifests


COMPLETE_DELAY = delay_annotation(COMPLETE)


def tenant_jobs(tenant: Tenant, created: float, job_seconds: float | None = None) -> list[Pod]:
    """The tenant's jobs: 1-CPU pods in its LocalQueue, oldest first; with `job_seconds`,
    each completes that long after it is bound (KWOK's pod-complete stage annotation, which
    the node agent honours)."""
    annotations = {} if job_seconds is None else {COMPLETE_DELAY: f"{job_seconds:g}s"}
    return [
        Pod(
            metadata=ObjectMeta(
                name=f"{tenant.name}-{i:03d}",
                namespace=tenant.name,
                labels={QUEUE_NAME_LABEL: LOCAL_QUEUE, "team": tenant.name},
                annotations=dict(annotations),
                creation_timestamp=created + i / 1000,
            ),
            spec=PodSpec(
                containers=[
                    Container(
                        name="job",
                        image="registry.example.com/job:v1",
                        resources=ResourceRequirements(requests={"cpu": 1000}),
                    )
                ]
            ),
        )
        for i in range(tenant.jobs)
    ]


# ------------------------------------------------------------------------------ the jobs
@dataclass(slots=True)
class JobCounts:
    submitted: int = 0
    running: int = 0
    done: int = 0
    evicted: int = 0
    """Times a running job lost its node without finishing (quota reclaimed)."""


class Jobs:
    """The demo's view of its jobs: each runs from when it is bound until the node agent
    completes it (`job_seconds` later, its KWOK pod-complete annotation; the agent records
    it Succeeded and deletes it, giving back its quota). A bound pod that goes back to
    waiting (unbound, deleted and re-applied, or bound anew) was evicted: the agent starts
    its clock again when it is bound again."""

    def __init__(self, job_seconds: float) -> None:
        self.job_seconds = job_seconds
        self.counts: dict[str, JobCounts] = {}
        self.running: dict[str, tuple[str, int, float]] = {}
        """pod key -> (uid, resourceVersion when seen bound, since)."""
        self.finished: set[str] = set()
        self.mine: dict[str, str] = {}
        """pod key -> tenant, for every job submitted."""

    def submitted(self, tenant: str, pods: Sequence[Pod]) -> None:
        counts = self.counts.setdefault(tenant, JobCounts())
        counts.submitted += len(pods)
        self.mine.update({p.key: tenant for p in pods})

    async def tick(self, run: Pipeline, now: float) -> dict[str, int]:
        """Look at the jobs, complete those that ran long enough; evictions seen, per tenant."""
        stored = {p.key: p for p in cast(list[Pod], await run.client.store.list("Pod"))}
        ended = await LifecycleState(run.client.redis, run.client.store.keys).finished()
        evicted: dict[str, int] = {}
        for key, tenant in self.mine.items():
            if key in self.finished:
                continue
            pod = stored.get(key)
            seen = self.running.get(key)
            if pod is None and key in ended:
                self.running.pop(key, None)
                self.finished.add(key)
                self.counts[tenant].done += 1
                continue
            bound = pod is not None and bool(pod.spec.node_name)
            if seen is not None and (
                not bound
                or pod is None
                or (pod.metadata.uid, pod.metadata.resource_version) != seen[:2]
            ):
                del self.running[key]
                evicted[tenant] = evicted.get(tenant, 0) + 1
                seen = None
            if pod is None or not bound:
                continue
            if seen is None:
                self.running[key] = (pod.metadata.uid, pod.metadata.resource_version, now)
        for tenant, n in evicted.items():
            self.counts[tenant].evicted += n
        for tenant, counts in self.counts.items():
            counts.running = sum(1 for k in self.running if self.mine[k] == tenant)
        return evicted

    @property
    def all_done(self) -> bool:
        return len(self.finished) == len(self.mine)
