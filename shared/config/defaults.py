"""Default plugins and how a profile's plugins are merged into them.

Port of pkg/scheduler/apis/config/v1/default_plugins.go (getDefaultPlugins, mergePlugins,
mergePluginSet).
"""

from __future__ import annotations

from dataclasses import fields

from shared.config.types import PluginRef, Plugins, PluginSet

# Upstream v1 getDefaultPlugins (v1.31+), all through MultiPoint, in this order. berth has no
# volumes and no dynamic resource allocation, so it leaves out VolumeRestrictions,
# NodeVolumeLimits, VolumeBinding, VolumeZone (after NodeResourcesFit upstream) and
# DynamicResources (before DefaultPreemption, on by default since DRA went GA in v1.34).
# Configs written for kube-scheduler may still name them in `disabled` lists, or give
# VolumeBinding args: both are accepted and have no effect (disabled names are never
# checked against the registry; args of unknown plugins are kept raw). Enabling one
# explicitly fails when the profile is expanded: berth has no such plugin.
#
# berth adds Coscheduling (scheduler-plugins' gang scheduling: PreFilter, Reserve/Unreserve,
# Permit), last: berth is a batch scheduler, so pods labelled scheduling.x-k8s.io/pod-group
# wait for their PodGroup's minMember by default. kube-scheduler's default profile has no
# Coscheduling (there it is an out-of-tree plugin one enables by hand). A profile turns it
# off with `plugins: {multiPoint: {disabled: [{name: Coscheduling}]}}` or `plugins: {permit:
# {disabled: [{name: Coscheduling}]}}`; gang pods are then scheduled as ordinary pods.
DEFAULT_MULTI_POINT: tuple[PluginRef, ...] = (
    PluginRef("SchedulingGates"),
    PluginRef("PrioritySort"),
    PluginRef("NodeUnschedulable"),
    PluginRef("NodeName"),
    PluginRef("TaintToleration", 3),
    PluginRef("NodeAffinity", 2),
    PluginRef("NodePorts"),
    PluginRef("NodeResourcesFit", 1),
    PluginRef("PodTopologySpread", 2),
    PluginRef("InterPodAffinity", 2),
    PluginRef("DefaultPreemption"),
    PluginRef("NodeResourcesBalancedAllocation", 1),
    PluginRef("ImageLocality", 1),
    PluginRef("DefaultBinder"),
    PluginRef("Coscheduling"),
)

UPSTREAM_DEFAULTS_NOT_IN_BERTH = frozenset(
    {"VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "DynamicResources"}
)

BERTH_DEFAULTS_NOT_UPSTREAM = frozenset({"Coscheduling"})
"""berth's default profile runs these, kube-scheduler's does not (see DEFAULT_MULTI_POINT)."""

ALL = "*"
"""In a disabled list: drop every default plugin of that extension point."""


def default_plugins() -> Plugins:
    return Plugins(multi_point=PluginSet(enabled=list(DEFAULT_MULTI_POINT)))


def merge_plugins(defaults: Plugins, custom: Plugins | None) -> Plugins:
    """The custom plugins merged into the defaults, one extension point at a time."""
    if custom is None:
        return defaults
    merged = {
        f.name: merge_plugin_set(getattr(defaults, f.name), getattr(custom, f.name))
        for f in fields(Plugins)
    }
    return Plugins(**merged)


def merge_plugin_set(defaults: PluginSet, custom: PluginSet) -> PluginSet:
    """mergePluginSet: defaults minus disabled, custom entries replacing defaults in place.

    - A custom entry naming an enabled default replaces it where the default was (this is
      how a default's weight is changed); if the name is repeated, the last entry replaces
      the default and the others are appended (expansion then reports the duplicate).
    - Other custom entries are appended after the defaults, in order.
    - Disabled entries (custom, then the defaults') are kept: expansion needs them to decide
      which MultiPoint plugins to skip at each extension point.
    """
    disabled = [PluginRef(p.name) for p in (*custom.disabled, *defaults.disabled)]
    disabled_names = {p.name for p in disabled}
    custom_index = {plugin.name: i for i, plugin in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if ALL not in disabled_names:
        for plugin in defaults.enabled:
            if plugin.name in disabled_names:
                continue
            if plugin.name in custom_index:
                i = custom_index[plugin.name]
                plugin = custom.enabled[i]
                replaced.add(i)
            enabled.append(plugin)
    enabled += [plugin for i, plugin in enumerate(custom.enabled) if i not in replaced]
    return PluginSet(enabled=enabled, disabled=disabled)
