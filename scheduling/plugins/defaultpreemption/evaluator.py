"""The preemption evaluator: upstream pkg/scheduler/framework/preemption (Evaluator.Preempt,
findCandidates, DryRunPreemption, SelectCandidate) with DefaultPreemption's
SelectVictimsOnNode, for one pod that fits no node.

1. The pod must be eligible (preemptionPolicy, terminating victims on its nominated node).
2. Potential nodes: those whose Filter status was Unschedulable (not UnschedulableAndUnresolvable,
   and not absent: a node no Filter judged counts as unresolvable, as upstream).
3. Dry run, from a random offset and wrapping around, until `num_candidates` candidates are
   found and at least one of them violates no PDB. On each node: remove every pod of lower
   priority; if the pod does not fit, the node is out (no cross-node preemption; no
   affinity to victims). Otherwise reprieve victims one by one, PDB-violating ones first,
   each group most important first, keeping a pod whenever the preemptor still fits.
4. Extenders that support preemption may drop or change candidates.
5. Pick one node (candidates.pick_one).

Two ways to run the dry run, with the same answers (tests compare them with a plain reference):
- **many nodes at once** when every active Filter plugin is row-local (no active PreFilter
  extensions). Nodes are taken in chunks in rotation order (2 x num_candidates, then doubling)
  until the chunks hold enough candidates; within a chunk, removing all victims is one
  vectorised subtraction, the Filter plugins run once over the chunk, and reprieving runs one
  Filter pass per victim rank (the k-th victim of every node at once). A handful of numpy
  passes instead of thousands of per-node calls.
- **node by node** otherwise (InterPodAffinity, PodTopologySpread active): each node gets a copy
  of the cycle state, updated through the plugins' add_pod/remove_pod, as upstream. Nodes the
  row-local plugins reject even with every victim gone are skipped first, in one vectorised
  pass (visited only when no candidate turns up, for their exact rejection reason).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.extender import Victims
from scheduling.framework.interfaces import Diagnosis, PostFilterResult
from scheduling.framework.nominated import (
    FilterContext,
    extensions_of,
    run_filters_with_nominated_pods,
)
from scheduling.framework.pod_index import PodIndex, group_starts, runs
from scheduling.framework.scratch import Scratch
from scheduling.framework.status import SUCCESS, Code, Status
from scheduling.plugins.defaultpreemption.candidates import (
    Candidate,
    CandidateTable,
    num_candidates,
    pick_one,
)
from scheduling.plugins.defaultpreemption.chunks import Chunk, Collected
from scheduling.plugins.defaultpreemption.environment import (
    MIN_CHUNK,
    MSG_NEVER,
    MSG_NO_CANDIDATE,
    MSG_TERMINATING,
    NO_VICTIMS,
    DryRun,
    IsEligiblePod,
    PreemptionEnvironment,
    PreemptionExtender,
    SlotCandidate,
    aggregate_errors,
    fit_error_message,
    rejection_codes,
    terminating_by_preemption,
)
from scheduling.plugins.defaultpreemption.node_by_node import no_victim_error, node_by_node
from scheduling.plugins.defaultpreemption.pdb import pdb_violations
from shared.models import PREEMPT_NEVER, Pod, priority_of


class Evaluator:
    def __init__(
        self,
        min_candidate_nodes_percentage: int = 10,
        min_candidate_nodes_absolute: int = 100,
        *,
        offset: Callable[[int], int],
        is_eligible_pod: IsEligiblePod | None = None,
        clock: Callable[[], float] = time.time,
        skip_hopeless_nodes: bool = True,
    ) -> None:
        """`skip_hopeless_nodes=False`: the node-by-node dry run visits every node as upstream
        does, even those the row-local plugins already rule out (same answers, slower)."""
        self.min_percentage = min_candidate_nodes_percentage
        self.min_absolute = min_candidate_nodes_absolute
        self.offset = offset
        self.is_eligible_pod = is_eligible_pod
        self.clock = clock
        self.skip_hopeless_nodes = skip_hopeless_nodes
        self.index = PodIndex()

    # ---------------------------------------------------------------- eligibility
    def eligible(self, pod: Pod, nodes: NodeColumns, codes: NDArray[np.int8]) -> tuple[bool, str]:
        """Upstream PodEligibleToPreemptOthers."""
        if pod.spec.preemption_policy == PREEMPT_NEVER:
            return False, MSG_NEVER
        nominated = pod.status.nominated_node_name
        if nominated:
            row = nodes.index.get(nominated)
            if row is None or codes[row] == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                # The nominated node cannot help any more: preempting again is fine.
                return True, ""
            priority = priority_of(pod)
            for victim in nodes.pods_by_node[row]:
                if priority_of(victim) < priority and terminating_by_preemption(victim):
                    return False, MSG_TERMINATING
        return True, ""

    # -------------------------------------------------------------------- preempt
    def preempt(
        self, state: CycleState, pod: Pod, env: PreemptionEnvironment, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """Upstream Evaluator.Preempt (messages without the "preemption: " prefix)."""
        nodes = env.nodes
        num_nodes = len(nodes)
        codes = rejection_codes(diagnosis, num_nodes)
        ok, message = self.eligible(pod, nodes, codes)
        if not ok:
            return None, Status.unschedulable(message)
        if num_nodes == 0:
            return None, Status.error("no nodes available")
        potential = np.flatnonzero(codes == Code.UNSCHEDULABLE).astype(np.intp)
        if potential.shape[0] == 0:
            return PostFilterResult(nominated_node=""), Status.unschedulable(
                fit_error_message(num_nodes, {})
            )
        offset = self.offset(int(potential.shape[0]))
        wanted = num_candidates(int(potential.shape[0]), self.min_percentage, self.min_absolute)
        run = self.dry_run(state, pod, env, potential, offset, wanted)
        if run.errors and not run.picked:
            return None, Status.error(aggregate_errors(run.errors))
        if not run.picked:
            return PostFilterResult(nominated_node=""), Status.unschedulable(
                fit_error_message(num_nodes, run.statuses)
            )
        if self._preempting_extenders(pod, env):
            candidates, status = self.call_extenders(pod, env, run.candidates)
            if not status.is_success():
                return None, status
            best_index = pick_one(CandidateTable.from_candidates(candidates, self.clock()))
            best = candidates[best_index] if best_index >= 0 else None
        else:
            assert run.table is not None
            best_index = pick_one(run.table)
            best = run.candidate(best_index) if best_index >= 0 else None
        if best is None:
            return None, Status.unschedulable(MSG_NO_CANDIDATE)
        return PostFilterResult(nominated_node=best.node_name, victims=list(best.victims)), SUCCESS

    @staticmethod
    def _preempting_extenders(pod: Pod, env: PreemptionEnvironment) -> list[PreemptionExtender]:
        return [e for e in env.extenders if e.supports_preemption() and e.is_interested(pod)]

    def call_extenders(
        self, pod: Pod, env: PreemptionEnvironment, candidates: list[Candidate]
    ) -> tuple[list[Candidate], Status]:
        """Upstream callExtenders: extenders that support preemption filter the candidates."""
        extenders = self._preempting_extenders(pod, env)
        if not extenders:
            return candidates, SUCCESS
        victims: dict[str, Victims] = {
            c.node_name: Victims(list(c.victims), c.num_pdb_violations) for c in candidates
        }
        nodes = env.nodes
        pods_on_node = {name: nodes.pods_by_node[nodes.index[name]] for name in nodes.names}
        for extender in extenders:
            try:
                result = extender.process_preemption(pod, victims, pods_on_node)
            except Exception as exc:  # noqa: BLE001 - an extender's failure is data here
                if extender.is_ignorable():
                    continue
                return [], Status.error(str(exc))
            checked: dict[str, Victims] = {}
            for node_name, node_victims in result.items():
                if not node_victims.pods:
                    if extender.is_ignorable():
                        continue
                    return [], Status.error(
                        f'expected at least one victim pod on node "{node_name}"'
                    )
                checked[node_name] = node_victims
            victims = checked
            if not victims:
                break
        return [
            Candidate(name, list(v.pods), v.num_pdb_violations) for name, v in victims.items()
        ], SUCCESS

    # -------------------------------------------------------------------- dry run
    def dry_run(
        self,
        state: CycleState,
        pod: Pod,
        env: PreemptionEnvironment,
        potential: NDArray[np.intp],
        offset: int,
        wanted: int,
    ) -> DryRun:
        """Upstream DryRunPreemption over `potential` rows (in node order), starting at
        `offset`: candidates that violate no PDB first, then the others."""
        nodes = env.nodes
        index = self.index
        index.sync(nodes)
        now = self.clock()
        ctx = FilterContext(
            env.filter_plugins, extensions_of(env.pre_filter_plugins), env.nominated
        )
        eligible = self._eligible(pod, nodes, potential)
        rotated = np.roll(potential, -offset)
        extensions = ctx.active_extensions(state)
        if extensions:
            picked, statuses, errors = node_by_node(
                index,
                self.skip_hopeless_nodes,
                state,
                pod,
                env,
                ctx,
                extensions,
                rotated,
                eligible,
                wanted,
            )
            return self._result(picked, statuses, errors, now)
        return self._all_nodes(state, pod, env, ctx, rotated, eligible, wanted, now)

    def _eligible(
        self, pod: Pod, nodes: NodeColumns, potential: NDArray[np.intp]
    ) -> NDArray[np.bool_]:
        """Per slot: a pod on a potential node that this pod may preempt (lower priority)."""
        index = self.index
        on_potential = np.zeros(len(nodes), dtype=np.bool_)
        on_potential[potential] = True
        mask = index.alive & (index.priority < priority_of(pod))
        mask &= on_potential[index.row]
        check = self.is_eligible_pod
        if check is not None:
            for slot in np.flatnonzero(mask).tolist():
                mask[slot] = check(index.pod(slot), pod, nodes, int(index.row[slot]))
        return mask

    # ------------------------------------------------------------ all nodes at once
    def _all_nodes(
        self,
        state: CycleState,
        pod: Pod,
        env: PreemptionEnvironment,
        ctx: FilterContext,
        rotated: NDArray[np.intp],
        eligible: NDArray[np.bool_],
        wanted: int,
        now: float,
    ) -> DryRun:
        """The dry run over chunks of nodes in rotation order (each chunk evaluated at once),
        until the chunks so far hold enough candidates: the answer a sequential walk gives."""
        scratch = Scratch(env.nodes, self.index)
        collected = Collected(wanted)
        evaluated: list[Chunk] = []
        begin, size = 0, max(2 * wanted, MIN_CHUNK)
        while begin < rotated.shape[0] and not collected.done:
            chunk = self._evaluate_chunk(
                state, pod, env, ctx, scratch, rotated[begin : begin + size], eligible
            )
            collected.add(chunk)
            evaluated.append(chunk)
            begin += size
            size *= 2
        picked = collected.fine + collected.bad
        statuses: dict[int, Status] = {}
        errors: list[str] = []
        if not picked:
            for chunk in evaluated:
                self._why_not(chunk, statuses, errors)
        return self._result(picked, statuses, errors, now)

    def _evaluate_chunk(
        self,
        state: CycleState,
        pod: Pod,
        env: PreemptionEnvironment,
        ctx: FilterContext,
        scratch: Scratch,
        rows_in_order: NDArray[np.intp],
        eligible: NDArray[np.bool_],
    ) -> Chunk:
        """SelectVictimsOnNode for every node of the chunk at once."""
        index = self.index
        n = len(env.nodes)
        in_chunk = np.zeros(n, dtype=np.bool_)
        in_chunk[rows_in_order] = True
        ordered = index.ordered
        slots = ordered[eligible[ordered] & in_chunk[index.row[ordered]]]
        rows = index.row[slots]
        with_victims, counts = runs(rows)
        # Remove every potential victim, then: does the pod fit at all?
        scratch.remove_slots(slots)
        first = run_filters_with_nominated_pods(ctx, state, pod, scratch, with_victims)

        keep = np.repeat(first.ok, counts)
        vslots, vrows = slots[keep], rows[keep]
        violating = pdb_violations(index, vslots, vrows, env.pdbs)
        # Reprieve order: violating victims first, each group most important first.
        if bool(violating.any()):
            order = np.argsort(vrows * 2 + ~violating, kind="stable").astype(np.intp)
        else:
            order = np.arange(vslots.shape[0], dtype=np.intp)
        rrows = vrows[order]
        rank = np.arange(rrows.shape[0]) - group_starts(rrows)
        is_victim = np.zeros(order.shape[0], dtype=np.bool_)
        # Step k reprieves the k-th victim of every node at once (rows are distinct).
        for k in range(int(rank.max()) + 1 if rank.shape[0] else 0):
            sel = np.flatnonzero(rank == k)
            step_slots = vslots[order[sel]]
            scratch.restore_slots(step_slots)
            out = run_filters_with_nominated_pods(ctx, state, pod, scratch, rrows[sel])
            bad = ~out.ok
            if bool(bad.any()):
                scratch.remove_slots(step_slots[bad])
                is_victim[sel[bad]] = True

        # Victims, most important first per row (positions into vslots keep that order).
        chosen = np.sort(order[is_victim])
        victim_slots, victim_rows = vslots[chosen], vrows[chosen]
        victims_per_row = np.bincount(victim_rows, minlength=n)
        violations_per_row = np.bincount(
            victim_rows, weights=violating[chosen], minlength=n
        ).astype(np.int64)
        return Chunk(
            rows_in_order,
            with_victims,
            first,
            victim_slots,
            victim_rows,
            victims_per_row,
            violations_per_row,
        )

    def _why_not(self, chunk: Chunk, statuses: dict[int, Status], errors: list[str]) -> None:
        names = self.index_names()
        failed = chunk.first.statuses_by_row()
        has_victims = set(chunk.with_victims.tolist())
        for row in chunk.rows.tolist():
            if row not in has_victims:
                status = NO_VICTIMS
            elif row in failed:
                status = failed[row]
            elif chunk.victims_per_row[row] == 0:
                status = no_victim_error(names[row])
            else:
                continue
            statuses[row] = status
            if status.code == Code.ERROR:
                errors.append(status.message())

    def index_names(self) -> list[str]:
        return self.index.names

    def _result(
        self,
        picked: list[SlotCandidate],
        statuses: dict[int, Status],
        errors: list[str],
        now: float,
    ) -> DryRun:
        index = self.index
        table = None
        if picked:
            all_slots = np.concatenate([c.slots for c in picked])
            offsets = np.zeros(len(picked) + 1, dtype=np.intp)
            offsets[1:] = np.cumsum([c.slots.shape[0] for c in picked])
            table = CandidateTable(
                np.array([c.num_pdb_violations for c in picked], dtype=np.int64),
                offsets,
                index.priority[all_slots],
                index.start_or(all_slots, now),
            )
        return DryRun(picked, statuses, errors, index, self.index_names(), table)
