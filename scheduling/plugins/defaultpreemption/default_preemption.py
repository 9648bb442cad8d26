"""DefaultPreemption: the PostFilter plugin (upstream plugins/defaultpreemption).

When no node fits a pod, find a node where evicting lower-priority pods makes it fit, and
return that node (the pod's nominatedNodeName) with the victims. The framework deletes the
victims, sets status.nominatedNodeName and retries the pod (see `evaluator` for the algorithm).

Results, as upstream:
- (PostFilterResult(node, victims), Success): preempt on `node`.
- (PostFilterResult(""), Unschedulable "preemption: 0/N nodes are available: ..."): preemption
  cannot help; clear the pod's nominatedNodeName.
- (None, Unschedulable): not eligible (preemptionPolicy Never, victims still terminating on the
  nominated node); keep nominatedNodeName as it is.
- (None, Error): something failed; retry with backoff.

What the plugin reads from its framework handle (attributes or zero-argument methods; missing
ones mean "none"): `filter_plugins` and `pre_filter_plugins` (the profile's enabled plugins, in
order), `nominated_pods` (node name -> pods nominated there), `pod_disruption_budgets`,
`extenders`, and `seed` (int, for the random dry-run offset).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, cast

from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import (
    Diagnosis,
    Handle,
    PostFilterPlugin,
    PostFilterResult,
)
from scheduling.framework.status import Status
from scheduling.plugins import names
from scheduling.plugins.defaultpreemption.environment import (
    IsEligiblePod,
    PreemptionEnvironment,
    PreemptionExtender,
)
from scheduling.plugins.defaultpreemption.evaluator import Evaluator
from shared.config import DefaultPreemptionArgs
from shared.models import Pod

PREFIX = "preemption: "

EnvironmentSource = Callable[[NodeColumns], PreemptionEnvironment]


def environment_from_handle(handle: Handle, nodes: NodeColumns) -> PreemptionEnvironment:
    """Build a decision's inputs from a framework handle (see the module docstring)."""
    filters = handle.filter_plugins
    pre_filters = handle.pre_filter_plugins
    nominated = handle.nominated_pods
    pdbs = handle.pod_disruption_budgets
    extenders = handle.extenders
    return PreemptionEnvironment(
        nodes=nodes,
        filter_plugins=filters,
        pre_filter_plugins=pre_filters,
        nominated=nominated,
        pdbs=pdbs,
        extenders=cast(Sequence[PreemptionExtender], extenders),
    )


class DefaultPreemption:
    name: ClassVar[str] = names.DEFAULT_PREEMPTION

    def __init__(
        self,
        args: DefaultPreemptionArgs | None = None,
        handle: Handle | None = None,
        *,
        seed: int = 0,
        offset: Callable[[int], int] | None = None,
        is_eligible_pod: IsEligiblePod | None = None,
        environment: EnvironmentSource | None = None,
    ) -> None:
        args = args or DefaultPreemptionArgs()
        self.args = args
        self.handle = handle
        self._rng = random.Random(seed)
        self._environment = environment
        self.evaluator = Evaluator(
            args.min_candidate_nodes_percentage,
            args.min_candidate_nodes_absolute,
            offset=offset or self._random_offset,
            is_eligible_pod=is_eligible_pod,
        )

    def _random_offset(self, num_nodes: int) -> int:
        """Upstream rand.Int31n(numNodes), from this plugin's seeded generator."""
        return self._rng.randrange(num_nodes)

    def environment(self, nodes: NodeColumns) -> PreemptionEnvironment:
        if self._environment is not None:
            return self._environment(nodes)
        if self.handle is None:
            raise ValueError("DefaultPreemption needs a framework handle or an environment")
        return environment_from_handle(self.handle, nodes)

    def post_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        env = self.environment(nodes)
        result, status = self.evaluator.preempt(state, pod, env, diagnosis)
        message = status.message()
        if message:
            status = Status(status.code, (PREFIX + message,), self.name)
        return result, status


def new(args: object | None, handle: Handle) -> DefaultPreemption:
    """Registry factory: args are the profile's DefaultPreemptionArgs (or None)."""
    if args is not None and not isinstance(args, DefaultPreemptionArgs):
        raise TypeError(f"got args of type {type(args).__name__}, want DefaultPreemptionArgs")
    return DefaultPreemption(args, handle, seed=handle.seed)


if TYPE_CHECKING:
    _post_filter: type[PostFilterPlugin] = DefaultPreemption
