"""Registry (upstream registry_test.go) and building frameworks from profiles."""

from __future__ import annotations

import pytest

from scheduling.cache.local import LocalCluster
from scheduling.framework.interfaces import Handle
from scheduling.framework.registry import (
    DuplicatePluginError,
    Registry,
    UnknownPluginError,
    capabilities,
)
from scheduling.framework.runtime import Framework, build_frameworks
from scheduling.plugins import names
from scheduling.plugins.registry import IN_TREE_FACTORIES, in_tree_registry
from shared.config import (
    DEFAULT_MULTI_POINT,
    ConfigError,
    PluginRef,
    Plugins,
    PluginSet,
    Profile,
    SchedulerConfiguration,
    default_config,
)
from tests.framework import fakes


def factory(plugin: object):
    def new(args: object | None, handle: Handle) -> object:
        return plugin

    return new


def test_register_rejects_a_duplicate_name():
    registry = Registry({"A": factory(object())})
    with pytest.raises(DuplicatePluginError, match=r"^a plugin named A already exists$"):
        registry.register("A", factory(object()))


def test_unregister_unknown_name():
    registry = Registry()
    with pytest.raises(UnknownPluginError, match=r"^no plugin named A exists$"):
        registry.unregister("A")


def test_unregister_removes():
    registry = Registry({"A": factory(object()), "B": factory(object())})
    registry.unregister("A")
    assert list(registry) == ["B"]


@pytest.mark.parametrize(
    ("existing", "other", "error", "after"),
    [
        pytest.param(["A"], ["B", "C"], None, ["A", "B", "C"], id="disjoint"),
        pytest.param(["A", "B"], ["C", "B"], "B", ["A", "B"], id="clash-adds-nothing"),
        pytest.param([], ["A"], None, ["A"], id="into-empty"),
    ],
)
def test_merge(existing, other, error, after):
    registry = Registry({name: factory(object()) for name in existing})
    out_of_tree = Registry({name: factory(object()) for name in other})
    if error:
        with pytest.raises(DuplicatePluginError, match=f"a plugin named {error} already exists"):
            registry.merge(out_of_tree)
    else:
        registry.merge(out_of_tree)
    assert sorted(registry) == after


def test_in_tree_registry_has_every_default_plugin_and_merges_out_of_tree():
    registry = in_tree_registry(Registry({"Custom": factory(object())}))
    assert {ref.name for ref in DEFAULT_MULTI_POINT} <= set(registry)
    assert "Custom" in registry
    assert len(registry) == len(IN_TREE_FACTORIES) + 1
    with pytest.raises(DuplicatePluginError):
        in_tree_registry(Registry({names.NODE_NAME: factory(object())}))


def in_tree(name: str) -> object:
    framework = next(
        iter(build_frameworks(default_config(), in_tree_registry(), LocalCluster()).values())
    )
    return IN_TREE_FACTORIES[name](None, framework.handle)


@pytest.mark.parametrize(
    ("plugin", "expected"),
    [
        pytest.param(fakes.Filter("F"), {"filter"}, id="filter"),
        pytest.param(fakes.NodeFilter("F"), {"filter"}, id="per-node-filter"),
        pytest.param(fakes.NodeScore("S"), {"score"}, id="per-node-score"),
        pytest.param(fakes.NormalizedScore("S"), {"score"}, id="normalize-is-part-of-score"),
        pytest.param(fakes.ScoreWithPreScore("S"), {"pre_score", "score"}, id="prescore-score"),
        pytest.param(fakes.Reserve("R"), {"reserve"}, id="reserve"),
        pytest.param(fakes.Bind("B"), {"bind"}, id="bind"),
        pytest.param(fakes.PreEnqueue("P"), {"pre_enqueue"}, id="pre-enqueue"),
        pytest.param(object(), set(), id="nothing"),
        pytest.param(in_tree(names.DEFAULT_BINDER), {"bind"}, id="DefaultBinder"),
        pytest.param(in_tree(names.PRIORITY_SORT), {"queue_sort"}, id="PrioritySort"),
        pytest.param(
            in_tree(names.NODE_RESOURCES_FIT),
            {"pre_filter", "filter", "pre_score", "score"},
            id="NodeResourcesFit",
        ),
        pytest.param(in_tree(names.DEFAULT_PREEMPTION), {"post_filter"}, id="DefaultPreemption"),
    ],
)
def test_capabilities(plugin, expected):
    assert capabilities(plugin) == expected


def profile(**points: list[str]) -> Profile:
    sets = {
        point: PluginSet(enabled=[PluginRef(n) for n in names_]) for point, names_ in points.items()
    }
    return Profile(plugins=Plugins(**sets))


def failing_factory(args: object | None, handle: Handle) -> object:
    raise ValueError("bad args")


REGISTRY = {
    "QueueSort": factory(fakes.QueueSort("QueueSort")),
    "Bind": factory(fakes.Bind("Bind")),
    "F": factory(fakes.Filter("F")),
    "S": factory(fakes.Score("S")),
}


@pytest.mark.parametrize(
    ("points", "registry", "message"),
    [
        pytest.param(
            {"filter": ["Missing"]},
            REGISTRY,
            'filter plugin "Missing" does not exist',
            id="unknown-plugin",
        ),
        pytest.param(
            {"filter": ["S"]},
            REGISTRY,
            'plugin "S" does not extend filter plugin',
            id="wrong-point",
        ),
        pytest.param(
            {"filter": ["F"]},
            {**REGISTRY, "F": failing_factory},
            'initializing plugin "F": bad args',
            id="factory-fails",
        ),
        pytest.param(
            {"filter": ["F"]},
            {**REGISTRY, "F": factory(fakes.Filter("G"))},
            'plugin registered as "F" reports the name "G"',
            id="name-mismatch",
        ),
    ],
)
def test_framework_build_errors(points, registry, message):
    prof = profile(queue_sort=["QueueSort"], bind=["Bind"], **points)
    with pytest.raises(ConfigError, match=message):
        Framework(prof, registry, LocalCluster())


def test_build_frameworks_names_the_profile_and_needs_one():
    bad = profile(queue_sort=["QueueSort"], bind=["Bind"], filter=["Missing"])
    bad.scheduler_name = "batch"
    with pytest.raises(ConfigError, match=r"^creating profile for scheduler name batch: "):
        build_frameworks(SchedulerConfiguration(profiles=[bad]), REGISTRY, LocalCluster())
    with pytest.raises(ConfigError, match="at least one profile is required"):
        build_frameworks(SchedulerConfiguration(profiles=[]), REGISTRY, LocalCluster())


def test_build_frameworks_from_the_default_config():
    frameworks = build_frameworks(default_config(), in_tree_registry(), LocalCluster(), seed=3)
    fw = frameworks["default-scheduler"]
    plugins = fw.list_plugins()
    # Upstream's default order (berth has no volume plugins).
    assert plugins["filter"] == [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
    ]
    assert plugins["bind"] == ["DefaultBinder"]
    assert fw.score_weights == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 1,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
    }
    # The plugins' handle is the framework's own, over the cluster's columns.
    assert fw.handle.framework is fw
    assert fw.handle.seed == 3


def test_profiles_share_one_scheduling_context():
    first = profile(queue_sort=["QueueSort"], bind=["Bind"])
    second = profile(queue_sort=["QueueSort"], bind=["Bind"])
    second.scheduler_name = "other"
    config = SchedulerConfiguration(profiles=[first, second])
    frameworks = build_frameworks(config, REGISTRY, LocalCluster())
    assert frameworks["default-scheduler"].context is frameworks["other"].context
