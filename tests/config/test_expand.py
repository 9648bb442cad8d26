"""Expanding a profile into per-extension-point lists: upstream framework_test.go
(TestNewFrameworkMultiPointExpansion, TestNewFrameworkErrors, TestInitFrameworkWithScorePlugins)
and profile.NewMap's checks."""

from __future__ import annotations

import pytest

from shared.config import (
    DEFAULT_MULTI_POINT,
    ConfigError,
    ExpandedPlugins,
    ExtensionPoint,
    PluginRef,
    Plugins,
    PluginSet,
    SchedulerConfiguration,
    default_config,
    expand_plugins,
    expand_profiles,
    load_config,
)
from shared.config import ExtensionPoint as E
from tests.config.capabilities import IN_TREE

ALL_BUT_PRE_ENQUEUE = frozenset(ExtensionPoint) - {E.PRE_ENQUEUE}

# The upstream test registry (framework_test.go), by extension points implemented.
REGISTRY: dict[str, frozenset[str]] = {
    "testPlugin": ALL_BUT_PRE_ENQUEUE,
    "score-plugin-1": frozenset({E.PRE_SCORE, E.SCORE}),
    "score-plugin-2": frozenset({E.SCORE}),
    "score-with-normalize-plugin-1": frozenset({E.SCORE}),
    "plugin-not-implementing-score": frozenset({E.FILTER}),
    "queue-sort-plugin": frozenset({E.QUEUE_SORT}),
    "bind-plugin": frozenset({E.BIND}),
}
TEST = "testPlugin"
SCORE1, SCORE2 = "score-plugin-1", "score-plugin-2"
NORMALIZE1 = "score-with-normalize-plugin-1"

Entry = str | tuple[str, int]


def ps(enabled: list[Entry] | None = None, disabled: list[str] | None = None) -> PluginSet:
    def ref(entry: Entry) -> PluginRef:
        return PluginRef(entry) if isinstance(entry, str) else PluginRef(*entry)

    return PluginSet(
        enabled=[ref(e) for e in enabled or []],
        disabled=[PluginRef(name) for name in disabled or []],
    )


def want(**points: list[Entry]) -> ExpandedPlugins:
    """Every extension point, empty unless given."""
    out: ExpandedPlugins = {point: [] for point in ExtensionPoint}
    for point, entries in points.items():
        out[ExtensionPoint(point)] = [
            PluginRef(e) if isinstance(e, str) else PluginRef(*e) for e in entries
        ]
    return out


def everywhere(score: list[Entry], pre_score: list[str]) -> ExpandedPlugins:
    """testPlugin at every point it implements, with these score and preScore lists."""
    return want(
        queue_sort=[TEST],
        pre_filter=[TEST],
        filter=[TEST],
        post_filter=[TEST],
        pre_score=list(pre_score),
        score=score,
        reserve=[TEST],
        permit=[TEST],
        pre_bind=[TEST],
        bind=[TEST],
        post_bind=[TEST],
    )


@pytest.mark.parametrize(
    ("plugins", "expected"),
    [
        pytest.param(
            Plugins(multi_point=ps([(TEST, 5)])),
            everywhere(score=[(TEST, 5)], pre_score=[TEST]),
            id="plugin expansion",
        ),
        pytest.param(
            Plugins(
                multi_point=ps([TEST]),
                pre_score=ps(disabled=[TEST]),
                score=ps(disabled=[TEST]),
            ),
            everywhere(score=[], pre_score=[]),
            id="disable MultiPoint plugin at some extension points",
        ),
        pytest.param(
            Plugins(multi_point=ps([TEST, SCORE1])),
            everywhere(score=[(TEST, 1), (SCORE1, 1)], pre_score=[TEST, SCORE1]),
            id="Multiple MultiPoint plugins",
        ),
        pytest.param(
            Plugins(multi_point=ps([TEST, SCORE1]), pre_score=ps(disabled=["*"])),
            everywhere(score=[(TEST, 1), (SCORE1, 1)], pre_score=[]),
            id="disable MultiPoint extension",
        ),
        pytest.param(
            Plugins(multi_point=ps([NORMALIZE1, TEST, SCORE1]), score=ps([SCORE1, TEST])),
            everywhere(score=[(SCORE1, 1), (TEST, 1), (NORMALIZE1, 1)], pre_score=[TEST, SCORE1]),
            id="Reorder MultiPoint plugins (specified extension takes precedence)",
        ),
        pytest.param(
            Plugins(multi_point=ps([TEST, SCORE1]), score=ps([NORMALIZE1, SCORE1, TEST])),
            everywhere(score=[(SCORE1, 1), (TEST, 1), (NORMALIZE1, 1)], pre_score=[TEST, SCORE1]),
            id="Reorder MultiPoint plugins (specified extension only takes precedence when it "
            "exists in MultiPoint)",
        ),
        pytest.param(
            Plugins(multi_point=ps([TEST, SCORE1]), score=ps([(SCORE1, 5), (TEST, 3)])),
            everywhere(score=[(SCORE1, 5), (TEST, 3)], pre_score=[TEST, SCORE1]),
            id="Override MultiPoint plugins weights",
        ),
        pytest.param(
            Plugins(multi_point=ps(["queue-sort-plugin", "bind-plugin", SCORE1], ["*"])),
            want(
                queue_sort=["queue-sort-plugin"],
                pre_score=[SCORE1],
                score=[(SCORE1, 1)],
                bind=["bind-plugin"],
            ),
            id="disable and enable MultiPoint plugins with '*'",
        ),
        pytest.param(
            Plugins(multi_point=ps(["bind-plugin", "queue-sort-plugin", SCORE1], [SCORE1])),
            want(
                queue_sort=["queue-sort-plugin"],
                pre_score=[SCORE1],
                score=[(SCORE1, 1)],
                bind=["bind-plugin"],
            ),
            id="disable and enable MultiPoint plugin by name",
        ),
        pytest.param(
            Plugins(
                multi_point=ps([TEST, SCORE1]),
                score=ps([(SCORE1, 5), (SCORE2, 5), (TEST, 3)]),
            ),
            everywhere(score=[(SCORE1, 5), (TEST, 3), (SCORE2, 5)], pre_score=[TEST, SCORE1]),
            id="Override MultiPoint plugins weights and avoid a plugin being loaded multiple times",
        ),
    ],
)
def test_multi_point_expansion(plugins: Plugins, expected: ExpandedPlugins) -> None:
    assert expand_plugins(plugins, REGISTRY) == expected


