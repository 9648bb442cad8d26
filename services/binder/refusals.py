"""What the binder refuses to act on, decided before anything is written.

- A proposal must match the queue's lease of its pod: the queue's verdict
  (services.queue.client.lease_reader; the binder never reads the queue's keys).
- `victims_refusal`: preemption victims must run on the proposal's node with a lower priority,
  and the preemptor must be pending and allowed to preempt (upstream's preemption picks
  nothing else).
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.messaging.proposals import Proposal
from shared.models import PREEMPT_NEVER, Pod, priority_of


def victims_refusal(p: Proposal, preemptor: Pod, victims: Sequence[Pod]) -> str:
    """Why these victims may not be evicted for `preemptor` ("" when they may)."""
    if preemptor.spec.node_name:
        return f"the preemptor {p.pod_key} is bound already"
    if preemptor.spec.preemption_policy == PREEMPT_NEVER:
        return f"the preemptor {p.pod_key} has preemptionPolicy Never"
    priority = priority_of(preemptor)
    for victim in victims:
        if victim.spec.node_name != p.node_name:
            where = victim.spec.node_name or "no node"
            return f"victim {victim.key} runs on {where}, not on {p.node_name}"
        if priority_of(victim) >= priority:
            return (
                f"victim {victim.key} has priority {priority_of(victim)}, not lower than "
                f"the preemptor's {priority}"
            )
    return ""
