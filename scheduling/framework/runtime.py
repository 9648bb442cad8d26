"""Framework: one profile's plugins, run at every extension point with upstream's semantics.

Port of pkg/scheduler/framework/runtime/framework.go (frameworkImpl). Built from a
`shared.config.Profile` and a Registry: the profile's enabled plugins are instantiated with
their pluginConfig args, `expand_plugins` orders them per extension point (MultiPoint
included) and gives the score weights.

Every `run_*` method returns a Status (a value); a plugin that raises is turned into an Error
status naming it, as if it had returned one. Statuses that leave the framework always carry
the plugin that produced them (upstream SetPlugin).

Filter and Score are data-parallel: each plugin is called once per cycle with the rows still
in play; Filter plugins run in configured order, each on the rows that passed the previous
ones, so a node's rejection comes from the first plugin that rejected it (upstream
RunFilterPlugins).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from scheduling.framework import nominated as nominated_filter
from scheduling.framework.adapters import as_filter_plugin, as_score_plugin
from scheduling.framework.columns import ALL_ROWS, NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.extender import HTTPExtender
from scheduling.framework.handle import FrameworkHandle
from scheduling.framework.interfaces import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BindPlugin,
    ClusterHandle,
    Diagnosis,
    FilterPlugin,
    FilterResult,
    NormalizeScorePlugin,
    PermitPlugin,
    PluginFactory,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueuedPodInfo,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from scheduling.framework.registry import capabilities
from scheduling.framework.reuse import SignatureCache
from scheduling.framework.scratch import Scratch
from scheduling.framework.status import SKIP, SUCCESS, Code, Status
from scheduling.framework.waiting_pods import (
    MAX_PERMIT_TIMEOUT_SECONDS,
    WaitingPod,
    WaitingPods,
)
from shared.config import (
    ConfigError,
    ExtensionPoint,
    Plugins,
    Profile,
    SchedulerConfiguration,
    expand_plugins,
    expand_profiles,
)
from shared.models import Pod

logger = logging.getLogger(__name__)

P = TypeVar("P")

Rejections = list[tuple[Status, NDArray[np.intp]]]
"""(status with its plugin, the rows it rejected); each row appears at most once."""

_NO_ROWS: NDArray[np.intp] = np.empty(0, dtype=np.intp)


@dataclass(slots=True)
class SchedulingContext:
    """What upstream's Scheduler keeps across cycles and profiles: the round-robin start of
    the node search, the tie-break random source and the config-wide percentage."""

    rng: np.random.Generator = field(default_factory=np.random.default_rng)
    next_start_node_index: int = 0
    percentage_of_nodes_to_score: int | None = None
    """KubeSchedulerConfiguration.percentageOfNodesToScore; a profile's value overrides it."""
    seed: int | None = None
    """The seed `rng` came from (plugins with randomness of their own derive theirs from it)."""

    @staticmethod
    def seeded(
        seed: int | None, percentage_of_nodes_to_score: int | None = None
    ) -> SchedulingContext:
        return SchedulingContext(np.random.default_rng(seed), 0, percentage_of_nodes_to_score, seed)


@dataclass(slots=True)
class PreFilterOutcome:
    """RunPreFilterPlugins' answer."""

    result: PreFilterResult | None
    """The intersection of the plugins' node sets; None (or node_names None) means all."""
    status: Status
    narrowed_by: list[tuple[str, set[str]]] = field(default_factory=list)
    """The plugins that named nodes, in order, with their sets (upstream pluginsWithNodes)."""

    @property
    def plugins_with_nodes(self) -> set[str]:
        return {name for name, _ in self.narrowed_by}


@dataclass(slots=True)
class FilterOutcome:
    """RunFilterPlugins over rows: the rows that passed every plugin, and why others did not."""

    feasible: Rows
    """A subset of the input rows (the input itself, without a copy, when all pass)."""
    rejections: Rejections
    status: Status = SUCCESS
    """Success, or the Error that aborts the cycle."""


@dataclass(slots=True)
class ScoreOutcome:
    """RunScorePlugins over the feasible rows."""

    totals: NDArray[np.int64]
    """Weighted sum per row (aligned with the rows scored)."""
    by_plugin: dict[str, NDArray[np.int64]] | None
    """Each plugin's normalized, weighted scores (only when asked for, for explain)."""
    status: Status = SUCCESS


