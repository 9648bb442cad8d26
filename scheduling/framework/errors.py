"""Why a scheduling cycle found no node (upstream schedulePod's errors).

    SchedulingError            (Exception)
    ├── NoNodesAvailableError  the cluster has no nodes: "no nodes available to schedule pods"
    ├── FitError               no node fits; carries the Diagnosis (the pod is unschedulable)
    └── CycleError             a plugin failed (Error status); the pod is retried with backoff

Statuses stay values inside the framework; only `schedule_pod` raises these, as upstream's
schedulePod returns (result, err).
"""

from __future__ import annotations

from collections import Counter

from scheduling.framework.interfaces import Diagnosis
from scheduling.framework.status import Code, Status
from shared.models import Pod

NO_NODES_AVAILABLE_MSG = "no nodes available to schedule pods"
NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"


class SchedulingError(Exception):
    """A scheduling cycle ended without a node."""

    def status(self) -> Status:
        """The status the cycle ends with (upstream wraps the error in a Status)."""
        return Status(Code.ERROR, (str(self),))


class NoNodesAvailableError(SchedulingError):
    def __init__(self) -> None:
        super().__init__(NO_NODES_AVAILABLE_MSG)

    def status(self) -> Status:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_NODES_AVAILABLE_MSG,))


class CycleError(SchedulingError):
    """A plugin returned an Error status (or raised); `error` keeps it, with its plugin."""

    def __init__(self, error: Status) -> None:
        super().__init__(error.message())
        self.error = error

    def status(self) -> Status:
        return self.error


class FitError(SchedulingError):
    """No node fits the pod. The message is computed on demand, like upstream FitError.Error(),
    because PostFilter adds its message to the diagnosis after the error is raised."""

    def __init__(self, pod: Pod, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        return fit_error_message(self.num_all_nodes, self.diagnosis)

    def status(self) -> Status:
        """Unschedulable with the FitError message (upstream NewStatus(Unschedulable).WithError)."""
        return Status(Code.UNSCHEDULABLE, (str(self),))


def fit_error_message(num_all_nodes: int, diagnosis: Diagnosis) -> str:
    """Upstream FitError.Error():

    "0/N nodes are available: <PreFilterMsg>. <count reason, ...>. <PostFilterMsg>"

    When PreFilter rejected the pod, its message replaces the per-node reasons (every node
    carries the same status then). Otherwise each reason of each rejected node is counted;
    the "count reason" strings are sorted as strings (so "10 x" sorts before "2 y", as Go's
    sort.Strings does).
    """
    message = NO_NODE_AVAILABLE_MSG.format(num_all_nodes) + ":"
    if diagnosis.pre_filter_msg:
        message += f" {diagnosis.pre_filter_msg}."
    else:
        counts: Counter[str] = Counter()
        for status, rows in diagnosis.rejections:
            n = int(rows.shape[0])
            if n == 0:
                continue
            for reason in status.reasons:
                counts[reason] += n
        histogram = sorted(f"{count} {reason}" for reason, count in counts.items())
        if histogram:
            message += f" {', '.join(histogram)}."
    if diagnosis.post_filter_msg:
        message += f" {diagnosis.post_filter_msg}"
    return message
