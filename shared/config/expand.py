"""From a profile's merged plugins to the ordered plugin list of each extension point.

Port of the plugin-list part of upstream frameworkImpl (pkg/scheduler/framework/runtime/
framework.go: NewFramework, updatePluginList, expandMultiPointPlugins, getScoreWeights) and of
profile.NewMap's cross-profile checks. Which extension points a plugin implements comes from
the plugin registry as `capabilities`: plugin name -> the ExtensionPoint values it implements.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.config.defaults import ALL
from shared.config.errors import ConfigError
from shared.config.types import ExtensionPoint, PluginRef, Plugins, SchedulerConfiguration

Capabilities = Mapping[str, frozenset[str]]
ExpandedPlugins = dict[str, list[PluginRef]]
"""ExtensionPoint value -> the plugins run there, in order; score entries carry their weight."""

MAX_NODE_SCORE = 100
MAX_TOTAL_SCORE = 2**63 - 1


def expand_plugins(plugins: Plugins, capabilities: Capabilities) -> ExpandedPlugins:
    """The per-extension-point plugin lists of one profile.

    1. Plugins enabled at a specific extension point must exist, implement that point, and
       appear once there.
    2. Each MultiPoint plugin joins every extension point it implements, unless that point
       disables it (or disables "*"). If the point also enables it explicitly, the explicit
       entry wins. Resulting order at each point (upstream): the explicitly enabled plugins
       that override a MultiPoint entry (in their explicit order), then the MultiPoint-only
       plugins, then the remaining explicit plugins.
    3. Score weight: the plugin's explicit score entry, else its MultiPoint entry; an unset or
       zero weight counts as 1.
    4. Exactly one QueueSort plugin and at least one Bind plugin.
    """
    multi_point = plugins.multi_point.enabled
    for plugin in multi_point:
        _check_exists(plugin.name, "multi_point", capabilities)
    expanded: dict[str, list[str]] = {}
    for point in ExtensionPoint:
        explicit = _explicit_names(plugins, point, capabilities)
        disabled = {plugin.name for plugin in plugins.at(point).disabled}
        if not multi_point or ALL in disabled:
            expanded[point] = explicit
            continue
        overrides: list[str] = []
        from_multi_point: list[str] = []
        for plugin in multi_point:
            if point not in capabilities[plugin.name] or plugin.name in disabled:
                continue
            if plugin.name in explicit:
                overrides.append(plugin.name)
            elif plugin.name in from_multi_point:
                raise ConfigError(f'plugin "{plugin.name}" already registered as {point} plugin')
            else:
                from_multi_point.append(plugin.name)
        expanded[point] = (
            [name for name in explicit if name in overrides]
            + from_multi_point
            + [name for name in explicit if name not in overrides]
        )

    if len(expanded[ExtensionPoint.QUEUE_SORT]) != 1:
        got = len(expanded[ExtensionPoint.QUEUE_SORT])
        raise ConfigError(f"only one queue sort plugin required, but got {got}")
    if not expanded[ExtensionPoint.BIND]:
        raise ConfigError("at least one bind plugin is needed")

    weights = score_weights(plugins, capabilities)
    return {
        point: [
            PluginRef(name, weights[name] if point == ExtensionPoint.SCORE else None)
            for name in names
        ]
        for point, names in expanded.items()
    }


def _check_exists(name: str, point: str, capabilities: Capabilities) -> None:
    if name not in capabilities:
        raise ConfigError(f'{point} plugin "{name}" does not exist')


def _explicit_names(
    plugins: Plugins, point: ExtensionPoint, capabilities: Capabilities
) -> list[str]:
    """updatePluginList: the plugins enabled at this very extension point."""
    names: list[str] = []
    for plugin in plugins.at(point).enabled:
        _check_exists(plugin.name, point, capabilities)
        if point not in capabilities[plugin.name]:
            raise ConfigError(f'plugin "{plugin.name}" does not extend {point} plugin')
        if plugin.name in names:
            raise ConfigError(f'plugin "{plugin.name}" already registered as {point} plugin')
        names.append(plugin.name)
    return names


def score_weights(plugins: Plugins, capabilities: Capabilities) -> dict[str, int]:
    """getScoreWeights: explicit score entries first, then MultiPoint; 0 or unset means 1."""
    weights: dict[str, int] = {}
    total = 0
    for plugin in (*plugins.score.enabled, *plugins.multi_point.enabled):
        if ExtensionPoint.SCORE not in capabilities.get(plugin.name, frozenset()):
            continue
        if plugin.name in weights:
            continue
        weight = plugin.weight or 1
        if weight * MAX_NODE_SCORE > MAX_TOTAL_SCORE - total:
            raise ConfigError("total score of Score plugins could overflow")
        weights[plugin.name] = weight
        total += weight * MAX_NODE_SCORE
    return weights


def expand_profiles(
    config: SchedulerConfiguration, capabilities: Capabilities
) -> dict[str, ExpandedPlugins]:
    """Every profile expanded, keyed by scheduler name (upstream profile.NewMap).

    All profiles must end up with the same QueueSort plugin and the same args for it.
    """
    if not config.profiles:
        raise ConfigError("at least one profile is required")
    result: dict[str, ExpandedPlugins] = {}
    first: tuple[str, object] | None = None
    for profile in config.profiles:
        name = profile.scheduler_name
        try:
            expanded = expand_plugins(profile.plugins, capabilities)
        except ConfigError as err:
            raise ConfigError(f"creating profile for scheduler name {name}: {err}") from err
        if name in result:
            raise ConfigError(f'duplicate profile with scheduler name "{name}"')
        queue_sort = expanded[ExtensionPoint.QUEUE_SORT][0].name
        queue_sort_args = profile.plugin_config.get(queue_sort)
        if first is None:
            first = (queue_sort, queue_sort_args)
        elif first[0] != queue_sort:
            raise ConfigError(
                f'different queue sort plugins for profile "{name}": "{queue_sort}", '
                f'first: "{first[0]}"'
            )
        elif first[1] != queue_sort_args:
            raise ConfigError(f'different queue sort plugin args for profile "{name}"')
        result[name] = expanded
    return result
