"""The preemption dry run node by node (cross-node Filter plugins active: InterPodAffinity,
PodTopologySpread): upstream SelectVictimsOnNode on each node's copy of the cycle state,
after one vectorised pass skips the nodes the row-local plugins reject whatever goes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.cycle_state import CycleState
from scheduling.framework.nominated import (
    FilterContext,
    PreFilterExtensions,
    run_filters_with_nominated_pods,
)
from scheduling.framework.pod_index import PodIndex, runs
from scheduling.framework.scratch import Scratch
from scheduling.framework.status import SUCCESS, Code, Status
from scheduling.plugins.defaultpreemption.environment import (
    NO_VICTIMS,
    PreemptionEnvironment,
    SlotCandidate,
)
from scheduling.plugins.defaultpreemption.pdb import pdb_violations
from scheduling.plugins.defaultpreemption.trial import NodeTrial
from shared.models import Pod


def node_by_node(
    index: PodIndex,
    skip_hopeless: bool,
    state: CycleState,
    pod: Pod,
    env: PreemptionEnvironment,
    ctx: FilterContext,
    extensions: Sequence[PreFilterExtensions],
    rotated: NDArray[np.intp],
    eligible: NDArray[np.bool_],
    wanted: int,
) -> tuple[list[SlotCandidate], dict[int, Status], list[str]]:
    """The candidates (those that violate no PodDisruptionBudget first), why the others
    have none, and the errors met."""
    scratch = Scratch(env.nodes, index)
    names = index.names
    hopeless = (
        _hopeless(index, state, pod, ctx, extensions, scratch, rotated, eligible)
        if skip_hopeless
        else np.zeros(len(scratch.columns), dtype=np.bool_)
    )
    fine: list[SlotCandidate] = []
    violating: list[SlotCandidate] = []
    statuses: dict[int, Status] = {}
    errors: list[str] = []
    skipped: list[int] = []

    def visit(row: int) -> SlotCandidate | None:
        row_slots = [s for s in index.row_slots[row] if eligible[s]]
        if not row_slots:
            statuses[row] = NO_VICTIMS
            return None
        found, status = select_victims_on_node(
            index, state, pod, env, ctx, extensions, scratch, row, row_slots
        )
        if found is not None and found.slots.shape[0] == 0:
            found, status = None, no_victim_error(names[row])
        if found is None:
            statuses[row] = status
            if status.code == Code.ERROR:
                errors.append(status.message())
        return found

    for row in rotated.tolist():
        if hopeless[row]:
            skipped.append(row)
            continue
        found = visit(row)
        if found is None:
            continue
        target = violating if found.num_pdb_violations else fine
        if len(target) < wanted:
            target.append(found)
        if fine and len(fine) + len(violating) >= wanted:
            break
    if not fine and not violating:
        # Why the skipped nodes fail, exactly as upstream words it (their first failing
        # plugin may be one the shortcut did not run).
        for row in skipped:
            visit(row)
    return fine + violating, statuses, errors


def _hopeless(
    index: PodIndex,
    state: CycleState,
    pod: Pod,
    ctx: FilterContext,
    extensions: Sequence[PreFilterExtensions],
    scratch: Scratch,
    rotated: NDArray[np.intp],
    eligible: NDArray[np.bool_],
) -> NDArray[np.bool_]:
    """Nodes where the row-local Filter plugins alone reject the pod even with every
    potential victim gone: no candidates, whatever the cross-node plugins say. Found for
    all nodes at once, so the node-by-node walk spends its time on the others."""
    hopeless = np.zeros(len(scratch.columns), dtype=np.bool_)
    cross_node = {e.name for e in extensions}
    row_local = [p for p in ctx.filter_plugins if p.name not in cross_node]
    if not row_local:
        return hopeless
    in_rotation = np.zeros(len(scratch.columns), dtype=np.bool_)
    in_rotation[rotated] = True
    ordered = index.ordered
    slots = ordered[eligible[ordered] & in_rotation[index.row[ordered]]]
    rows, _ = runs(index.row[slots])
    if rows.shape[0] == 0:
        return hopeless
    scratch.remove_slots(slots)
    try:
        local = FilterContext(row_local, (), ctx.nominated)
        out = run_filters_with_nominated_pods(local, state, pod, scratch, rows)
    finally:
        scratch.restore_slots(slots)
    # An Error is not a verdict: those nodes go the whole way.
    failed = ~out.ok
    for status, mask in out.failures:
        if status.code == Code.ERROR:
            failed &= ~mask
    hopeless[rows[failed]] = True
    return hopeless


def select_victims_on_node(
    index: PodIndex,
    state: CycleState,
    pod: Pod,
    env: PreemptionEnvironment,
    ctx: FilterContext,
    extensions: Sequence[PreFilterExtensions],
    scratch: Scratch,
    row: int,
    row_slots: list[int],
) -> tuple[SlotCandidate | None, Status]:
    """Upstream SelectVictimsOnNode on a state copy; leaves `scratch` as it found it."""
    trial = NodeTrial(ctx, state, pod, extensions, scratch, index, row)
    try:
        for slot in row_slots:
            status = trial.take(slot)
            if not status.is_success():
                return None, status
        status = trial.fits()
        if not status.is_success():
            return None, status
        ordered = index.in_order(np.array(row_slots, dtype=np.intp))
        violating = pdb_violations(index, ordered, np.full(len(ordered), row), env.pdbs)
        reprieve = [int(s) for s in ordered[violating]] + [int(s) for s in ordered[~violating]]
        victims: set[int] = set()
        num_violations = 0
        for slot in reprieve:
            status = trial.give_back(slot)
            if not status.is_success():
                return None, status
            if not trial.fits().is_success():
                status = trial.take(slot)
                if not status.is_success():
                    return None, status
                victims.add(slot)
                if violating[np.flatnonzero(ordered == slot)[0]]:
                    num_violations += 1
        chosen = np.array([s for s in ordered.tolist() if s in victims], dtype=np.intp)
        return SlotCandidate(row, chosen, num_violations), SUCCESS
    finally:
        trial.close()


def no_victim_error(node_name: str) -> Status:
    return Status.error(f'expected at least one victim pod on node "{node_name}"')
