"""What a preemption decision reads (its environment, extenders) and reports (messages,
the dry run's candidates), and the small rules around it (eligibility of terminating pods,
which nominations a preemption clears)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns
from scheduling.framework.extender import Victims
from scheduling.framework.interfaces import Diagnosis, FilterPlugin
from scheduling.framework.pod_index import PodIndex
from scheduling.framework.status import Code, Status
from scheduling.plugins.defaultpreemption.candidates import (
    Candidate,
    CandidateTable,
)
from shared.models import Pod, PodDisruptionBudget, priority_of

MSG_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_TERMINATING = "not eligible due to a terminating pod on the nominated node."
MSG_NO_VICTIMS = "No preemption victims found for incoming pod"
MSG_NOT_HELPFUL = "Preemption is not helpful for scheduling"
MSG_NO_CANDIDATE = "no candidate node for preemption"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
DISRUPTION_TARGET = "DisruptionTarget"

NO_VICTIMS = Status.unresolvable(MSG_NO_VICTIMS)
MIN_CHUNK = 128
"""Nodes evaluated together at least, when the dry run walks the nodes chunk by chunk."""


class PreemptionExtender(Protocol):
    """What preemption uses of an extender (scheduling.framework.extender.HTTPExtender)."""

    @property
    def name(self) -> str: ...

    def is_ignorable(self) -> bool: ...

    def supports_preemption(self) -> bool: ...

    def is_interested(self, pod: Pod) -> bool: ...

    def process_preemption(
        self, pod: Pod, victims: Mapping[str, Victims], pods_on_node: Mapping[str, Sequence[Pod]]
    ) -> dict[str, Victims]: ...


@dataclass(slots=True)
class PreemptionEnvironment:
    """What one preemption decision reads from the framework that runs it."""

    nodes: NodeColumns
    filter_plugins: Sequence[FilterPlugin]
    pre_filter_plugins: Sequence[object] = ()
    nominated: Mapping[str, Sequence[Pod]] = field(default_factory=dict)
    pdbs: Sequence[PodDisruptionBudget] = ()
    extenders: Sequence[PreemptionExtender] = ()


@dataclass(slots=True)
class SlotCandidate:
    row: int
    slots: NDArray[np.intp]
    num_pdb_violations: int


@dataclass(slots=True)
class DryRun:
    """Candidates (nodes without PDB violations first), and why other nodes are not."""

    picked: list[SlotCandidate]
    statuses: dict[int, Status]
    """Row -> why that node is not a candidate (nodes evaluated and rejected)."""
    errors: list[str]
    index: PodIndex
    names: list[str]
    table: CandidateTable | None = None
    """The candidates' victims as arrays, for pick_one."""

    def candidate(self, i: int) -> Candidate:
        found = self.picked[i]
        victims = [self.index.pod(s) for s in found.slots.tolist()]
        return Candidate(self.names[found.row], victims, found.num_pdb_violations)

    @property
    def candidates(self) -> list[Candidate]:
        return [self.candidate(i) for i in range(len(self.picked))]


IsEligiblePod = Callable[[Pod, Pod, NodeColumns, int], bool]
"""(victim, preemptor, nodes, row) -> may this victim be preempted (besides lower priority)."""


def aggregate_errors(messages: Sequence[str]) -> str:
    """Upstream utilerrors.NewAggregate(errs).Error(): one message, or "[a, b]" deduplicated."""
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


def fit_error_message(num_all_nodes: int, statuses: Mapping[int, Status]) -> str:
    """FitError.Error(): "0/N nodes are available: <count reason, ...>." where nodes without a
    status count as "Preemption is not helpful for scheduling"."""
    reasons: dict[str, int] = {}
    for status in statuses.values():
        for reason in status.reasons:
            reasons[reason] = reasons.get(reason, 0) + 1
    absent = num_all_nodes - len(statuses)
    if absent > 0:
        reasons[MSG_NOT_HELPFUL] = reasons.get(MSG_NOT_HELPFUL, 0) + absent
    message = f"0/{num_all_nodes} nodes are available:"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    if parts:
        message += " " + ", ".join(parts) + "."
    return message


def rejection_codes(diagnosis: Diagnosis, num_nodes: int) -> NDArray[np.int8]:
    """Filter status code per row; rows the diagnosis does not mention are unresolvable."""
    codes = np.full(num_nodes, int(Code.UNSCHEDULABLE_AND_UNRESOLVABLE), dtype=np.int8)
    for status, rows in diagnosis.rejections:
        # -1 marks a node that left the columns (framework.cycle): it is nowhere now.
        codes[rows[(rows >= 0) & (rows < num_nodes)]] = int(status.code)
    return codes


def terminating_by_preemption(pod: Pod) -> bool:
    """Upstream podTerminatingByPreemption. Pods without conditions in the model: any pod
    being deleted counts (berth deletes victims itself)."""
    if pod.metadata.deletion_timestamp is None:
        return False
    conditions = getattr(pod.status, "conditions", None)
    if conditions is None:
        return True
    for condition in conditions:
        if getattr(condition, "type", "") == DISRUPTION_TARGET:
            return bool(
                getattr(condition, "status", "") == "True"
                and getattr(condition, "reason", "") == PREEMPTION_BY_SCHEDULER
            )
    return False


def lower_priority_nominated_pods(
    pod: Pod, node_name: str, nominated: Mapping[str, Sequence[Pod]]
) -> list[Pod]:
    """Pods nominated to `node_name` with lower priority than `pod`: after preempting there,
    clear their nominatedNodeName so they look elsewhere (upstream prepareCandidate)."""
    priority = priority_of(pod)
    return [p for p in nominated.get(node_name, ()) if loses_nomination(priority_of(p), priority)]


def loses_nomination(nominated_priority: int, preemptor_priority: int) -> bool:
    """Whether a pod nominated to the node a preemptor took loses its nomination: lower
    priority than the preemptor's (upstream prepareCandidate). The dry run and the binder
    both clear nominations by this rule."""
    return nominated_priority < preemptor_priority
