"""The plugin interfaces, one Protocol per extension point, in the order a pod meets them.

Queue:       PreEnqueue, QueueSort
Scheduling:  PreFilter -> Filter -> PostFilter (only when no node fits) -> PreScore -> Score
             (-> NormalizeScore) -> Reserve -> Permit
Binding:     WaitOnPermit -> PreBind -> Bind -> PostBind; Unreserve on any failure after Reserve.

Filter and Score are data-parallel: one call evaluates every candidate node over the
NodeColumns arrays and returns one value per row. Out-of-tree authors who prefer a per-node
function implement `NodeFilterPlugin` / `NodeScorePlugin` (see `adapters.py`); the framework
wraps them (a Python loop per node: fine for small clusters, slow for large ones).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.cluster_objects import ClusterObjects
from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.status import Status
from shared.models import Node, Pod, PodDisruptionBudget, PodGroup

if TYPE_CHECKING:
    from scheduling.framework.extender import HTTPExtender
    from scheduling.framework.runtime import Framework

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
MAX_EXTENDER_PRIORITY = 10


@dataclass(slots=True)
class QueuedPodInfo:
    """A pod in the queue, with what the queue knows about its attempts (upstream
    framework.QueuedPodInfo)."""

    pod: Pod
    timestamp: float = 0.0
    """When the pod last entered the queue (drives backoff and the unschedulable timeout)."""
    attempts: int = 0
    initial_attempt_timestamp: float | None = None
    unschedulable_plugins: set[str] = field(default_factory=set)
    gated: bool = False


@dataclass(slots=True)
class PreFilterResult:
    """PreFilter may narrow the nodes to evaluate; None means all nodes."""

    node_names: set[str] | None = None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return PreFilterResult(set(other.node_names))
        return PreFilterResult(self.node_names & other.node_names)


@dataclass(slots=True)
class FilterResult:
    """Per-row verdicts of one Filter plugin, aligned with the rows it was given.

    `failures` pairs each distinct non-success Status with the mask of rows that got it;
    the masks are disjoint and their union is `~ok`.
    """

    ok: NDArray[np.bool_]
    failures: list[tuple[Status, NDArray[np.bool_]]] = field(default_factory=list)

    @staticmethod
    def from_mask(ok: NDArray[np.bool_], status: Status) -> FilterResult:
        """One reason for every rejected row."""
        if ok.all():
            return FilterResult(ok)
        return FilterResult(ok, [(status, ~ok)])


@dataclass(slots=True)
class PostFilterResult:
    """What PostFilter (preemption) achieved: a nominated node and the pods evicted for it."""

    nominated_node: str | None = None
    victims: list[Pod] = field(default_factory=list)


@dataclass(slots=True)
class Diagnosis:
    """Why nodes were rejected in a cycle: input to PostFilter and to the FitError message."""

    num_all_nodes: int = 0
    rejections: list[tuple[Status, NDArray[np.intp]]] = field(default_factory=list)
    """(status with its plugin, rows it applies to); each row appears at most once."""
    unschedulable_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""

    def status_by_row(self) -> dict[int, Status]:
        out: dict[int, Status] = {}
        for status, rows in self.rejections:
            for row in rows.tolist():
                out[row] = status
        return out


class Plugin(Protocol):
    @property
    def name(self) -> str: ...


@runtime_checkable
class PreEnqueuePlugin(Protocol):
    """Called before a pod enters activeQ; a non-success status keeps it gated."""

    @property
    def name(self) -> str: ...

    def pre_enqueue(self, pod: Pod) -> Status: ...


@runtime_checkable
class QueueSortPlugin(Protocol):
    """Orders activeQ. `sort_key` must agree with `less` (the Redis queue stores the key)."""

    @property
    def name(self) -> str: ...

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool: ...

    def sort_key(self, info: QueuedPodInfo) -> tuple[float, ...]: ...


@runtime_checkable
class PreFilterPlugin(Protocol):
    """Once per cycle before Filter: compute state, reject early, or narrow the nodes.

    Returning Skip means this plugin's Filter is not called for this pod.
    """

    @property
    def name(self) -> str: ...

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> tuple[PreFilterResult | None, Status]: ...


@runtime_checkable
class FilterPlugin(Protocol):
    """Judges every row in `rows` at once. Return None when every row passes."""

    @property
    def name(self) -> str: ...

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | Status | None: ...


@runtime_checkable
class PostFilterPlugin(Protocol):
    """Called only when no node fits; typically preemption."""

    @property
    def name(self) -> str: ...

    def post_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]: ...


@runtime_checkable
class PreScorePlugin(Protocol):
    """Once per cycle over the feasible rows; Skip means this plugin's Score is not called."""

    @property
    def name(self) -> str: ...

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows) -> Status: ...