def qs_bind(**points: PluginSet) -> Plugins:
    """Like upstream newFrameworkWithQueueSortAndBind: a queue sort and a binder added."""
    plugins = Plugins(queue_sort=ps(["queue-sort-plugin"]), bind=ps(["bind-plugin"]))
    for point, plugin_set in points.items():
        setattr(plugins, point, plugin_set)
    return plugins


@pytest.mark.parametrize(
    ("plugins", "message"),
    [
        pytest.param(
            Plugins(multi_point=ps([TEST, TEST])),
            'plugin "testPlugin" already registered as queue_sort plugin',
            id="MultiPoint duplicate",
        ),
        pytest.param(
            qs_bind(pre_filter=ps([TEST, TEST])),
            'plugin "testPlugin" already registered as pre_filter plugin',
            id="duplicate at one extension point",
        ),
        pytest.param(
            qs_bind(score=ps(["notExist"])),
            'score plugin "notExist" does not exist',
            id="enabled Score plugin doesn't exist in registry",
        ),
        pytest.param(
            qs_bind(multi_point=ps(["notExist"])),
            'multi_point plugin "notExist" does not exist',
            id="MultiPoint plugin doesn't exist in registry",
        ),
        pytest.param(
            qs_bind(score=ps(["plugin-not-implementing-score"])),
            'plugin "plugin-not-implementing-score" does not extend score plugin',
            id="enabled Score plugin doesn't extend the Score interface",
        ),
        pytest.param(
            Plugins(bind=ps(["bind-plugin"])),
            "only one queue sort plugin required, but got 0",
            id="no queue sort",
        ),
        pytest.param(
            qs_bind(multi_point=ps([TEST])),
            "only one queue sort plugin required, but got 2",
            id="two queue sorts",
        ),
        pytest.param(
            Plugins(queue_sort=ps(["queue-sort-plugin"])),
            "at least one bind plugin is needed",
            id="no binder",
        ),
        pytest.param(
            qs_bind(score=ps([(SCORE1, 2**62), (SCORE2, 2**62)])),
            "total score of Score plugins could overflow",
            id="score weight overflow",
        ),
    ],
)
def test_expansion_errors(plugins: Plugins, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        expand_plugins(plugins, REGISTRY)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("plugins", "expected_score"),
    [
        pytest.param(qs_bind(), [], id="Score plugins are nil"),
        pytest.param(qs_bind(score=ps([SCORE1])), [(SCORE1, 1)], id="unset weight is 1"),
        pytest.param(qs_bind(score=ps([(SCORE1, 0)])), [(SCORE1, 1)], id="zero weight is 1"),
        pytest.param(
            qs_bind(score=ps([(SCORE1, 4), (NORMALIZE1, 2)])),
            [(SCORE1, 4), (NORMALIZE1, 2)],
            id="explicit weights",
        ),
        pytest.param(
            qs_bind(multi_point=ps([(SCORE1, 4)]), score=ps([SCORE1])),
            [(SCORE1, 1)],
            id="explicit score entry without weight beats MultiPoint weight",
        ),
        pytest.param(
            qs_bind(multi_point=ps([SCORE1]), score=ps([(SCORE1, 3)])),
            [(SCORE1, 3)],
            id="single Score plugin with MultiPointExpansion",
        ),
    ],
)
def test_score_weights(plugins: Plugins, expected_score: list[tuple[str, int]]) -> None:
    score = expand_plugins(plugins, REGISTRY)[E.SCORE]
    assert score == [PluginRef(name, weight) for name, weight in expected_score]


