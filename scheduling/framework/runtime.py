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
RunFilterPlugins). Those steps over rows live beside this module: PreFilter and Filter in
filtering.py, Score in scoring.py, the outcomes and status attribution in outcomes.py; this
one owns the per-profile plugin lists and the per-pod points (PreEnqueue, QueueSort,
PostFilter, Reserve, Permit and its waiting pods, PreBind, Bind, PostBind).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from scheduling.framework.adapters import as_filter_plugin, as_score_plugin
from scheduling.framework.columns import ALL_ROWS, NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.extender import HTTPExtender
from scheduling.framework.filtering import (
    run_filter,
    run_filter_with_nominated,
    run_pre_filter,
)
from scheduling.framework.handle import FrameworkHandle
from scheduling.framework.interfaces import (
    BindPlugin,
    ClusterHandle,
    Diagnosis,
    FilterPlugin,
    NormalizeScorePlugin,
    PermitPlugin,
    PluginFactory,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueuedPodInfo,
    QueueSortPlugin,
    ReservePlugin,
)
from scheduling.framework.outcomes import (
    FilterOutcome,
    PreFilterOutcome,
    ScoreOutcome,
    attributed,
    error_status,
    raised,
)
from scheduling.framework.registry import capabilities
from scheduling.framework.reuse import SignatureCache
from scheduling.framework.scoring import ScoreEntry, run_score
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
        self.score_plugins: list[ScoreEntry] = []
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
                status = raised(err)
            if not status.is_success():
                return attributed(status, name)
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
        """Every PreFilter plugin in order (scheduling/framework/filtering.py)."""
        return run_pre_filter(self.pre_filter_plugins, state, pod, nodes)

    # ------------------------------------------------------------------- Filter
    def run_filter_plugins(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows = ALL_ROWS
    ) -> FilterOutcome:
        """Every Filter plugin in order, each on the rows that passed the ones before it."""
        return run_filter(self.filter_plugins, state, pod, nodes, rows)

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
        nominated to a node with priority >= the pod's count as running there."""
        return run_filter_with_nominated(
            self.filter_plugins,
            self.pre_filter_plugins,
            self.nominated_pods(),
            state,
            pod,
            nodes,
            rows,
        )

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
                answer, status = None, raised(err)
            if status.code == Code.SUCCESS:
                return answer, status
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return answer, attributed(status, name)
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
                    status = raised(err)
                if status.code == Code.SKIP:
                    skip.add(name)
                elif status.code != Code.SUCCESS:
                    return error_status(
                        f'running PreScore plugin "{name}": {status.message()}', name
                    )
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
        per row as int64 (upstream RunScorePlugins; scheduling/framework/scoring.py)."""
        skip = state.skip_score_plugins
        active = [entry for entry in self.score_plugins if not (skip and entry[0] in skip)]
        return run_score(active, state, pod, nodes, rows, explain=explain)

    # ------------------------------------------------------------ Reserve/Permit
    def run_reserve_plugins_reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Reserve in order; the first failure stops (the caller then runs Unreserve)."""
        for name, plugin in self.reserve_plugins:
            try:
                status = plugin.reserve(state, pod, node_name)
            except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
                status = raised(err)
            if status.code == Code.SUCCESS:
                continue
            if status.is_rejected():
                return attributed(status, name)
            return error_status(f'running Reserve plugin "{name}": {status.message()}', name)
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
                status, timeout = raised(err), 0.0
            if status.code == Code.SUCCESS:
                continue
            if status.is_rejected():
                return attributed(status, name)
            if status.code == Code.WAIT:
                waits[name] = min(timeout, MAX_PERMIT_TIMEOUT_SECONDS)
                continue
            return error_status(f'running Permit plugin "{name}": {status.message()}', name)
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
                status = raised(err)
            if status.code == Code.SUCCESS:
                continue
            if status.is_rejected():
                return attributed(status, name)
            return error_status(f'running PreBind plugin "{name}": {status.message()}', name)
        return SUCCESS

    async def run_bind_plugins(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Bind plugins in order until one handles the pod; Skip passes it to the next, and
        when every plugin skips (or there is none) the answer is Skip."""
        for name, plugin in self.bind_plugins:
            try:
                status = await plugin.bind(state, pod, node_name)
            except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
                status = raised(err)
            if status.code == Code.SKIP:
                continue
            if status.code == Code.SUCCESS:
                return status
            if status.is_rejected():
                return attributed(status, name)
            return error_status(f'running Bind plugin "{name}": {status.message()}', name)
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


# ------------------------------------------------------------------------ helpers
def _required(plugin: P | None) -> P:
    # expand_plugins only puts a plugin at an extension point it implements.
    assert plugin is not None
    return plugin
