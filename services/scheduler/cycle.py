"""One schedule request through the framework: a proposal for the binder, or an outcome.

    decision = decide(frameworks, view, request, now)
    decision.proposal   # bind (after Reserve and Permit) or preempt (PostFilter's victims)
    decision.outcome    # unschedulable / error (FitError message, failed plugins), or
                        # scheduled when the pod turned out to be bound already

The cycle is upstream's schedulingCycle (scheduling.framework.cycle); the binding
cycle (WaitOnPermit, PreBind, Bind, PostBind) runs in the binder service.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.cache.cache import ClusterCache
from scheduling.framework.cycle import SchedulingOutcome, scheduling_cycle
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.runtime import Framework
from scheduling.framework.status import Code
from shared.messaging.messages import Outcome, OutcomeResult, ScheduleRequest, pod_fingerprint
from shared.messaging.proposals import Proposal, Victim
from shared.messaging.wire import MessageError
from shared.models import Pod
from shared.models.evolve import evolve


@dataclass(frozen=True, slots=True)
class Decision:
    proposal: Proposal | None = None
    outcome: Outcome | None = None


def _outcome(request: ScheduleRequest, result: OutcomeResult, **fields: object) -> Outcome:
    return Outcome(
        tenant=request.tenant,
        pod_key=request.pod_key,
        uid=request.uid,
        attempt=request.attempt,
        result=result,
        **fields,  # type: ignore[arg-type]
    )


def failed_decision(request: ScheduleRequest, error: Exception) -> Decision:
    """An error outcome for a cycle that raised (the queue backs the pod off)."""
    return Decision(outcome=_outcome(request, "error", message=f"scheduling failed: {error!r}"))


def request_pod(request: ScheduleRequest, view: ClusterCache) -> Pod:
    """The pod to schedule: the queue's copy (the view's, when it holds that very version:
    the view decoded it from the change stream already; always, for a pod the queue sent by
    reference), with its latest known nomination. MessageError when neither has it."""
    held = view.pods.get(request.pod_key)
    if (
        held is not None
        and request.resource_version
        and held.metadata.resource_version == request.resource_version
        and held.metadata.uid == request.uid
    ):
        pod = held
    elif not request.pod:
        # Sent by reference (a large pod: services/queue/wire.py): the view holds a later
        # version, or none; this attempt is stale, the queue sends the current one.
        raise MessageError(
            f"{request.pod_key} was sent by reference and the view does not hold its "
            f"resourceVersion {request.resource_version}"
        )
    else:
        pod = request.decode_pod()
    nominated = request.nominated_node_name or pod.status.nominated_node_name
    if nominated != pod.status.nominated_node_name:
        pod = evolve(pod, status=evolve(pod.status, nominated_node_name=nominated))
    return pod


def decide(
    frameworks: dict[str, Framework],
    view: ClusterCache,
    request: ScheduleRequest,
    now: float,
) -> Decision:
    # A new attempt supersedes whatever this worker still assumes for the pod.
    view.forget(request.uid)
    try:
        pod = request_pod(request, view)
    except MessageError as err:
        return Decision(outcome=_outcome(request, "error", message=f"undecodable pod: {err}"))
    bound_to = view.bound_node(request.pod_key, request.uid)
    if bound_to:
        # Dispatched again after its binding (a lost outcome): tell the queue it is done.
        return Decision(outcome=_outcome(request, "scheduled", node_name=bound_to))
    framework = frameworks.get(pod.spec.scheduler_name)
    if framework is None:
        message = f'profile not found for scheduler name "{pod.spec.scheduler_name}"'
        return Decision(outcome=_outcome(request, "error", message=message))

    outcome = scheduling_cycle(
        framework, CycleState(), pod, view.nodes, view.for_attempt(request.attempt, now)
    )
    code = outcome.status.code
    if code in (Code.SUCCESS, Code.WAIT):
        return Decision(proposal=_bind_proposal(framework, view, request, outcome, pod))
    plugins = _failed_plugins(outcome)
    message = outcome.message
    if outcome.nominating and outcome.nominated_node:
        view.nominate(pod, outcome.nominated_node)
        return Decision(
            proposal=Proposal(
                tenant=request.tenant,
                pod_key=request.pod_key,
                uid=request.uid,
                attempt=request.attempt,
                node_name=outcome.nominated_node,
                kind="preempt",
                scheduling_cycle=request.scheduling_cycle,
                victims=tuple(Victim(v.key, v.metadata.uid) for v in outcome.victims),
                unschedulable_plugins=plugins,
                message=message,
            )
        )
    result: OutcomeResult = "error" if code == Code.ERROR else "unschedulable"
    nominated: str | None = None
    if outcome.nominating and pod.status.nominated_node_name:
        nominated = ""  # upstream clears a stale nomination when preemption found nothing
        view.nominate(pod, "")
    return Decision(
        outcome=_outcome(
            request,
            result,
            unschedulable_plugins=plugins,
            message=message,
            nominated_node_name=nominated,
        )
    )


def _bind_proposal(
    framework: Framework,
    view: ClusterCache,
    request: ScheduleRequest,
    outcome: SchedulingOutcome,
    pod: Pod,
) -> Proposal:
    node = outcome.node or ""
    seen = view.node(node)
    permit = "allow"
    timeout = 0.0
    waiting_plugins: tuple[str, ...] = ()
    if outcome.status.code == Code.WAIT:
        # The binder waits (gangs span binders); the worker only reports what Permit said.
        waiting = framework.get_waiting_pod(request.uid)
        if waiting is not None:
            timeout = waiting.timeout
            waiting_plugins = tuple(waiting.pending_plugins())
        framework.waiting_pods.remove(request.uid)
        permit = "wait"
    return Proposal(
        tenant=request.tenant,
        pod_key=request.pod_key,
        uid=request.uid,
        attempt=request.attempt,
        node_name=node,
        kind="bind",
        node_resource_version=0 if seen is None else seen.metadata.resource_version,
        scheduling_cycle=request.scheduling_cycle,
        permit="wait" if permit == "wait" else "allow",
        permit_timeout_seconds=timeout,
        permit_plugins=waiting_plugins,
        # The queue's fingerprint of the same bytes, when it sent one.
        pod_fingerprint=request.fingerprint or pod_fingerprint(pod),
        pod_resource_version=pod.metadata.resource_version,
    )


def _failed_plugins(outcome: SchedulingOutcome) -> tuple[str, ...]:
    """QueuedPodInfo.UnschedulablePlugins: the FitError's plugins, else the status's."""
    if outcome.fit_error is not None:
        return tuple(sorted(outcome.fit_error.diagnosis.unschedulable_plugins))
    plugin = outcome.status.plugin
    return (plugin,) if plugin and outcome.status.code != Code.ERROR else ()
