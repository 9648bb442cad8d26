"""DefaultPreemption (PostFilter) and the helpers the framework runtime calls around it."""

from scheduling.framework.nominated import (
    FilterContext,
    FilterOutcome,
    PreFilterExtensions,
    ge_nominated_pods,
    nominated_pods_from,
    run_filter_plugins,
    run_filters_with_nominated_pods,
)
from scheduling.framework.scratch import Scratch
from scheduling.plugins.defaultpreemption.candidates import (
    Candidate,
    more_important_pod,
    num_candidates,
    pick_one_node_for_preemption,
)
from scheduling.plugins.defaultpreemption.default_preemption import (
    DefaultPreemption,
    environment_from_handle,
    new,
)
from scheduling.plugins.defaultpreemption.environment import (
    PreemptionEnvironment,
    fit_error_message,
    loses_nomination,
    lower_priority_nominated_pods,
)
from scheduling.plugins.defaultpreemption.evaluator import Evaluator

__all__ = [
    "Candidate",
    "DefaultPreemption",
    "Evaluator",
    "FilterContext",
    "FilterOutcome",
    "PreFilterExtensions",
    "PreemptionEnvironment",
    "Scratch",
    "environment_from_handle",
    "fit_error_message",
    "ge_nominated_pods",
    "loses_nomination",
    "lower_priority_nominated_pods",
    "more_important_pod",
    "new",
    "nominated_pods_from",
    "num_candidates",
    "pick_one_node_for_preemption",
    "run_filter_plugins",
    "run_filters_with_nominated_pods",
]
