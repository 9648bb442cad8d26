"""Whether a proposed preemption is one the scheduler's own rules call for: the binder's check
before it evicts anything, on its own view (a proposal is evidence, never an order).

A preemption of `victims` on `node` for `pod` is justified when, as the binder sees the cluster:
1. the pod fits no node as things are (upstream preempts only for a pod that fits nowhere);
2. on `node`, with the victims gone, it fits;
3. every victim is needed: given back alone (the others still gone), the pod no longer fits.

Upstream's SelectVictimsOnNode satisfies all three (it reprieves every pod it can, and filters
only lose room as pods are added), whichever order it reprieved in; a forged or stale proposal
that would evict more than the pod is owed, or evict for a pod that fits elsewhere, does not.
Priorities, preemptionPolicy and budgets are checked by the binder beside this.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.nominated import FilterContext, extensions_of
from scheduling.framework.pod_index import PodIndex
from scheduling.framework.runtime import Framework
from scheduling.framework.scratch import Scratch
from scheduling.framework.status import Code
from scheduling.plugins.defaultpreemption.trial import NodeTrial
from shared.models import Pod


def preemption_refusal(
    framework: Framework,
    pod: Pod,
    nodes: NodeColumns,
    node: str,
    victims: Sequence[Pod],
    index: PodIndex | None = None,
) -> str:
    """Why evicting `victims` on `node` for `pod` is not justified ("" when it is), judged by
    the pod's profile's `framework` over `nodes`. `index`: a PodIndex kept between calls
    (synced here), else one built for this call."""
    state = CycleState()
    pre = framework.run_pre_filter_plugins(state, pod, nodes)
    if pre.status.code == Code.ERROR:
        return f"could not check it: {pre.status.message()}"
    if pre.status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
        return f"preemption cannot help {pod.key}: {pre.status.message()}"
    if pre.status.is_success():
        narrowed = pre.result.node_names if pre.result is not None else None
        rows = nodes.row_indices(slice(None))
        if narrowed is not None:
            rows = np.array(sorted(nodes.index[n] for n in narrowed if n in nodes.index), np.intp)
        out = framework.run_filter_plugins_with_nominated_pods(state, pod, nodes, rows)
        if out.status.code == Code.ERROR:
            return f"could not check it: {out.status.message()}"
        feasible = nodes.row_indices(out.feasible)
        if feasible.shape[0]:
            return f"{pod.key} fits node {nodes.names[int(feasible[0])]} without preemption"
    row = nodes.index.get(node)
    if row is None:
        return f"node {node} is not in the binder's view"
    if index is None:
        index = PodIndex(listen=False)
    index.sync(nodes)
    slots = {index.pod(slot).metadata.uid: slot for slot in index.row_slots[row]}
    wanted: list[int] = []
    for victim in victims:
        slot = slots.get(victim.metadata.uid)
        if slot is None:
            return f"victim {victim.key} does not run on {node} in the binder's view"
        wanted.append(slot)
    ctx = FilterContext(
        [plugin for _, plugin in framework.filter_plugins],
        extensions_of([plugin for _, plugin in framework.pre_filter_plugins]),
        framework.nominated_pods(),
    )
    trial = NodeTrial(
        ctx, state, pod, ctx.active_extensions(state), Scratch(nodes, index), index, row
    )
    try:
        for slot in wanted:
            status = trial.take(slot)
            if not status.is_success():
                return f"could not check it: {status.message()}"
        status = trial.fits()
        if not status.is_success():
            return f"{pod.key} does not fit {node} even without the victims: {status.message()}"
        for slot, victim in zip(wanted, victims, strict=True):
            status = trial.give_back(slot)
            if not status.is_success():
                return f"could not check it: {status.message()}"
            if trial.fits().is_success():
                return f"victim {victim.key} is not needed: {pod.key} fits {node} beside it"
            status = trial.take(slot)
            if not status.is_success():
                return f"could not check it: {status.message()}"
        return ""
    finally:
        trial.close()
