"""`berth schedule` as a library: where would these pods go, and why (issue #2, section 6);
the report's types and views are in scheduling/dryrun_report.py.

    report = run_dry(load_manifests("cluster.yaml"), load_config("sched.yaml"), seed=1)
    print(to_table(report))          # or print(json.dumps(to_json(report), indent=2))

Semantics:
- Pods with spec.nodeName run on that node (their requests count there). Pods without it
  are pending when their spec.schedulerName names a profile, else "Skipped" (so are pods
  being deleted, as upstream skips them).
- A pending pod that a PreEnqueue plugin holds back (scheduling gates) is "Gated" and never
  gets a cycle.
- The others are ordered by the profile's QueueSort (PrioritySort: higher priority first,
  from priorityClassName; ties keep input order, the input position being the queue
  timestamp) and each gets one scheduling cycle per pass, in that order. A scheduled pod is
  bound at once through the bind plugins (DefaultBinder binds into the in-process cluster)
  and later cycles see it. Preemption victims are deleted at once; the preemptor gets its
  nominated node and tries it first in the next pass, while lower-priority pods treat that
  room as taken. Lower-priority pods nominated to that node lose their nomination (upstream
  prepareCandidate), so they look elsewhere.
- PodDisruptionBudgets from the manifests carry no status: it is computed as the disruption
  controller would, over the pods that exist, before the first pass and again whenever
  victims are deleted (preemption reads status.disruptionsAllowed).
- Extenders (`config.extenders`) are built once and called by every cycle (filter and
  prioritize) and by preemption. Their HTTP calls block the event loop: nothing else runs
  in a dry run meanwhile.
- Gangs (Coscheduling, on in berth's default profile): a member labelled
  scheduling.x-k8s.io/pod-group waits at Permit, holding its node, until minMember members of
  its PodGroup are placed; then the whole gang binds. PreFilter rejects members of a missing
  PodGroup, or of one with fewer pods than minMember.
- Another pass runs while the previous one bound or preempted anything. Pods still waiting
  at Permit when a pass ends are rejected as if their shortest timeout had passed (nothing
  else can allow them within the pass): a gang that cannot complete gives its room back, as
  upstream's does at its Permit timeout. When the passes end, every member of a gang that did
  not reach minMember is Unschedulable, its message naming Coscheduling and the PodGroup.
- The report has one entry per pod without spec.nodeName, in input order.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace

from scheduling.cache.local import LocalCluster
from scheduling.dryrun_report import (
    GATED,
    SCHEDULED,
    SKIPPED,
    UNSCHEDULABLE,
    DryRunReport,
    FilteredNode,
    FilteredNodes,
    NodeScore,
    PodResult,
    to_json,
    to_table,
)
from scheduling.framework.cluster_objects import StaticClusterObjects
from scheduling.framework.cycle import binding_cycle, scheduling_cycle
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.extender import build_extenders
from scheduling.framework.interfaces import Diagnosis, PluginFactory, QueuedPodInfo
from scheduling.framework.runtime import Framework, build_frameworks
from scheduling.framework.schedule import NodeScores
from scheduling.framework.status import Code, Status
from scheduling.plugins import coscheduling, names
from scheduling.plugins.defaultpreemption import lower_priority_nominated_pods
from scheduling.plugins.registry import in_tree_registry
from shared.config import SchedulerConfiguration, default_config
from shared.lifecycle.eviction import refresh_pdb_statuses
from shared.models import Pod
from shared.models.manifest import Manifests
from shared.models.priority_admission import resolve_priorities


def run_dry(
    manifests: Manifests,
    config: SchedulerConfiguration | None = None,
    seed: int | None = None,
    explain: bool = False,
    *,
    registry: Mapping[str, PluginFactory] | None = None,
) -> DryRunReport:
    """Schedule the manifests' pending pods in one process (see the module docstring).

    `config` defaults to the upstream default configuration, `registry` to the in-tree
    plugins. Raises ManifestError (priority classes) and ConfigError (profiles); the pods
    (spec.priority, from their class) are updated in place, as admission would.
    """
    reports: list[DryRunReport] = []

    async def main() -> None:
        reports.append(await run_dry_async(manifests, config, seed, explain, registry=registry))

    # The report is not the main task's result: on the main thread, CPython 3.11's
    # asyncio.run formats a repr of that task (its result included) while restoring the
    # SIGINT handler, which for a large report costs seconds.
    asyncio.run(main())
    return reports[0]


async def run_dry_async(
    manifests: Manifests,
    config: SchedulerConfiguration | None = None,
    seed: int | None = None,
    explain: bool = False,
    *,
    registry: Mapping[str, PluginFactory] | None = None,
) -> DryRunReport:
    """`run_dry` for callers already inside an event loop."""
    warnings = resolve_priorities(manifests)
    if config is None:
        config = default_config()
    cluster = LocalCluster(
        manifests.nodes,
        [pod for pod in manifests.pods if pod.spec.node_name],
        StaticClusterObjects.from_manifests(manifests),
        manifests.pod_disruption_budgets,
        build_extenders(config.extenders),
        pod_groups=manifests.pod_groups,
        pending=[pod for pod in manifests.pods if not pod.spec.node_name],
    )
    frameworks = build_frameworks(
        config,
        registry if registry is not None else in_tree_registry(),
        cluster,
        seed=seed,
    )
    run = _DryRun(cluster, frameworks, explain)
    report = await run.run(manifests.pods)
    report.warnings = warnings
    return report


@dataclass(slots=True)
class _Pending:
    index: int
    pod: Pod
    framework: Framework
    result: PodResult
    done: bool = False


class _DryRun:
    def __init__(
        self, cluster: LocalCluster, frameworks: dict[str, Framework], explain: bool
    ) -> None:
        self.cluster = cluster
        self.cache = cluster.for_attempt()
        self.frameworks = frameworks
        self.explain = explain
        self.by_uid: dict[str, _Pending] = {}
        self.unbound: dict[str, Pod] = {}
        """uid -> every input pod without spec.nodeName that still exists (bound or not)."""

    async def run(self, pods: list[Pod]) -> DryRunReport:
        results: list[PodResult] = []
        queue: list[_Pending] = []
        for index, pod in enumerate(pods):
            if pod.spec.node_name:
                continue
            self.unbound[pod.metadata.uid] = pod
            result = PodResult(pod.key, SKIPPED)
            results.append(result)
            framework = self.frameworks.get(pod.spec.scheduler_name)
            if framework is None:
                result.message = f'profile not found for scheduler name "{pod.spec.scheduler_name}"'
                continue
            if pod.metadata.deletion_timestamp is not None:
                result.message = f"skip schedule deleting pod: {pod.key}"
                continue
            gate = framework.run_pre_enqueue_plugins(pod)
            if not gate.is_success():
                result.status, result.message = GATED, gate.message()
                continue
            result.status = UNSCHEDULABLE
            item = _Pending(index, pod, framework, result)
            queue.append(item)
            self.by_uid[pod.metadata.uid] = item
        queue.sort(key=functools.cmp_to_key(_queue_order))

        self._refresh_pdb_statuses()
        passes = 0
        while queue:
            passes += 1
            if not await self._pass(queue):
                break
            queue = [item for item in queue if not item.done]
        self._report_incomplete_gangs()
        return DryRunReport(results, self.explain, passes)

    async def _pass(self, queue: list[_Pending]) -> bool:
        """One cycle per pod in queue order; True when anything was bound or preempted."""
        progress = False
        waiting: list[tuple[_Pending, CycleState, Pod, str, asyncio.Task[Status]]] = []
        for item in queue:
            if item.done:  # preempted meanwhile
                continue
            state = CycleState()
            nodes = self.cluster.nodes
            outcome = scheduling_cycle(
                item.framework, state, item.pod, nodes, self.cache, explain=self.explain
            )
            result = item.result
            if outcome.nominating:
                self._nominate(item, outcome.nominated_node or "")
            if outcome.victims:
                progress = True
                self._delete_victims(item, outcome.victims)
            if outcome.nominating and outcome.nominated_node:
                self._clear_lower_priority_nominations(item, outcome.nominated_node)
            if outcome.status.code in (Code.SUCCESS, Code.WAIT):
                assert outcome.result is not None
                host = outcome.result.suggested_host
                result.filtered = self._filtered(outcome.result.diagnosis)
                result.scores = _scores(outcome.result.scores, self.cluster)
                task = asyncio.create_task(
                    binding_cycle(item.framework, state, outcome.pod, host, self.cache, nodes)
                )
                if outcome.status.code == Code.WAIT:
                    waiting.append((item, state, outcome.pod, host, task))
                    continue
                progress |= self._bound(item, host, await task)
                continue
            result.status, result.node, result.message = UNSCHEDULABLE, None, outcome.message
            result.scores = {}
            fit_error = outcome.fit_error
            result.filtered = self._filtered(fit_error.diagnosis) if fit_error is not None else {}

        # Nothing else runs in this pass that could still allow a waiting pod.
        for framework in self.frameworks.values():
            for pod in framework.iterate_over_waiting_pods():
                pod.time_out()
        for item, _, _, host, task in waiting:
            progress |= self._bound(item, host, await task)
        return progress

    def _bound(self, item: _Pending, host: str, status: Status) -> bool:
        result = item.result
        if not status.is_success():
            result.status, result.node, result.message = UNSCHEDULABLE, None, status.message()
            return False
        item.done = True
        result.status, result.node = SCHEDULED, host
        result.message = f"Successfully assigned {item.pod.key} to {host}"
        return True

    def _report_incomplete_gangs(self) -> None:
        """Every member of a gang that did not reach minMember is Unschedulable, its message
        naming Coscheduling and the PodGroup (upstream rejects the waiting members at the
        Permit timeout; the others failed on their own, and the gang with them)."""
        gangs: dict[str, list[_Pending]] = {}
        for item in self.by_uid.values():
            key = coscheduling.group_key(item.pod)
            plugin = item.framework.plugins.get(names.COSCHEDULING)
            if key and isinstance(plugin, coscheduling.Coscheduling) and plugin.runs_at_permit():
                gangs.setdefault(key, []).append(item)
        if not gangs:
            return
        placed: dict[str, int] = {}  # members on nodes: bound by this run or before it
        for pod in self.cluster.nodes.pods():
            key = coscheduling.group_key(pod)
            placed[key] = placed.get(key, 0) + 1
        for key, members in gangs.items():
            group = self.cluster.pod_groups.get(key)
            if group is None:
                continue  # PreFilter said so: "PodGroup ... not found"
            if placed.get(key, 0) >= group.spec.min_member:
                continue
            note = f"Coscheduling: PodGroup {key} did not reach minMember {group.spec.min_member}"
            for item in members:
                result = item.result
                if result.status != SCHEDULED and note not in result.message:
                    result.status, result.node = UNSCHEDULABLE, None
                    result.message = f"{result.message} {note}".strip()

    def _nominate(self, item: _Pending, node_name: str) -> None:
        status = replace(item.pod.status, nominated_node_name=node_name)
        item.pod = replace(item.pod, status=status)
        item.result.nominated_node = node_name or None
        self.cluster.nominate(item.pod, node_name)

    def _delete_victims(self, preemptor: _Pending, victims: list[Pod]) -> None:
        for victim in victims:
            self.cluster.delete_pod(victim)
            self.unbound.pop(victim.metadata.uid, None)
            preemptor.result.victims.append(victim.key)
            evicted = self.by_uid.get(victim.metadata.uid)
            if evicted is not None and evicted.done:
                # A pod this dry run had placed is deleted again: it will not run.
                evicted.result.status, evicted.result.node = UNSCHEDULABLE, None
                evicted.result.message = f"preempted by {preemptor.pod.key}"
        self._refresh_pdb_statuses()

    def _clear_lower_priority_nominations(self, preemptor: _Pending, node_name: str) -> None:
        """After preempting on `node_name`, lower-priority pods nominated there may no longer
        fit: clear their nomination so they look elsewhere (upstream prepareCandidate)."""
        nominated = self.cluster.nominated_pods
        for pod in lower_priority_nominated_pods(preemptor.pod, node_name, nominated):
            other = self.by_uid.get(pod.metadata.uid)
            if other is not None:
                self._nominate(other, "")
            else:
                self.cluster.nominate(pod, "")

    def _refresh_pdb_statuses(self) -> None:
        """Budgets read from manifests have an empty status (every covered pod would count as
        a violating victim): compute it as the disruption controller does, over the pods
        that exist now (bound or assumed, and those still pending)."""
        budgets = self.cluster.pod_disruption_budgets
        if not budgets:
            return
        pods = list(self.cluster.nodes.pods())
        on_nodes = {pod.metadata.uid for pod in pods}
        pods.extend(pod for uid, pod in self.unbound.items() if uid not in on_nodes)
        refresh_pdb_statuses(budgets, pods)

    def _filtered(self, diagnosis: Diagnosis) -> FilteredNodes:
        return FilteredNodes(list(diagnosis.rejections), self.cluster.nodes.names)


def _queue_order(a: _Pending, b: _Pending) -> int:
    """QueueSort's less, with the input position as the queue timestamp (ties keep order)."""
    info_a = QueuedPodInfo(a.pod, timestamp=float(a.index))
    info_b = QueuedPodInfo(b.pod, timestamp=float(b.index))
    if a.framework.less(info_a, info_b):
        return -1
    if a.framework.less(info_b, info_a):
        return 1
    return a.index - b.index


def _scores(scores: NodeScores | None, cluster: LocalCluster) -> dict[str, NodeScore]:
    if scores is None:
        return {}
    return {
        node: NodeScore(total, plugins)
        for node, (total, plugins) in scores.by_node(cluster.nodes).items()
    }


__all__ = [
    "GATED",
    "SCHEDULED",
    "SKIPPED",
    "UNSCHEDULABLE",
    "DryRunReport",
    "FilteredNode",
    "FilteredNodes",
    "NodeScore",
    "PodResult",
    "run_dry",
    "run_dry_async",
    "to_json",
    "to_table",
]
