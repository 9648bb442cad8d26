"""The scheduling cycle and the binding cycle of one pod (upstream schedule_one.go:
schedulingCycle, bindingCycle, handleBindingCycleError).

    scheduling_cycle: schedule_pod -> (no fit: PostFilter) -> assume -> Reserve -> Permit
    binding_cycle:    WaitOnPermit -> PreBind -> Bind -> PostBind

A failure after Reserve runs Unreserve (every Reserve plugin, in reverse order) and forgets
the assumed pod. A rejection at Reserve, Permit or WaitOnPermit is reported as a FitError over
that single node, as upstream does ("0/1 nodes are available: 1 <reason>.").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.errors import FitError, SchedulingError
from scheduling.framework.interfaces import Diagnosis
from scheduling.framework.runtime import Framework
from scheduling.framework.schedule import ScheduleResult, schedule_pod
from scheduling.framework.status import SUCCESS, Code, Status
from shared.models import Pod


class PodCache(Protocol):
    """The scheduler cache's assume/forget: a pod counts on its node from Reserve on."""

    def assume(self, pod: Pod, node_name: str) -> Pod:
        """Account the pod on the node; returns the assumed pod (spec.nodeName set)."""
        ...

    def forget(self, pod: Pod) -> None: ...


@dataclass(slots=True)
class SchedulingOutcome:
    """How a scheduling cycle ended."""

    status: Status
    """Success (bind now), Wait (the binding cycle waits at Permit), a rejection, or Error."""
    pod: Pod
    """The assumed pod when a node was chosen (Success or Wait), else the pod as given."""
    result: ScheduleResult | None = None
    """The placement, when schedule_pod found one (even if Reserve or Permit then failed)."""
    fit_error: FitError | None = None
    """Why no node fits (also for a rejection at Reserve/Permit, over that node)."""
    nominated_node: str | None = None
    """Only meaningful when `nominating`: the pod's new nominatedNodeName ("" clears it)."""
    nominating: bool = False
    """False: leave the pod's nominatedNodeName as it is (upstream ModeNoop)."""
    victims: list[Pod] = field(default_factory=list)
    """Pods PostFilter (preemption) evicts so that this pod fits later."""

    @property
    def node(self) -> str | None:
        if self.status.code in (Code.SUCCESS, Code.WAIT) and self.result is not None:
            return self.result.suggested_host
        return None

    @property
    def message(self) -> str:
        return self.status.message()


def scheduling_cycle(
    framework: Framework,
    state: CycleState,
    pod: Pod,
    nodes: NodeColumns,
    cache: PodCache,
    *,
    explain: bool = False,
) -> SchedulingOutcome:
    try:
        result = schedule_pod(framework, state, pod, nodes, explain=explain)
    except FitError as fit_error:
        return _unschedulable(framework, state, pod, nodes, fit_error)
    except SchedulingError as err:
        return SchedulingOutcome(err.status(), pod, nominated_node="", nominating=True)

    host = result.suggested_host
    assumed = cache.assume(pod, host)
    status = framework.run_reserve_plugins_reserve(state, assumed, host)
    if status.is_success():
        status = framework.run_permit_plugins(state, assumed, host)
        if status.is_success() or status.is_wait():
            return SchedulingOutcome(status, assumed, result)
    framework.run_reserve_plugins_unreserve(state, assumed, host)
    cache.forget(assumed)
    outcome = SchedulingOutcome(status, pod, result, nominated_node="", nominating=True)
    if status.is_rejected():
        outcome.fit_error = _single_node_fit_error(pod, nodes, host, status)
        outcome.status = Status(status.code, (str(outcome.fit_error),), status.plugin)
    return outcome


def _unschedulable(
    framework: Framework,
    state: CycleState,
    pod: Pod,
    nodes: NodeColumns,
    fit_error: FitError,
) -> SchedulingOutcome:
    if not framework.has_post_filter_plugins():
        return SchedulingOutcome(
            fit_error.status(), pod, fit_error=fit_error, nominated_node="", nominating=True
        )
    answer, status = framework.run_post_filter_plugins(state, pod, nodes, fit_error.diagnosis)
    fit_error.diagnosis.post_filter_msg = status.message()
    outcome = SchedulingOutcome(fit_error.status(), pod, fit_error=fit_error)
    if answer is not None:
        if answer.nominated_node is not None:
            outcome.nominated_node = answer.nominated_node
            outcome.nominating = True
        outcome.victims = list(answer.victims)
    return outcome


async def binding_cycle(
    framework: Framework,
    state: CycleState,
    assumed: Pod,
    node_name: str,
    cache: PodCache,
    nodes: NodeColumns,
) -> Status:
    """WaitOnPermit, PreBind, Bind, PostBind. On failure: Unreserve, forget, and the status
    (a rejection while waiting becomes a FitError message over the node)."""
    status = await framework.wait_on_permit(assumed)
    if status.is_rejected():
        fit_error = _single_node_fit_error(assumed, nodes, node_name, status)
        status = Status(status.code, (str(fit_error),), status.plugin)
    if status.is_success():
        status = await framework.run_pre_bind_plugins(state, assumed, node_name)
    if status.is_success():
        status = await framework.run_bind_plugins(state, assumed, node_name)
        if status.code == Code.SKIP:
            status = Status(Code.ERROR, ("no bind plugin bound the pod",))
    if not status.is_success():
        framework.run_reserve_plugins_unreserve(state, assumed, node_name)
        cache.forget(assumed)
        return status
    framework.run_post_bind_plugins(state, assumed, node_name)
    return SUCCESS


def _single_node_fit_error(
    pod: Pod, nodes: NodeColumns, node_name: str, status: Status
) -> FitError:
    # -1 when the node left the columns meanwhile: counted in the message, named nowhere.
    row = nodes.index.get(node_name, -1)
    diagnosis = Diagnosis(
        num_all_nodes=1,
        rejections=[(status, np.array([row], dtype=np.intp))],
        unschedulable_plugins={status.plugin} if status.plugin else set(),
    )
    return FitError(pod, 1, diagnosis)
