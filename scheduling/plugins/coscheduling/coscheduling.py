"""Coscheduling: gang scheduling with PodGroups (scheduler-plugins pkg/coscheduling:
coscheduling.go, core/core.go).

A pod labelled `scheduling.x-k8s.io/pod-group: <name>` belongs to the gang of the
scheduling.x-k8s.io/v1alpha1 PodGroup <name> in its namespace. The gang is placed whole or
not at all: its members wait at Permit until spec.minMember of them are placed (assumed,
reserved or bound), then all go on together; if the rest does not come in time, they are
rejected and give their room back.

- PreFilter: Skip for pods without the label. A missing PodGroup is
  UnschedulableAndUnresolvable ("PodGroup <ns>/<name> not found"). Fewer pods of the group in
  the cluster (pending or bound, as the cluster handle sees them) than minMember is
  UnschedulableAndUnresolvable too: the gang cannot form, and preemption must not evict
  anything for it (upstream returns UnschedulableAndUnresolvable from PreFilter for that
  reason; older releases said Unschedulable).
- Reserve: nothing. Unreserve: rejects the gang's members still waiting at Permit (one member
  failing after Reserve fails its gang).
- Permit: pods without the label, Success. Otherwise, with this pod, are minMember members
  placed? Then Success, and the waiting members are allowed. If not, Wait for the PodGroup's
  spec.scheduleTimeoutSeconds, else the args' permitWaitingTimeSeconds, else 60 s (0 counts
  as unset; the framework caps any wait at 15 min). `gang_of` / `wait_seconds` are that rule,
  for the binder too.

Where berth differs from upstream:
- On by default. Berth is a batch scheduler: its default profile enables Coscheduling
  (shared/config/defaults.py), unlike kube-scheduler's default profile, which has no
  Coscheduling. A profile disables it with `plugins: {multiPoint: {disabled: [{name:
  Coscheduling}]}}` or at Permit (`plugins: {permit: {disabled: [{name: Coscheduling}]}}`);
  gang pods are then scheduled as ordinary pods. Without the Permit wait there is no gang, so
  PreFilter skips too when its profile does not run Coscheduling at Permit.
- No QueueSort (upstream orders gangs by PodGroup creation): berth's profiles share one
  QueueSort, PrioritySort. No PostFilter: a member that fits nowhere does not reject its
  waiting siblings early (they wait out their timeout), and podGroupBackoffSeconds, which
  upstream's PostFilter applies, has no effect. PodGroup spec.minResources is not checked.
- Distributed, a worker only reports Permit's verdict; the binder waits on gang counters in the
  store, which span binders (services/binder: WaitOnPermit), with the same timeout and
  minMember (`gang_of`). The dry run waits in process (scheduling/dryrun.py).

What the plugin reads from the cluster handle (the dry run's LocalCluster, a worker's
ClusterCache): `pod_groups` ("namespace/name" -> PodGroup) and `pods` (every pod, pending or
bound, by "namespace/name"). Placed members are counted over the handle's NodeColumns (pods
bound, assumed or reserved there).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import (
    Handle,
    PermitPlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
)
from scheduling.framework.signature import WHEN_SKIPPED, Reuse
from scheduling.framework.status import SKIP, SUCCESS, Status
from scheduling.framework.waiting_pods import MAX_PERMIT_TIMEOUT_SECONDS, WaitingPod
from scheduling.plugins import names
from shared.config import CoschedulingArgs
from shared.config.plugin_args import DEFAULT_PERMIT_WAITING_TIME_SECONDS
from shared.models import Pod, PodGroup, pod_group_key

# ------------------------------------------------------------------------ the rules
group_key = pod_group_key
"""The pod's gang: "namespace/name" of its PodGroup, "" for a pod without the label."""


def wait_seconds(group: PodGroup | None, args: CoschedulingArgs | None) -> float:
    """How long placed members wait for the rest of their gang (upstream GetWaitTimeDuration):
    the PodGroup's scheduleTimeoutSeconds, else the args' permitWaitingTimeSeconds, else 60 s;
    0 counts as unset. At most the framework's Permit cap (15 min)."""
    timeout = group.spec.schedule_timeout_seconds if group is not None else None
    if not timeout:
        timeout = args.permit_waiting_time_seconds if args is not None else 0
    if not timeout:
        timeout = DEFAULT_PERMIT_WAITING_TIME_SECONDS
    return min(float(timeout), MAX_PERMIT_TIMEOUT_SECONDS)


@dataclass(frozen=True, slots=True)
class Gang:
    """What a gang member's binding needs: the gang, its size, and the Permit wait."""

    key: str
    """ "namespace/name" of the PodGroup."""
    min_member: int
    wait_seconds: float


def gang_of(pod: Pod, group: PodGroup, args: CoschedulingArgs | None = None) -> Gang:
    """The gang `pod` (labelled for `group`) belongs to, with the profile's args (None:
    defaults). The binder's reservation and WaitOnPermit use this, as Permit does."""
    key = group_key(pod) or group.key
    return Gang(key, group.spec.min_member, wait_seconds(group, args))


