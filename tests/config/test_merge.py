"""Merging a profile's plugins into the defaults: upstream TestMergePlugins
(pkg/scheduler/apis/config/v1/default_plugins_test.go), plus the same rules through YAML."""

from __future__ import annotations

import pytest

from shared.config import (
    DEFAULT_MULTI_POINT,
    PluginRef,
    Plugins,
    PluginSet,
    load_config,
    merge_plugins,
)

Entry = str | tuple[str, int]


def ps(enabled: list[Entry] | None = None, disabled: list[str] | None = None) -> PluginSet:
    def ref(entry: Entry) -> PluginRef:
        return PluginRef(entry) if isinstance(entry, str) else PluginRef(*entry)

    return PluginSet(
        enabled=[ref(e) for e in enabled or []],
        disabled=[PluginRef(name) for name in disabled or []],
    )


@pytest.mark.parametrize(
    ("defaults", "custom", "want"),
    [
        pytest.param(
            Plugins(filter=ps(["DefaultPlugin1", "DefaultPlugin2"])),
            Plugins(filter=ps(["CustomPlugin"])),
            Plugins(filter=ps(["DefaultPlugin1", "DefaultPlugin2", "CustomPlugin"])),
            id="AppendCustomPlugin",
        ),
        pytest.param(
            Plugins(filter=ps(["DefaultPlugin1", "DefaultPlugin2"])),
            Plugins(filter=ps(["CustomPlugin", "DefaultPlugin2"], ["DefaultPlugin2"])),
            Plugins(
                filter=ps(["DefaultPlugin1", "CustomPlugin", "DefaultPlugin2"], ["DefaultPlugin2"])
            ),
            id="InsertAfterDefaultPlugins2",
        ),
        pytest.param(
            Plugins(filter=ps(["DefaultPlugin1", "DefaultPlugin2"])),
            Plugins(filter=ps(["CustomPlugin", "DefaultPlugin1", "DefaultPlugin2"], ["*"])),
            Plugins(filter=ps(["CustomPlugin", "DefaultPlugin1", "DefaultPlugin2"], ["*"])),
            id="InsertBeforeAllPlugins",
        ),
        pytest.param(
            Plugins(filter=ps(["DefaultPlugin1", "DefaultPlugin2"])),
            Plugins(filter=ps(["DefaultPlugin2", "DefaultPlugin1"], ["*"])),
            Plugins(filter=ps(["DefaultPlugin2", "DefaultPlugin1"], ["*"])),
            id="ReorderDefaultPlugins",
        ),
        pytest.param(
            Plugins(filter=ps(["DefaultPlugin1", "DefaultPlugin2"])),
            None,
            Plugins(filter=ps(["DefaultPlugin1", "DefaultPlugin2"])),
            id="ApplyNilCustomPlugin",
        ),
        pytest.param(
            Plugins(filter=ps(["Plugin1", "Plugin2", "Plugin3"])),
            Plugins(filter=ps([("Plugin1", 2), ("Plugin3", 3)])),
            Plugins(filter=ps([("Plugin1", 2), "Plugin2", ("Plugin3", 3)])),
            id="CustomPluginOverrideDefaultPlugin",
        ),
        pytest.param(
            Plugins(filter=ps(["Plugin1", "Plugin2", "Plugin3"])),
            Plugins(filter=ps([("Plugin2", 2), ("Plugin1", 1)])),
            Plugins(filter=ps([("Plugin1", 1), ("Plugin2", 2), "Plugin3"])),
            id="OrderPreserveAfterOverride",
        ),
        pytest.param(
            Plugins(filter=ps(["Plugin1", "Plugin2", "Plugin3"])),
            Plugins(filter=ps(["Plugin1", ("Plugin2", 2), "Plugin3", ("Plugin2", 4)])),
            Plugins(filter=ps(["Plugin1", ("Plugin2", 4), "Plugin3", ("Plugin2", 2)])),
            id="RepeatedCustomPlugin",
        ),
        pytest.param(
            Plugins(multi_point=ps(["DefaultPlugin1", "DefaultPlugin2"])),
            Plugins(multi_point=ps(["CustomPlugin"])),
            Plugins(multi_point=ps(["DefaultPlugin1", "DefaultPlugin2", "CustomPlugin"])),
            id="Append custom MultiPoint plugin",
        ),
        pytest.param(
            Plugins(multi_point=ps(["DefaultPlugin1", "DefaultPlugin2"])),
            Plugins(
                multi_point=ps(["CustomPlugin", "CustomPlugin2"], ["DefaultPlugin2"]),
                score=ps(disabled=["CustomPlugin2"]),
            ),
            Plugins(
                multi_point=ps(
                    ["DefaultPlugin1", "CustomPlugin", "CustomPlugin2"], ["DefaultPlugin2"]
                ),
                score=ps(disabled=["CustomPlugin2"]),
            ),
            id="Append disabled Multipoint plugins",
        ),
        pytest.param(
            Plugins(multi_point=ps(["DefaultPlugin"])),
            Plugins(multi_point=ps([("DefaultPlugin", 5)])),
            Plugins(multi_point=ps([("DefaultPlugin", 5)])),
            id="override default MultiPoint plugins with custom value",
        ),
        pytest.param(
            Plugins(multi_point=ps(["DefaultPlugin"], ["DefaultPlugin2"])),
            Plugins(multi_point=ps(["CustomPlugin"])),
            Plugins(multi_point=ps(["DefaultPlugin", "CustomPlugin"], ["DefaultPlugin2"])),
            id="disabled MultiPoint plugin in default set",
        ),
        pytest.param(
            Plugins(multi_point=ps(["DefaultPlugin"]), score=ps(disabled=["DefaultPlugin2"])),
            Plugins(multi_point=ps(["CustomPlugin"])),
            Plugins(
                multi_point=ps(["DefaultPlugin", "CustomPlugin"]),
                score=ps(disabled=["DefaultPlugin2"]),
            ),
            id="disabled MultiPoint plugin in default set for specific extension point",
        ),
        pytest.param(
            Plugins(multi_point=ps(["DefaultPlugin"])),
            Plugins(multi_point=ps(disabled=["DefaultPlugin"])),
            Plugins(multi_point=ps(disabled=["DefaultPlugin"])),
            id="multipoint with only disabled gets merged",
        ),
    ],
)
def test_merge_plugins(defaults: Plugins, custom: Plugins | None, want: Plugins) -> None:
    assert merge_plugins(defaults, custom) == want


HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

DEFAULT_NAMES = [p.name for p in DEFAULT_MULTI_POINT]


@pytest.mark.parametrize(
    ("plugins_yaml", "want_multi_point"),
    [
        pytest.param("", list(DEFAULT_MULTI_POINT), id="no customisation"),
        pytest.param(
            "multiPoint: {enabled: [{name: NodeAffinity, weight: 5}]}",
            [
                PluginRef("NodeAffinity", 5) if p.name == "NodeAffinity" else p
                for p in DEFAULT_MULTI_POINT
            ],
            id="re-weight a default in place",
        ),
        pytest.param(
            "multiPoint: {enabled: [{name: CapacityScheduling}]}",
            [*DEFAULT_MULTI_POINT, PluginRef("CapacityScheduling")],
            id="custom plugin appended",
        ),
        pytest.param(
            "multiPoint: {disabled: [{name: ImageLocality}, {name: NodePorts}]}",
            [p for p in DEFAULT_MULTI_POINT if p.name not in ("ImageLocality", "NodePorts")],
            id="disable defaults",
        ),
        pytest.param(
            "multiPoint: {disabled: [{name: '*'}], "
            "enabled: [{name: PrioritySort}, {name: DefaultBinder}]}",
            [PluginRef("PrioritySort"), PluginRef("DefaultBinder")],
            id="disable all then re-enable",
        ),
        pytest.param(
            "multiPoint: {disabled: [{name: VolumeBinding}, {name: VolumeZone}, "
            "{name: DynamicResources}]}",
            list(DEFAULT_MULTI_POINT),
            id="upstream volume and DRA plugins disabled silently",
        ),
    ],
)
def test_yaml_plugins_merge_into_defaults(
    plugins_yaml: str, want_multi_point: list[PluginRef]
) -> None:
    config = load_config(f"{HEADER}profiles:\n- plugins: {{{plugins_yaml}}}\n")
    assert config.profiles[0].plugins.multi_point.enabled == want_multi_point


def test_yaml_specific_point_keeps_user_lists_and_disabled() -> None:
    config = load_config(
        HEADER
        + """profiles:
- plugins:
    score:
      disabled: [{name: ImageLocality}]
      enabled: [{name: NodeAffinity, weight: 7}]
"""
    )
    plugins = config.profiles[0].plugins
    assert plugins.score == PluginSet(
        enabled=[PluginRef("NodeAffinity", 7)], disabled=[PluginRef("ImageLocality")]
    )
    assert plugins.multi_point.enabled == list(DEFAULT_MULTI_POINT)
