"""Extension points of the in-tree plugins (what the plugin registry reports), from upstream
pkg/scheduler/framework/plugins, for expanding the default profile in tests."""

from __future__ import annotations

from shared.config import ExtensionPoint as E

IN_TREE: dict[str, frozenset[str]] = {
    "SchedulingGates": frozenset({E.PRE_ENQUEUE}),
    "PrioritySort": frozenset({E.QUEUE_SORT}),
    "NodeUnschedulable": frozenset({E.FILTER}),
    "NodeName": frozenset({E.FILTER}),
    "TaintToleration": frozenset({E.FILTER, E.PRE_SCORE, E.SCORE}),
    "NodeAffinity": frozenset({E.PRE_FILTER, E.FILTER, E.PRE_SCORE, E.SCORE}),
    "NodePorts": frozenset({E.PRE_FILTER, E.FILTER}),
    "NodeResourcesFit": frozenset({E.PRE_FILTER, E.FILTER, E.PRE_SCORE, E.SCORE}),
    "PodTopologySpread": frozenset({E.PRE_FILTER, E.FILTER, E.PRE_SCORE, E.SCORE}),
    "InterPodAffinity": frozenset({E.PRE_FILTER, E.FILTER, E.PRE_SCORE, E.SCORE}),
    "DefaultPreemption": frozenset({E.POST_FILTER}),
    "NodeResourcesBalancedAllocation": frozenset({E.PRE_SCORE, E.SCORE}),
    "ImageLocality": frozenset({E.SCORE}),
    "DefaultBinder": frozenset({E.BIND}),
    # scheduler-plugins pkg/coscheduling, in berth's default profile (without QueueSort and
    # PostFilter).
    "Coscheduling": frozenset({E.PRE_FILTER, E.RESERVE, E.PERMIT}),
}
