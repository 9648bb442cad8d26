"""The defaulted configuration equals upstream v1's (pkg/scheduler/apis/config/v1/
default_plugins.go, defaults.go and apis/config/testing/defaults), minus what berth lacks, plus
Coscheduling (berth is a batch scheduler: gangs are on by default)."""

from __future__ import annotations

import pytest

from shared.config import (
    BERTH_DEFAULTS_NOT_UPSTREAM,
    DEFAULT_MULTI_POINT,
    UPSTREAM_DEFAULTS_NOT_IN_BERTH,
    CoschedulingArgs,
    DefaultPreemptionArgs,
    ExtensionPoint,
    InterPodAffinityArgs,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    PluginRef,
    PodTopologySpreadArgs,
    ResourceSpec,
    ScoringStrategy,
    default_config,
    expand_plugins,
)
from tests.config.capabilities import IN_TREE

# getDefaultPlugins, v1.31..v1.33 (the DynamicResources gate off).
UPSTREAM_MULTI_POINT = [
    PluginRef("SchedulingGates"),
    PluginRef("PrioritySort"),
    PluginRef("NodeUnschedulable"),
    PluginRef("NodeName"),
    PluginRef("TaintToleration", 3),
    PluginRef("NodeAffinity", 2),
    PluginRef("NodePorts"),
    PluginRef("NodeResourcesFit", 1),
    PluginRef("VolumeRestrictions"),
    PluginRef("NodeVolumeLimits"),
    PluginRef("VolumeBinding"),
    PluginRef("VolumeZone"),
    PluginRef("PodTopologySpread", 2),
    PluginRef("InterPodAffinity", 2),
    PluginRef("DefaultPreemption"),
    PluginRef("NodeResourcesBalancedAllocation", 1),
    PluginRef("ImageLocality", 1),
    PluginRef("DefaultBinder"),
]


def test_default_multi_point_is_upstream_without_volume_plugins_plus_coscheduling() -> None:
    want = [p for p in UPSTREAM_MULTI_POINT if p.name not in UPSTREAM_DEFAULTS_NOT_IN_BERTH]
    assert list(DEFAULT_MULTI_POINT) == [*want, PluginRef("Coscheduling")]
    assert {"Coscheduling"} == BERTH_DEFAULTS_NOT_UPSTREAM


def test_default_config_top_level() -> None:
    config = default_config()
    assert config.parallelism == 16
    assert config.percentage_of_nodes_to_score is None
    assert config.pod_initial_backoff_seconds == 1
    assert config.pod_max_backoff_seconds == 10
    assert config.pod_max_in_unschedulable_pods_duration_seconds == 300
    assert config.extenders == []
    assert [p.scheduler_name for p in config.profiles] == ["default-scheduler"]


def test_default_profile_plugins_are_all_multi_point() -> None:
    plugins = default_config().profiles[0].plugins
    assert plugins.multi_point.enabled == list(DEFAULT_MULTI_POINT)
    for point in ExtensionPoint:
        assert plugins.at(point).enabled == []
        assert plugins.at(point).disabled == []


def test_default_plugin_args() -> None:
    """PluginConfigsV1 without VolumeBindingArgs, plus CoschedulingArgs (scheduler-plugins'
    defaults), in upstream's sorted order."""
    cpu_memory = [ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1)]
    assert default_config().profiles[0].plugin_config == {
        "Coscheduling": CoschedulingArgs(
            permit_waiting_time_seconds=60, pod_group_backoff_seconds=0
        ),
        "DefaultPreemption": DefaultPreemptionArgs(
            min_candidate_nodes_percentage=10, min_candidate_nodes_absolute=100
        ),
        "InterPodAffinity": InterPodAffinityArgs(hard_pod_affinity_weight=1),
        "NodeAffinity": NodeAffinityArgs(),
        "NodeResourcesBalancedAllocation": NodeResourcesBalancedAllocationArgs(
            resources=cpu_memory
        ),
        "NodeResourcesFit": NodeResourcesFitArgs(
            scoring_strategy=ScoringStrategy(type="LeastAllocated", resources=cpu_memory)
        ),
        "PodTopologySpread": PodTopologySpreadArgs(defaulting_type="System"),
    }
    assert list(default_config().profiles[0].plugin_config) == sorted(
        default_config().profiles[0].plugin_config
    )


def _refs(*names: str) -> list[PluginRef]:
    return [PluginRef(name) for name in names]


# ExpandedPluginsV1 (apis/config/testing/defaults) without the volume plugins, plus Coscheduling
# (last in MultiPoint) at PreFilter, Reserve and Permit.
EXPANDED_DEFAULTS = {
    ExtensionPoint.PRE_ENQUEUE: _refs("SchedulingGates"),
    ExtensionPoint.QUEUE_SORT: _refs("PrioritySort"),
    ExtensionPoint.PRE_FILTER: _refs(
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "Coscheduling",
    ),
    ExtensionPoint.FILTER: _refs(
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
    ),
    ExtensionPoint.POST_FILTER: _refs("DefaultPreemption"),
    ExtensionPoint.PRE_SCORE: _refs(
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
    ),
    ExtensionPoint.SCORE: [
        PluginRef("TaintToleration", 3),
        PluginRef("NodeAffinity", 2),
        PluginRef("NodeResourcesFit", 1),
        PluginRef("PodTopologySpread", 2),
        PluginRef("InterPodAffinity", 2),
        PluginRef("NodeResourcesBalancedAllocation", 1),
        PluginRef("ImageLocality", 1),
    ],
    ExtensionPoint.RESERVE: _refs("Coscheduling"),
    ExtensionPoint.PERMIT: _refs("Coscheduling"),
    ExtensionPoint.PRE_BIND: [],
    ExtensionPoint.BIND: _refs("DefaultBinder"),
    ExtensionPoint.POST_BIND: [],
}


@pytest.mark.parametrize("point", list(ExtensionPoint), ids=str)
def test_default_profile_expands_like_upstream(point: ExtensionPoint) -> None:
    expanded = expand_plugins(default_config().profiles[0].plugins, IN_TREE)
    assert expanded[point] == EXPANDED_DEFAULTS[point]