def test_only_score_entries_carry_weights() -> None:
    expanded = expand_plugins(Plugins(multi_point=ps([(TEST, 5)])), REGISTRY)
    for point, refs in expanded.items():
        if point != E.SCORE:
            assert all(ref.weight is None for ref in refs), point


HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


@pytest.mark.parametrize(
    ("plugins_yaml", "point", "expected"),
    [
        pytest.param(
            "score: {enabled: [{name: NodeAffinity, weight: 5}]}",
            E.SCORE,
            [
                PluginRef("NodeAffinity", 5),
                PluginRef("TaintToleration", 3),
                PluginRef("NodeResourcesFit", 1),
                PluginRef("PodTopologySpread", 2),
                PluginRef("InterPodAffinity", 2),
                PluginRef("NodeResourcesBalancedAllocation", 1),
                PluginRef("ImageLocality", 1),
            ],
            id="explicit score entry moves first with its weight",
        ),
        pytest.param(
            "multiPoint: {enabled: [{name: NodeAffinity, weight: 5}]}",
            E.SCORE,
            [
                PluginRef("TaintToleration", 3),
                PluginRef("NodeAffinity", 5),
                PluginRef("NodeResourcesFit", 1),
                PluginRef("PodTopologySpread", 2),
                PluginRef("InterPodAffinity", 2),
                PluginRef("NodeResourcesBalancedAllocation", 1),
                PluginRef("ImageLocality", 1),
            ],
            id="multiPoint re-weight keeps the position",
        ),
        pytest.param(
            "score: {disabled: [{name: '*'}], enabled: [{name: ImageLocality, weight: 2}]}",
            E.SCORE,
            [PluginRef("ImageLocality", 2)],
            id="score '*' disabled keeps only explicit",
        ),
        pytest.param(
            "filter: {disabled: [{name: NodePorts}, {name: TaintToleration}]}",
            E.FILTER,
            [
                PluginRef(n)
                for n in (
                    "NodeUnschedulable",
                    "NodeName",
                    "NodeAffinity",
                    "NodeResourcesFit",
                    "PodTopologySpread",
                    "InterPodAffinity",
                )
            ],
            id="disabled at one point only",
        ),
        pytest.param(
            "multiPoint: {disabled: [{name: '*'}], enabled: [{name: PrioritySort}, "
            "{name: DefaultBinder}, {name: NodeResourcesFit, weight: 1}]}",
            E.SCORE,
            [PluginRef("NodeResourcesFit", 1)],
            id="minimal bin-packing profile",
        ),
    ],
)
def test_yaml_profile_expansion(plugins_yaml: str, point: E, expected: list[PluginRef]) -> None:
    config = load_config(f"{HEADER}profiles:\n- plugins: {{{plugins_yaml}}}\n")
    assert expand_plugins(config.profiles[0].plugins, IN_TREE)[point] == expected


def test_expand_profiles_keys_by_scheduler_name() -> None:
    config = load_config(
        HEADER
        + """profiles:
- schedulerName: default-scheduler
- schedulerName: no-scoring
  plugins: {preScore: {disabled: [{name: '*'}]}, score: {disabled: [{name: '*'}]}}
"""
    )
    expanded = expand_profiles(config, IN_TREE)
    assert list(expanded) == ["default-scheduler", "no-scoring"]
    assert expanded["no-scoring"][E.SCORE] == []
    assert len(expanded["default-scheduler"][E.SCORE]) == 7


def _two_profiles() -> SchedulerConfiguration:
    config = default_config()
    second = load_config(HEADER + "profiles: [{schedulerName: second}]").profiles[0]
    config.profiles.append(second)
    return config


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(
            lambda c: c.profiles.clear(),
            "at least one profile is required",
            id="no profiles",
        ),
        pytest.param(
            lambda c: setattr(c.profiles[1], "scheduler_name", "default-scheduler"),
            'duplicate profile with scheduler name "default-scheduler"',
            id="duplicate profile",
        ),
        pytest.param(
            lambda c: c.profiles[1].plugins.multi_point.enabled.append(PluginRef("Nope")),
            'creating profile for scheduler name second: multi_point plugin "Nope" does not exist',
            id="build failure names the profile",
        ),
        pytest.param(
            lambda c: setattr(
                c.profiles[1].plugins,
                "multi_point",
                PluginSet(
                    enabled=[
                        PluginRef("OtherSort") if p.name == "PrioritySort" else p
                        for p in DEFAULT_MULTI_POINT
                    ]
                ),
            ),
            'different queue sort plugins for profile "second": "OtherSort", first: "PrioritySort"',
            id="different queue sort through multiPoint",
        ),
        pytest.param(
            lambda c: c.profiles[1].plugin_config.update({"PrioritySort": {"x": 1}}),
            'different queue sort plugin args for profile "second"',
            id="different queue sort args",
        ),
    ],
)
def test_expand_profiles_errors(mutate, message: str) -> None:
    config = _two_profiles()
    mutate(config)
    capabilities = {**IN_TREE, "OtherSort": frozenset({E.QUEUE_SORT})}
    with pytest.raises(ConfigError) as caught:
        expand_profiles(config, capabilities)
    assert str(caught.value) == message