class Framework:
    """One profile's plugins, per extension point, in order."""

    def __init__(
        self,
        profile: Profile,
        registry: Mapping[str, PluginFactory],
        handle: ClusterHandle,
        *,
        context: SchedulingContext | None = None,
        reuse: bool = True,
    ) -> None:
        self.profile_name = profile.scheduler_name
        self.percentage_of_nodes_to_score = profile.percentage_of_nodes_to_score
        """The profile's own percentage; None defers to the context's (config-wide) one."""
        self.context = context if context is not None else SchedulingContext()
        self.handle = FrameworkHandle(handle, self)
        self.waiting_pods = WaitingPods()
        self.plugins: dict[str, object] = {}
        for name in plugins_needed(profile.plugins):
            factory = registry.get(name)
            if factory is None:
                continue  # expand_plugins names the missing plugin and its extension point
            try:
                plugin = factory(profile.plugin_config.get(name), self.handle)
            except Exception as err:
                raise ConfigError(f'initializing plugin "{name}": {err}') from err
            reported = getattr(plugin, "name", None)
            if reported != name:
                raise ConfigError(f'plugin registered as "{name}" reports the name "{reported}"')
            self.plugins[name] = plugin
        self.capabilities = {name: capabilities(p) for name, p in self.plugins.items()}
        expanded = expand_plugins(profile.plugins, self.capabilities)

        def at(point: ExtensionPoint) -> list[tuple[str, Any]]:
            # expand_plugins put each plugin only where its capabilities (the Protocols) say.
            return [(ref.name, self.plugins[ref.name]) for ref in expanded[point]]

        self.pre_enqueue_plugins: list[tuple[str, PreEnqueuePlugin]] = at(
            ExtensionPoint.PRE_ENQUEUE
        )
        queue_sort: list[tuple[str, QueueSortPlugin]] = at(ExtensionPoint.QUEUE_SORT)
        self.queue_sort_plugin = queue_sort[0][1]
        self.pre_filter_plugins: list[tuple[str, PreFilterPlugin]] = at(ExtensionPoint.PRE_FILTER)
        self.filter_plugins: list[tuple[str, FilterPlugin]] = [
            (ref.name, _required(as_filter_plugin(self.plugins[ref.name])))
            for ref in expanded[ExtensionPoint.FILTER]
        ]
        self.post_filter_plugins: list[tuple[str, PostFilterPlugin]] = at(
            ExtensionPoint.POST_FILTER
        )
        self.pre_score_plugins: list[tuple[str, PreScorePlugin]] = at(ExtensionPoint.PRE_SCORE)
        self.score_plugins: list[tuple[str, ScorePlugin, int, NormalizeScorePlugin | None]] = []
        """(name, plugin, weight, the plugin again when it normalizes its scores)."""
        for ref in expanded[ExtensionPoint.SCORE]:
            scorer = _required(as_score_plugin(self.plugins[ref.name]))
            normalizer = scorer if isinstance(scorer, NormalizeScorePlugin) else None
            self.score_plugins.append((ref.name, scorer, ref.weight or 1, normalizer))
        self.score_weights = {name: weight for name, _, weight, _ in self.score_plugins}
        self.reserve_plugins: list[tuple[str, ReservePlugin]] = at(ExtensionPoint.RESERVE)
        self.permit_plugins: list[tuple[str, PermitPlugin]] = at(ExtensionPoint.PERMIT)
        self.pre_bind_plugins: list[tuple[str, PreBindPlugin]] = at(ExtensionPoint.PRE_BIND)
        self.bind_plugins: list[tuple[str, BindPlugin]] = at(ExtensionPoint.BIND)
        self.post_bind_plugins: list[tuple[str, PostBindPlugin]] = at(ExtensionPoint.POST_BIND)
        self._expanded = expanded
        self.signatures: SignatureCache | None = SignatureCache(self) if reuse else None
        """Filter and Score results per scheduling signature, reused across pods (None: off)."""

    # ------------------------------------------------------------------ helpers
    def __repr__(self) -> str:
        return f"Framework({self.profile_name!r})"

    def has_filter_plugins(self) -> bool:
        return bool(self.filter_plugins)

    def has_post_filter_plugins(self) -> bool:
        return bool(self.post_filter_plugins)

    def has_score_plugins(self) -> bool:
        return bool(self.score_plugins)

    def list_plugins(self) -> dict[str, list[str]]:
        """ExtensionPoint value -> plugin names, in the order they run (upstream ListPlugins)."""
        return {str(point): [ref.name for ref in refs] for point, refs in self._expanded.items()}

    # ------------------------------------------------------------------- queue
    def run_pre_enqueue_plugins(self, pod: Pod) -> Status:
        """The first non-success PreEnqueue status (the pod stays gated), else Success."""
        for name, plugin in self.pre_enqueue_plugins:
            try:
                status = plugin.pre_enqueue(pod)
            except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
                status = _raised(err)
            if not status.is_success():
                return _attributed(status, name)
        return SUCCESS

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """QueueSort: a goes before b."""
        return self.queue_sort_plugin.less(a, b)

    def sort_key(self, info: QueuedPodInfo) -> tuple[float, ...]:
        return self.queue_sort_plugin.sort_key(info)

    # ---------------------------------------------------------------- PreFilter
    def run_pre_filter_plugins(
        self, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> PreFilterOutcome:
        """Every PreFilter plugin in order (upstream RunPreFilterPlugins).

        Skip: that plugin's Filter is skipped this cycle. UnschedulableAndUnresolvable or an
        Error stops at once; Unschedulable is remembered and the rest still run (preemption
        needs their state). PreFilterResults intersect; an empty intersection rejects the pod.
        """
        skip: set[str] = set()
        result: PreFilterResult | None = None
        narrowed_by: list[tuple[str, set[str]]] = []
        rejected: Status | None = None
        try:
            for name, plugin in self.pre_filter_plugins:
                try:
                    narrowed, status = plugin.pre_filter(state, pod, nodes)
                except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
                    narrowed, status = None, _raised(err)
                if status.code == Code.SKIP:
                    skip.add(name)
                    continue
                if status.code != Code.SUCCESS:
                    status = _attributed(status, name)
                    if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                        return PreFilterOutcome(None, status)
                    if status.code == Code.UNSCHEDULABLE:
                        rejected = status
                        continue
                    return PreFilterOutcome(
                        None, _error(f'running PreFilter plugin "{name}": {status.message()}', name)
                    )
                if narrowed is None or narrowed.node_names is None:
                    continue
                narrowed_by.append((name, set(narrowed.node_names)))
                result = (
                    PreFilterResult(set(narrowed.node_names))
                    if result is None
                    else result.merge(narrowed)
                )
                if result.node_names is not None and not result.node_names:
                    listed = sorted(n for n, _ in narrowed_by)
                    message = (
                        f"node(s) didn't satisfy plugin {listed[0]}"
                        if len(listed) == 1
                        else f"node(s) didn't satisfy plugin(s) [{' '.join(listed)}] simultaneously"
                    )
                    # Upstream's status names no plugin; berth names the one that emptied the
                    # intersection, so every rejected node has a plugin to report.
                    status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,), name)
                    return PreFilterOutcome(result, status, narrowed_by)
            return PreFilterOutcome(result, rejected or SUCCESS, narrowed_by)
        finally:
            state.skip_filter_plugins = skip

    # ------------------------------------------------------------------- Filter
    def run_filter_plugins(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows = ALL_ROWS
    ) -> FilterOutcome:
        """Every Filter plugin in order, each on the rows that passed the ones before it."""
        remaining: Rows = rows
        rejections: Rejections = []
        skip = state.skip_filter_plugins
        for name, plugin in self.filter_plugins:
            if skip and name in skip:
                continue
            try:
                result = plugin.filter(state, pod, nodes, remaining)
            except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
                result = _raised(err)
            if result is None:
                continue
            if isinstance(result, Status):
                if result.code == Code.SUCCESS:
                    continue
                if not result.is_rejected():
                    return FilterOutcome(_NO_ROWS, rejections, _filter_error(name, result))
                rejections.append((_attributed(result, name), nodes.row_indices(remaining)))
                return FilterOutcome(_NO_ROWS, rejections)
            if not result.failures:
                continue  # FilterResult invariant: no failures means every row passed
            indices = nodes.row_indices(remaining)
            error = _record_failures(name, result, indices, rejections)
            if error is not None:
                return FilterOutcome(_NO_ROWS, rejections, error)
            remaining = indices[result.ok]
            if remaining.shape[0] == 0:
                break
        return FilterOutcome(remaining, rejections)

    def nominated_pods(self) -> Mapping[str, Sequence[Pod]]:
        """Node name -> pods nominated there and not bound yet, from the cluster's handle."""
        return self.handle.nominated_pods

    def extenders(self) -> Sequence[HTTPExtender]:
        """The scheduler's extenders (KubeSchedulerConfiguration.extenders), from the cluster's
        handle. Upstream keeps them on the Scheduler and hands them to every profile's
        framework."""
        return self.handle.extenders

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows = ALL_ROWS
    ) -> FilterOutcome:
        """The Filter step of a cycle (upstream RunFilterPluginsWithNominatedPods): pods
        nominated to a node with priority >= the pod's count as running there, so the pod
        does not take room freed for them. Without such pods, `run_filter_plugins`."""
        nominated = self.nominated_pods()
        if nominated:
            indices = nodes.row_indices(rows)
            context = nominated_filter.FilterContext(
                [plugin for _, plugin in self.filter_plugins],
                nominated_filter.extensions_of([plugin for _, plugin in self.pre_filter_plugins]),
                nominated,
            )
            if nominated_filter.nominated_rows(context, pod, nodes, indices):
                outcome = nominated_filter.run_filters_with_nominated_pods(
                    context, state, pod, Scratch(nodes), indices
                )
                rejections: Rejections = []
                for status, mask in outcome.failures:
                    if not status.is_rejected():
                        return FilterOutcome(
                            _NO_ROWS, rejections, _filter_error(status.plugin, status)
                        )
                    rejections.append((status, outcome.rows[mask]))
                return FilterOutcome(outcome.rows[outcome.ok], rejections)
        return self.run_filter_plugins(state, pod, nodes, rows)

    # --------------------------------------------------------------- PostFilter
    def run_post_filter_plugins(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """In order until one succeeds, is unresolvable or fails (upstream RunPostFilterPlugins);
        Unschedulable answers go on to the next plugin and their reasons are joined."""
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        for name, plugin in self.post_filter_plugins:
            try:
                answer, status = plugin.post_filter(state, pod, nodes, diagnosis)
            except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
                answer, status = None, _raised(err)
            if status.code == Code.SUCCESS:
                return answer, status
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return answer, _attributed(status, name)
            if not status.is_rejected():
                return None, Status(Code.ERROR, (status.message(),), name)
            if answer is not None and (answer.nominated_node is not None or answer.victims):
                # Any nominating answer counts, "" too: it clears the pod's nominatedNodeName
                # (DefaultPreemption when preemption cannot help). Upstream: Mode() != ModeNoop.
                result = answer
            reasons.extend(status.reasons)
            rejector = rejector or name
        return result, Status(Code.UNSCHEDULABLE, tuple(reasons), rejector)

    # ----------------------------------------------------------- PreScore/Score
    def run_pre_score_plugins(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> Status:
        """Every PreScore plugin; Skip skips its Score this cycle; any other failure is an
        Error that aborts the cycle."""
        skip: set[str] = set()
        try:
            for name, plugin in self.pre_score_plugins:
                try:
                    status = plugin.pre_score(state, pod, nodes, rows)
                except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
                    status = _raised(err)
                if status.code == Code.SKIP:
                    skip.add(name)
                elif status.code != Code.SUCCESS:
                    return _error(f'running PreScore plugin "{name}": {status.message()}', name)
            return SUCCESS
        finally:
            state.skip_score_plugins = skip

    def run_score_plugins(
        self,
        state: CycleState,
        pod: Pod,
        nodes: NodeColumns,
        rows: Rows,
        *,
        explain: bool = False,
    ) -> ScoreOutcome:
        """Score, then NormalizeScore, then the [0, 100] range check and the weights, summed
        per row as int64 (upstream RunScorePlugins)."""
        size = nodes.size_of(rows)
        skip = state.skip_score_plugins
        active = [entry for entry in self.score_plugins if not (skip and entry[0] in skip)]
        raw: list[NDArray[np.int64]] = []
        for name, plugin, _, _ in active:
            try:
                scores = plugin.score(state, pod, nodes, rows)
            except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
                scores = _raised(err)
            if isinstance(scores, Status):
                message = f'running Score plugins: plugin "{name}" failed with: {scores.message()}'
                return _score_error(size, message, name)
            raw.append(scores)
        for i, (name, _, _, normalizer) in enumerate(active):
            if normalizer is None:
                continue
            try:
                normalized = normalizer.normalize_score(state, pod, raw[i])
            except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
                normalized = _raised(err)
            if isinstance(normalized, Status):
                message = (
                    f'running Normalize on Score plugins: plugin "{name}" failed with: '
                    f"{normalized.message()}"
                )
                return _score_error(size, message, name)
            raw[i] = normalized
        totals: NDArray[np.int64] | None = None
        by_plugin: dict[str, NDArray[np.int64]] | None = {} if explain else None
        for (name, _, weight, _), scores in zip(active, raw, strict=True):
            if scores.shape[0] != size:
                message = (
                    f'running Score plugins: plugin "{name}" returned {scores.shape[0]} scores '
                    f"for {size} nodes"
                )
                return _score_error(size, message, name)
            if scores.dtype != np.int64:
                scores = scores.astype(np.int64)
            # One pass for both bounds: as uint64, a negative score is huge (MIN_NODE_SCORE 0).
            if size and scores.view(np.uint64).max() > MAX_NODE_SCORE:
                bad = scores[(scores < MIN_NODE_SCORE) | (scores > MAX_NODE_SCORE)][0]
                message = (
                    f'applying score defaultWeights on Score plugins: plugin "{name}" returns an '
                    f"invalid score {bad}, it should in the range of [{MIN_NODE_SCORE}, "
                    f"{MAX_NODE_SCORE}] after normalizing"
                )
                return _score_error(size, message, name)
            weighted = scores * weight if weight != 1 else scores
            if totals is None:
                totals = weighted.copy()
            else:
                totals += weighted
            if by_plugin is not None:
                by_plugin[name] = weighted
        if totals is None:
            totals = np.zeros(size, dtype=np.int64)
        return ScoreOutcome(totals, by_plugin)

    # ------------------------------------------------------------ Reserve/Permit
    def run_reserve_plugins_reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Reserve in order; the first failure stops (the caller then runs Unreserve)."""
        for name, plugin in self.reserve_plugins:
            try:
                status = plugin.reserve(state, pod, node_name)
            except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
                status = _raised(err)
            if status.code == Code.SUCCESS:
                continue
            if status.is_rejected():
                return _attributed(status, name)
            return _error(f'running Reserve plugin "{name}": {status.message()}', name)
        return SUCCESS

    def run_reserve_plugins_unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Unreserve of every Reserve plugin, in reverse order (also those whose Reserve never
        ran: Unreserve must be idempotent, as upstream requires)."""
        for name, plugin in reversed(self.reserve_plugins):
            try:
                plugin.unreserve(state, pod, node_name)
            except Exception:
                # Informational extension point: one plugin's failure must not stop the others.
                logger.exception("Unreserve of plugin %s failed for pod %s", name, pod.key)

    def run_permit_plugins(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Permit in order. A rejection stops the rest; Wait from any plugin makes the pod wait
        (see `waiting_pods`) until all waiting plugins allow it or the shortest timeout."""
        waits: dict[str, float] = {}
        for name, plugin in self.permit_plugins:
            try:
                status, timeout = plugin.permit(state, pod, node_name)
            except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
                status, timeout = _raised(err), 0.0
            if status.code == Code.SUCCESS:
                continue
            if status.is_rejected():
                return _attributed(status, name)
            if status.code == Code.WAIT:
                waits[name] = min(timeout, MAX_PERMIT_TIMEOUT_SECONDS)
                continue
            return _error(f'running Permit plugin "{name}": {status.message()}', name)
        if waits:
            self.waiting_pods.add(WaitingPod(pod, waits))
            message = (
                "one or more plugins asked to wait and no plugin rejected pod "
                f'"{pod.metadata.name}"'
            )
            return Status(Code.WAIT, (message,))
        return SUCCESS

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self.waiting_pods.get(uid)

    def iterate_over_waiting_pods(self) -> Iterable[WaitingPod]:
        return iter(self.waiting_pods)

    def reject_waiting_pod(self, uid: str) -> bool:
        """Reject a waiting pod (it was deleted); False when it is not waiting."""
        waiting = self.waiting_pods.get(uid)
        if waiting is None:
            return False
        waiting.reject("", "removed")
        return True

    def will_wait_on_permit(self, pod: Pod) -> bool:
        return self.waiting_pods.get(pod.metadata.uid) is not None

    async def wait_on_permit(self, pod: Pod) -> Status:
        """Block while the pod waits at Permit; Success when allowed (or never waiting)."""
        waiting = self.waiting_pods.get(pod.metadata.uid)
        if waiting is None:
            return SUCCESS
        try:
            status = await waiting.wait()
        finally:
            self.waiting_pods.remove(pod.metadata.uid)
        if status.code == Code.SUCCESS or status.is_rejected():
            return status
        message = f"waiting on permit for pod: {status.message()}"
        return Status(Code.ERROR, (message,), status.plugin)

    # ------------------------------------------------------------------ binding
    async def run_pre_bind_plugins(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        for name, plugin in self.pre_bind_plugins:
            try:
                status = await plugin.pre_bind(state, pod, node_name)
            except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
                status = _raised(err)
            if status.code == Code.SUCCESS:
                continue
            if status.is_rejected():
                return _attributed(status, name)
            return _error(f'running PreBind plugin "{name}": {status.message()}', name)
        return SUCCESS

    async def run_bind_plugins(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Bind plugins in order until one handles the pod; Skip passes it to the next, and
        when every plugin skips (or there is none) the answer is Skip."""
        for name, plugin in self.bind_plugins:
            try:
                status = await plugin.bind(state, pod, node_name)
            except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
                status = _raised(err)
            if status.code == Code.SKIP:
                continue
            if status.code == Code.SUCCESS:
                return status
            if status.is_rejected():
                return _attributed(status, name)
            return _error(f'running Bind plugin "{name}": {status.message()}', name)
        return SKIP

    def run_post_bind_plugins(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for name, plugin in self.post_bind_plugins:
            try:
                plugin.post_bind(state, pod, node_name)
            except Exception:
                # Informational extension point: one plugin's failure must not stop the others.
                logger.exception("PostBind of plugin %s failed for pod %s", name, pod.key)


# ---------------------------------------------------------------------- building
def plugins_needed(plugins: Plugins) -> list[str]:
    """Every plugin enabled at some extension point or in MultiPoint, once, in first-seen
    order (upstream pluginsNeeded)."""
    seen: dict[str, None] = {}
    for point in (*ExtensionPoint, "multi_point"):
        for ref in plugins.at(point).enabled:
            seen.setdefault(ref.name)
    return list(seen)


def build_frameworks(
    config: SchedulerConfiguration,
    registry: Mapping[str, PluginFactory],
    handle: ClusterHandle,
    *,
    seed: int | None = None,
    context: SchedulingContext | None = None,
    reuse: bool = True,
) -> dict[str, Framework]:
    """One Framework per profile, keyed by scheduler name (upstream profile.NewMap).

    The profiles share one SchedulingContext (round-robin start and tie-break randomness),
    as upstream's profiles share the Scheduler. `reuse` keeps Filter and Score results per
    scheduling signature (scheduling/framework/reuse.py); off, every cycle evaluates every
    node (the answers are the same). Errors are ConfigErrors: "at least one profile
    is required", "creating profile for scheduler name X: ...", differing QueueSort plugins.
    """
    if context is None:
        context = SchedulingContext.seeded(seed, config.percentage_of_nodes_to_score)
    frameworks: dict[str, Framework] = {}
    merged: dict[str, frozenset[str]] = {}
    for profile in config.profiles:
        try:
            framework = Framework(profile, registry, handle, context=context, reuse=reuse)
        except ConfigError as err:
            raise ConfigError(
                f"creating profile for scheduler name {profile.scheduler_name}: {err}"
            ) from err
        frameworks.setdefault(profile.scheduler_name, framework)
        for name, points in framework.capabilities.items():
            merged[name] = merged.get(name, frozenset()) | points
    # The cross-profile checks (no profile, duplicate names, one QueueSort for all).
    expand_profiles(config, merged)
    return frameworks


# ------------------------------------------------------------------------ statuses
def _required(plugin: P | None) -> P:
    # expand_plugins only puts a plugin at an extension point it implements.
    assert plugin is not None
    return plugin


def _attributed(status: Status, plugin: str) -> Status:
    """Upstream SetPlugin: the framework names the plugin that produced a failure."""
    if status.plugin == plugin or status.code in (Code.SUCCESS, Code.SKIP):
        return status
    return Status(status.code, status.reasons, plugin)


def _raised(err: Exception) -> Status:
    return Status(Code.ERROR, (str(err) or type(err).__name__,))


def _error(message: str, plugin: str) -> Status:
    return Status(Code.ERROR, (message,), plugin)


def _filter_error(name: str, status: Status) -> Status:
    return _error(f'running "{name}" filter plugin: {status.message()}', name)


def _record_failures(
    name: str, result: FilterResult, indices: NDArray[np.intp], rejections: Rejections
) -> Status | None:
    for status, mask in result.failures:
        if not status.is_rejected():
            return _filter_error(name, status)
        rejections.append((_attributed(status, name), indices[mask]))
    return None


def _score_error(size: int, message: str, plugin: str) -> ScoreOutcome:
    return ScoreOutcome(np.zeros(size, dtype=np.int64), None, _error(message, plugin))
