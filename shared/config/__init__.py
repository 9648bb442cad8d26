"""The kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration: load, default, validate,
and expand a profile's plugins into per-extension-point lists.

    config = load_config(Path("scheduler.yaml"))       # or default_config()
    profile = config.profile("default-scheduler")
    lists = expand_plugins(profile.plugins, registry_capabilities)
    fit_args = profile.plugin_args(NodeResourcesFitArgs)
"""

from shared.config.defaults import (
    BERTH_DEFAULTS_NOT_UPSTREAM,
    DEFAULT_MULTI_POINT,
    UPSTREAM_DEFAULTS_NOT_IN_BERTH,
    default_plugins,
    merge_plugin_set,
    merge_plugins,
)
from shared.config.errors import ConfigError, InvalidConfigError
from shared.config.expand import (
    Capabilities,
    ExpandedPlugins,
    expand_plugins,
    expand_profiles,
    score_weights,
)
from shared.config.loader import default_config, load_config
from shared.config.plugin_args import (
    ARGS_BY_PLUGIN,
    LEAST_ALLOCATED,
    LIST_DEFAULTING,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    SYSTEM_DEFAULTING,
    CoschedulingArgs,
    DefaultPreemptionArgs,
    InterPodAffinityArgs,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    PluginArgs,
    PodTopologySpreadArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)
from shared.config.types import (
    API_VERSION,
    DEFAULT_SCHEDULER_NAME,
    Extender,
    ExtenderManagedResource,
    ExtenderTLSConfig,
    ExtensionPoint,
    PluginRef,
    Plugins,
    PluginSet,
    Profile,
    SchedulerConfiguration,
)
from shared.config.validation import validate_config

__all__ = [
    "API_VERSION",
    "ARGS_BY_PLUGIN",
    "BERTH_DEFAULTS_NOT_UPSTREAM",
    "DEFAULT_MULTI_POINT",
    "DEFAULT_SCHEDULER_NAME",
    "LEAST_ALLOCATED",
    "LIST_DEFAULTING",
    "MOST_ALLOCATED",
    "REQUESTED_TO_CAPACITY_RATIO",
    "SYSTEM_DEFAULTING",
    "UPSTREAM_DEFAULTS_NOT_IN_BERTH",
    "Capabilities",
    "ConfigError",
    "CoschedulingArgs",
    "DefaultPreemptionArgs",
    "ExpandedPlugins",
    "Extender",
    "ExtenderManagedResource",
    "ExtenderTLSConfig",
    "ExtensionPoint",
    "InterPodAffinityArgs",
    "InvalidConfigError",
    "NodeAffinityArgs",
    "NodeResourcesBalancedAllocationArgs",
    "NodeResourcesFitArgs",
    "PluginArgs",
    "PluginRef",
    "PluginSet",
    "Plugins",
    "PodTopologySpreadArgs",
    "Profile",
    "RequestedToCapacityRatioParam",
    "ResourceSpec",
    "SchedulerConfiguration",
    "ScoringStrategy",
    "UtilizationShapePoint",
    "default_config",
    "default_plugins",
    "expand_plugins",
    "expand_profiles",
    "load_config",
    "merge_plugin_set",
    "merge_plugins",
    "score_weights",
    "validate_config",
]