@runtime_checkable
class ScorePlugin(Protocol):
    """Scores every feasible row at once (int64, one per row)."""

    @property
    def name(self) -> str: ...

    def score(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> NDArray[np.int64] | Status: ...


@runtime_checkable
class NormalizeScorePlugin(Protocol):
    """A Score plugin's ScoreExtensions: rescale its raw scores into [0, 100]."""

    @property
    def name(self) -> str: ...

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: NDArray[np.int64]
    ) -> NDArray[np.int64] | Status: ...


@runtime_checkable
class ReservePlugin(Protocol):
    """Reserve is the last step of the scheduling cycle; Unreserve undoes it on failure."""

    @property
    def name(self) -> str: ...

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Protocol):
    """Approve (Success), deny (Unschedulable) or Wait with a timeout in seconds."""

    @property
    def name(self) -> str: ...

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]: ...


@runtime_checkable
class PreBindPlugin(Protocol):
    @property
    def name(self) -> str: ...

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status: ...


@runtime_checkable
class BindPlugin(Protocol):
    """Bind the pod; Skip lets the next Bind plugin handle it."""

    @property
    def name(self) -> str: ...

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status: ...


@runtime_checkable
class PostBindPlugin(Protocol):
    @property
    def name(self) -> str: ...

    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None: ...


# ---------------------------------------------------------------- simple per-node forms
@runtime_checkable
class NodeFilterPlugin(Protocol):
    """Per-node Filter for out-of-tree authors (adapted by the framework)."""

    @property
    def name(self) -> str: ...

    def filter_node(self, state: CycleState, pod: Pod, node: Node, pods: list[Pod]) -> Status: ...


@runtime_checkable
class NodeScorePlugin(Protocol):
    """Per-node Score for out-of-tree authors (adapted by the framework)."""

    @property
    def name(self) -> str: ...

    def score_node(self, state: CycleState, pod: Pod, node: Node, pods: list[Pod]) -> int: ...


class Binder(Protocol):
    """Where DefaultBinder writes a binding: the in-process snapshot or the cluster store."""

    async def bind(self, pod: Pod, node_name: str) -> None: ...


class ClusterHandle(Protocol):
    """What a cluster gives the frameworks built on it: the dry run's LocalCluster, a
    worker's or a binder's ClusterCache (scheduling/cache). Every member is required, so a
    cluster that forgets one (extenders, say) is a type error, not a silent default."""

    @property
    def nodes(self) -> NodeColumns: ...

    @property
    def binder(self) -> Binder: ...

    @property
    def cluster_objects(self) -> ClusterObjects:
        """Namespaces, Services and controllers (the inter-pod plugins' listers)."""
        ...

    @property
    def nominated_pods(self) -> Mapping[str, Sequence[Pod]]:
        """Node name -> pods nominated there and not bound (nor counted) yet."""
        ...

    @property
    def pod_disruption_budgets(self) -> Sequence[PodDisruptionBudget]: ...

    @property
    def pod_groups(self) -> Mapping[str, PodGroup]:
        """Coscheduling PodGroups by "namespace/name"."""
        ...

    @property
    def pods(self) -> Mapping[str, Pod]:
        """Every pod the cluster knows, pending or bound, by "namespace/name" (the pod
        lister)."""
        ...

    @property
    def resource_version(self) -> int:
        """The version of the cluster state the handle shows (constant in the dry run)."""
        ...

    @property
    def extenders(self) -> Sequence[HTTPExtender]:
        """The scheduler's extenders (KubeSchedulerConfiguration.extenders), built once."""
        ...


class Handle(ClusterHandle, Protocol):
    """What plugins get from the framework that built them: the cluster's handle, plus the
    framework itself (plugins such as preemption run other extension points through it)."""

    @property
    def framework(self) -> Framework: ...

    @property
    def filter_plugins(self) -> Sequence[FilterPlugin]: ...

    @property
    def pre_filter_plugins(self) -> Sequence[PreFilterPlugin]: ...

    @property
    def seed(self) -> int:
        """The seed of this scheduler's randomness (0 when unseeded)."""
        ...


PluginFactory = Callable[[object | None, Handle], object]
"""factory(args, handle) -> plugin. `args` is the plugin's parsed pluginConfig args (or None)."""