# ------------------------------------------------------------------------ the cluster
class _GroupSizes:
    """Pods per group in the handle's `pods`, recounted when the pods change (a new mapping,
    another length or another resourceVersion)."""

    __slots__ = ("_counts", "_stamp")

    def __init__(self) -> None:
        self._stamp: tuple[int, int, int] | None = None
        self._counts: dict[str, int] = {}

    def of(self, handle: Handle, key: str) -> int:
        pods = handle.pods
        stamp = (id(pods), len(pods), handle.resource_version)
        if stamp != self._stamp:
            counts: dict[str, int] = {}
            for pod in pods.values():
                k = group_key(pod)
                if k:
                    counts[k] = counts.get(k, 0) + 1
            self._counts, self._stamp = counts, stamp
        return self._counts.get(key, 0)


class _Placed:
    """Gang members counted on the nodes (bound, assumed or reserved): uids by group, kept in
    step with the NodeColumns through its pod listeners (a PodListener). New columns, or rows
    rebuilt (a removed node drops its pods without telling), mean a recount."""

    __slots__ = ("_by_group", "_nodes", "_stale")

    def __init__(self) -> None:
        self._nodes: NodeColumns | None = None
        self._by_group: dict[str, set[str]] = {}
        self._stale = True

    def members(self, nodes: NodeColumns, key: str) -> set[str]:
        if nodes is not self._nodes:
            self._attach(nodes)
        if self._stale:
            self._by_group = {}
            for pod in nodes.pods():
                self.pod_added(0, pod)
            self._stale = False
        return self._by_group.get(key, set())

    def _attach(self, nodes: NodeColumns) -> None:
        if self._nodes is not None and self in self._nodes.pod_listeners:
            self._nodes.pod_listeners.remove(self)
        self._nodes = nodes
        nodes.pod_listeners.append(self)
        self._stale = True

    # PodListener
    def pod_added(self, row: int, pod: Pod) -> None:
        key = group_key(pod)
        if key:
            self._by_group.setdefault(key, set()).add(pod.metadata.uid)

    def pod_removed(self, row: int, pod: Pod) -> None:
        key = group_key(pod)
        if key:
            self._by_group.get(key, set()).discard(pod.metadata.uid)

    def rows_rebuilt(self) -> None:
        self._stale = True


# ------------------------------------------------------------------------ the plugin
class Coscheduling:
    name: ClassVar[str] = names.COSCHEDULING
    # PreFilter counts the gang's pods: reused only for pods outside a gang (Skip).
    signature_reuse: ClassVar[Reuse] = WHEN_SKIPPED

    def __init__(self, args: CoschedulingArgs | None, handle: Handle) -> None:
        self.args = args if args is not None else CoschedulingArgs()
        self._handle = handle
        self._sizes = _GroupSizes()
        self._placed = _Placed()
        self._at_permit: bool | None = None

    # ------------------------------------------------------------------ lookups
    def pod_group(self, key: str) -> PodGroup | None:
        return self._handle.pod_groups.get(key)

    def _waiting(self) -> Iterable[WaitingPod]:
        return self._handle.framework.iterate_over_waiting_pods()

    def runs_at_permit(self) -> bool:
        """Whether this plugin's profile runs it at Permit (read once the framework is built)."""
        if self._at_permit is None:
            plugins = self._handle.framework.permit_plugins
            self._at_permit = any(plugin is self for _, plugin in plugins)
        return self._at_permit

    # ---------------------------------------------------------------- PreFilter
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> tuple[PreFilterResult | None, Status]:
        key = group_key(pod)
        if not key or not self.runs_at_permit():
            return None, SKIP
        group = self.pod_group(key)
        if group is None:
            return None, Status.unresolvable(f"PodGroup {key} not found", plugin=self.name)
        count = self._sizes.of(self._handle, key)
        if count < group.spec.min_member:
            message = (
                f"pre-filter pod {pod.metadata.name} cannot find enough sibling pods, current "
                f"pods number: {count}, minMember of group: {group.spec.min_member}"
            )
            return None, Status.unresolvable(message, plugin=self.name)
        return None, SUCCESS

    # ------------------------------------------------------------------ Reserve
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """The pod failed after Reserve: its gang fails with it."""
        key = group_key(pod)
        if not key or self.pod_group(key) is None:
            return
        uid = pod.metadata.uid
        for waiting in self._waiting():
            if waiting.pod.metadata.uid != uid and group_key(waiting.pod) == key:
                waiting.reject(self.name, "rejection in Unreserve")

    # ------------------------------------------------------------------- Permit
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        key = group_key(pod)
        if not key:
            return SUCCESS, 0.0
        group = self.pod_group(key)
        if group is None:
            return Status.unschedulable(f"PodGroup {key} not found", plugin=self.name), 0.0
        placed = self._placed.members(self._handle.nodes, key)
        # The framework assumed this pod on its node before Permit: count it once.
        count = len(placed) + (0 if pod.metadata.uid in placed else 1)
        if count < group.spec.min_member:
            return Status.wait(self.name), wait_seconds(group, self.args)
        for waiting in self._waiting():
            if group_key(waiting.pod) == key:
                waiting.allow(self.name)
        return SUCCESS, 0.0


def new(args: object | None, handle: Handle) -> Coscheduling:
    """Registry factory: args are the profile's CoschedulingArgs (or None: defaults)."""
    if args is not None and not isinstance(args, CoschedulingArgs):
        raise TypeError(f"want args to be of type CoschedulingArgs, got {type(args).__name__}")
    return Coscheduling(args, handle)


if TYPE_CHECKING:
    _pre_filter: type[PreFilterPlugin] = Coscheduling
    _reserve: type[ReservePlugin] = Coscheduling
    _permit: type[PermitPlugin] = Coscheduling
