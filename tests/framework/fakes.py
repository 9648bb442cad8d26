"""Small fake plugins for framework tests (one class per extension point), and a builder of a
Framework over them. Every fake appends "<Name>.<point>" to a shared call log."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from scheduling.cache.local import LocalCluster
from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import (
    Diagnosis,
    FilterResult,
    Handle,
    PluginFactory,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
)
from scheduling.framework.runtime import Framework, SchedulingContext
from scheduling.framework.status import SUCCESS, Status
from shared.config import PluginRef, Plugins, PluginSet, Profile
from shared.models import Node, Pod, priority_of
from tests.builders import make_node


class Log(list[str]):
    pass


@dataclass
class Fake:
    name: str
    log: Log = field(default_factory=Log)

    def record(self, point: str) -> None:
        self.log.append(f"{self.name}.{point}")


@dataclass
class QueueSort(Fake):
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = priority_of(a.pod), priority_of(b.pod)
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)

    def sort_key(self, info: QueuedPodInfo) -> tuple[float, ...]:
        return (-priority_of(info.pod), info.timestamp)


@dataclass
class PreEnqueue(Fake):
    status: Status = SUCCESS

    def pre_enqueue(self, pod: Pod) -> Status:
        self.record("pre_enqueue")
        return self.status


@dataclass
class PreFilter(Fake):
    status: Status = SUCCESS
    nodes: set[str] | None = None
    raises: bool = False

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> tuple[PreFilterResult | None, Status]:
        self.record("pre_filter")
        if self.raises:
            raise RuntimeError("boom")
        return PreFilterResult(self.nodes), self.status


@dataclass
class Filter(Fake):
    """Rejects the named nodes with `status` (default Unschedulable "<name> rejects")."""

    reject: set[str] = field(default_factory=set)
    status: Status | None = None
    seen: list[list[str]] = field(default_factory=list)

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | Status | None:
        self.record("filter")
        names = [nodes.names[r] for r in nodes.row_indices(rows).tolist()]
        self.seen.append(names)
        ok = np.array([name not in self.reject for name in names], dtype=np.bool_)
        status = self.status or Status.unschedulable(f"{self.name} rejects")
        return FilterResult.from_mask(ok, status)


@dataclass
class FilterWithPreFilter(Filter):
    """A Filter plugin whose PreFilter answers `pre_status`."""

    pre_status: Status = SUCCESS

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> tuple[PreFilterResult | None, Status]:
        self.record("pre_filter")
        return None, self.pre_status


@dataclass
class NodeFilter(Fake):
    """The per-node form."""

    reject: set[str] = field(default_factory=set)

    def filter_node(self, state: CycleState, pod: Pod, node: Node, pods: list[Pod]) -> Status:
        if node.metadata.name in self.reject:
            return Status.unschedulable(f"{self.name} rejects {node.metadata.name[:1]}")
        return SUCCESS


@dataclass
class PostFilter(Fake):
    status: Status = SUCCESS
    nominate: str | None = None

    def post_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        self.record("post_filter")
        result = PostFilterResult(self.nominate) if self.nominate is not None else None
        return result, self.status


@dataclass
class Score(Fake):
    """Scores from a node -> score table (default 0); records the nodes it scored."""

    scores: Mapping[str, int] = field(default_factory=dict)
    seen: list[list[str]] = field(default_factory=list)
    status: Status | None = None

    def score(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> NDArray[np.int64] | Status:
        self.record("score")
        names = [nodes.names[r] for r in nodes.row_indices(rows).tolist()]
        self.seen.append(names)
        if self.status is not None:
            return self.status
        return np.array([self.scores.get(n, 0) for n in names], dtype=np.int64)


@dataclass
class NormalizedScore(Score):
    """Divides its raw scores by `divisor` in NormalizeScore."""

    divisor: int = 10

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: NDArray[np.int64]
    ) -> NDArray[np.int64] | Status:
        self.record("normalize_score")
        return scores // self.divisor


@dataclass
class ScoreWithPreScore(Score):
    pre_status: Status = SUCCESS

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows) -> Status:
        self.record("pre_score")
        return self.pre_status


@dataclass
class NodeScore(Fake):
    scores: Mapping[str, int] = field(default_factory=dict)

    def score_node(self, state: CycleState, pod: Pod, node: Node, pods: list[Pod]) -> int:
        return self.scores.get(node.metadata.name, 0)


@dataclass
class Reserve(Fake):
    status: Status = SUCCESS

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self.record("reserve")
        return self.status

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.record("unreserve")


@dataclass
class Permit(Fake):
    status: Status = SUCCESS
    timeout: float = 0.0

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        self.record("permit")
        return self.status, self.timeout


@dataclass
class PreBind(Fake):
    status: Status = SUCCESS

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self.record("pre_bind")
        return self.status


@dataclass
class Bind(Fake):
    status: Status = SUCCESS
    cluster: LocalCluster | None = None

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self.record("bind")
        if self.status.is_success() and self.cluster is not None:
            await self.cluster.bind(pod, node_name)
        return self.status


@dataclass
class PostBind(Fake):
    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.record("post_bind")


Entry = Fake | tuple[Fake, int]
"""A plugin, or (score plugin, weight)."""


def node_objs(*names: str) -> list[Node]:
    return [make_node(name).capacity(cpu="4", memory="8Gi", pods=110).obj() for name in names]


def framework(
    points: Mapping[str, Sequence[Entry]],
    cluster: LocalCluster | Handle | None = None,
    *,
    seed: int = 0,
    percentage: int | None = None,
    log: Log | None = None,
) -> Framework:
    """A Framework whose extension points hold exactly these plugins (a QueueSort and a Bind
    plugin are added when missing). Plugins appear once in the registry even if listed at
    several points."""
    handle = cluster if cluster is not None else LocalCluster()
    log = log if log is not None else Log()
    sets: dict[str, list[PluginRef]] = {}
    registry: dict[str, object] = {}
    for point, entries in points.items():
        refs: list[PluginRef] = []
        for entry in entries:
            plugin, weight = entry if isinstance(entry, tuple) else (entry, None)
            registry[plugin.name] = plugin
            refs.append(PluginRef(plugin.name, weight))
        sets[point] = refs
    if "queue_sort" not in sets:
        sets["queue_sort"] = [PluginRef("QueueSort")]
        registry["QueueSort"] = QueueSort("QueueSort", log)
    if "bind" not in sets:
        binder = Bind("Bind", log, cluster=handle if isinstance(handle, LocalCluster) else None)
        sets["bind"] = [PluginRef("Bind")]
        registry["Bind"] = binder
    plugins = Plugins(**{point: PluginSet(enabled=refs) for point, refs in sets.items()})
    profile = Profile(plugins=plugins, percentage_of_nodes_to_score=percentage)
    factories = {name: _factory(plugin) for name, plugin in registry.items()}
    return Framework(profile, factories, handle, context=SchedulingContext.seeded(seed))


def _factory(plugin: object) -> PluginFactory:
    def new(args: object | None, handle: Handle) -> object:
        return plugin

    return new


def cluster_of(names: Iterable[str], pods: Iterable[Pod] = ()) -> LocalCluster:
    return LocalCluster(node_objs(*names), pods)
