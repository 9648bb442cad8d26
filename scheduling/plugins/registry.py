"""The in-tree plugin registry (upstream pkg/scheduler/framework/plugins/registry.go).

Each plugin package exposes `new(args, handle)`; names are upstream's (plugins/names.py).
Out-of-tree plugins join with `registry.merge(out_of_tree)`, which rejects a name clash.
"""

from __future__ import annotations

from scheduling.framework.interfaces import PluginFactory
from scheduling.framework.registry import Registry
from scheduling.plugins import (
    coscheduling,
    defaultbinder,
    defaultpreemption,
    imagelocality,
    interpodaffinity,
    names,
    nodeaffinity,
    nodename,
    nodeports,
    noderesources,
    nodeunschedulable,
    podtopologyspread,
    queuesort,
    schedulinggates,
    tainttoleration,
)

IN_TREE_FACTORIES: dict[str, PluginFactory] = {
    names.PRIORITY_SORT: queuesort.new,
    names.SCHEDULING_GATES: schedulinggates.new,
    names.NODE_UNSCHEDULABLE: nodeunschedulable.new,
    names.NODE_NAME: nodename.new,
    names.TAINT_TOLERATION: tainttoleration.new,
    names.NODE_AFFINITY: nodeaffinity.new,
    names.NODE_PORTS: nodeports.new,
    names.NODE_RESOURCES_FIT: noderesources.new,
    names.POD_TOPOLOGY_SPREAD: podtopologyspread.new,
    names.INTER_POD_AFFINITY: interpodaffinity.new,
    names.DEFAULT_PREEMPTION: defaultpreemption.new,
    names.NODE_RESOURCES_BALANCED_ALLOCATION: noderesources.new_balanced_allocation,
    names.IMAGE_LOCALITY: imagelocality.new,
    names.DEFAULT_BINDER: defaultbinder.new,
    names.COSCHEDULING: coscheduling.new,
}


def in_tree_registry(out_of_tree: Registry | None = None) -> Registry:
    """A fresh registry of every in-tree plugin, merged with `out_of_tree` when given
    (DuplicatePluginError when an out-of-tree plugin reuses an in-tree name)."""
    registry = Registry(IN_TREE_FACTORIES)
    if out_of_tree is not None:
        registry.merge(out_of_tree)
    return registry
