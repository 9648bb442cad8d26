"""Coscheduling: PreFilter, Permit (wait, allow the gang), Unreserve, the timeout rule the binder
shares, and the plugin on or off by profile; on a real framework over a LocalCluster."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduling.cache.local import LocalCluster
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.runtime import Framework, build_frameworks
from scheduling.framework.status import Code, Status
from scheduling.plugins.coscheduling import (
    Coscheduling,
    Gang,
    gang_of,
    group_key,
    new,
    wait_seconds,
)
from scheduling.plugins.registry import in_tree_registry
from shared.config import CoschedulingArgs, default_config, load_config
from shared.models import POD_GROUP_LABEL, Pod, PodGroup
from tests.builders import make_node, make_pod, make_pod_group

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def member(name: str, group: str = "g", namespace: str = "default") -> Pod:
    return make_pod(name).namespace(namespace).label(POD_GROUP_LABEL, group).req(cpu="1").obj()


@dataclass
class Setup:
    cluster: LocalCluster
    framework: Framework

    @property
    def plugin(self) -> Coscheduling:
        plugin = self.framework.plugins["Coscheduling"]
        assert isinstance(plugin, Coscheduling)
        return plugin

    def permit(self, pod: Pod, node: str = "n0") -> tuple[Status, Pod]:
        """Reserve and Permit as the scheduling cycle runs them (the pod assumed first)."""
        assumed = self.cluster.assume(pod, node)
        return self.framework.run_permit_plugins(CycleState(), assumed, node), assumed


@dataclass
class World:
    groups: list[PodGroup] = field(default_factory=list)
    pending: list[Pod] = field(default_factory=list)
    bound: list[Pod] = field(default_factory=list)
    plugins_yaml: str = ""
    args_yaml: str = ""


def setup(world: World) -> Setup:
    nodes = [make_node(f"n{i}").capacity(cpu="8", pods=20).obj() for i in range(2)]
    cluster = LocalCluster(nodes, world.bound, pod_groups=world.groups, pending=world.pending)
    text = HEADER
    if world.plugins_yaml or world.args_yaml:
        text += "profiles:\n- schedulerName: default-scheduler\n"
        if world.plugins_yaml:
            text += f"  plugins: {world.plugins_yaml}\n"
        if world.args_yaml:
            text += f"  pluginConfig: [{{name: Coscheduling, args: {world.args_yaml}}}]\n"
    config = load_config(text)
    framework = build_frameworks(config, in_tree_registry(), cluster)["default-scheduler"]
    return Setup(cluster, framework)


# ---------------------------------------------------------------------- PreFilter
@pytest.mark.parametrize(
    ("world", "pod", "code", "message"),
    [
        pytest.param(
            World(pending=[make_pod("p").obj()]),
            make_pod("p").obj(),
            Code.SKIP,
            "",
            id="no label: skip",
        ),
        pytest.param(
            World(pending=[member("m0")]),
            member("m0"),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "PodGroup default/g not found",
            id="group missing",
        ),
        pytest.param(
            World(groups=[make_pod_group("g", 3)], pending=[member("m0"), member("m1")]),
            member("m0"),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "pre-filter pod m0 cannot find enough sibling pods, current pods number: 2, "
            "minMember of group: 3",
            id="too few pods",
        ),
        pytest.param(
            World(
                groups=[make_pod_group("g", 3)],
                pending=[member("m0"), member("m1"), member("x", "g", "other")],
            ),
            member("m0"),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "pre-filter pod m0 cannot find enough sibling pods, current pods number: 2, "
            "minMember of group: 3",
            id="same group name in another namespace does not count",
        ),
        pytest.param(
            World(
                groups=[make_pod_group("g", 3)],
                pending=[member("m0"), member("m1")],
                bound=[make_pod("m2").label(POD_GROUP_LABEL, "g").node("n1").obj()],
            ),
            member("m0"),
            Code.SUCCESS,
            "",
            id="pending and bound pods count",
        ),
        pytest.param(
            World(
                pending=[member("m0")],
                plugins_yaml="{permit: {disabled: [{name: Coscheduling}]}}",
            ),
            member("m0"),
            Code.SKIP,
            "",
            id="not at Permit: no gang, skip",
        ),
    ],
)
def test_pre_filter(world: World, pod: Pod, code: Code, message: str) -> None:
    s = setup(world)
    result, status = s.plugin.pre_filter(CycleState(), pod, s.cluster.nodes)
    assert result is None
    assert (status.code, status.message()) == (code, message)
    if code != Code.SKIP and code != Code.SUCCESS:
        assert status.plugin == "Coscheduling"


# ------------------------------------------------------------------------- Permit
def test_members_wait_until_the_last_needed_arrives_then_all_are_allowed() -> None:
    members = [member(f"m{i}") for i in range(3)]
    other = member("o0", "other")
    s = setup(
        World(
            groups=[make_pod_group("g", 3, schedule_timeout_seconds=5), make_pod_group("other", 2)],
            pending=[*members, other, member("o1", "other")],
        )
    )
    waits = []
    for pod in [members[0], other, members[1]]:
        status, _ = s.permit(pod)
        waits.append(status.code)
    assert waits == [Code.WAIT] * 3
    waiting = {w.pod.metadata.name: w for w in s.framework.iterate_over_waiting_pods()}
    assert set(waiting) == {"m0", "o0", "m1"}
    assert waiting["m0"].timeout == 5.0
    assert waiting["o0"].timeout == 60.0
    assert waiting["m0"].pending_plugins() == ["Coscheduling"]

    status, _ = s.permit(members[2])
    assert status.code == Code.SUCCESS  # the last needed member goes on at once
    assert waiting["m0"].result == waiting["m1"].result == Status()
    assert waiting["o0"].result is None  # another gang keeps waiting


def test_a_member_after_the_gang_is_placed_goes_on_at_once() -> None:
    bound = [make_pod(f"m{i}").label(POD_GROUP_LABEL, "g").node("n0").obj() for i in range(2)]
    s = setup(World(groups=[make_pod_group("g", 2)], bound=bound, pending=[member("m2")]))
    status, _ = s.permit(member("m2"))
    assert status.code == Code.SUCCESS
    assert len(s.framework.waiting_pods) == 0


@pytest.mark.parametrize(
    ("pod", "groups", "code", "message"),
    [
        pytest.param(make_pod("p").obj(), [], Code.SUCCESS, "", id="no label"),
        pytest.param(
            member("m0"), [make_pod_group("g", 1)], Code.SUCCESS, "", id="minMember 1: alone"
        ),
        pytest.param(
            member("m0"),
            [],
            Code.UNSCHEDULABLE,
            "PodGroup default/g not found",
            id="group gone since PreFilter",
        ),
    ],
)
def test_permit_without_waiting(pod: Pod, groups: list[PodGroup], code: Code, message: str) -> None:
    s = setup(World(groups=groups, pending=[pod]))
    status, timeout = s.plugin.permit(CycleState(), s.cluster.assume(pod, "n0"), "n0")
    assert (status.code, status.message(), timeout) == (code, message, 0.0)


@pytest.mark.parametrize(
    ("group_timeout", "args", "want"),
    [
        pytest.param(10, CoschedulingArgs(permit_waiting_time_seconds=30), 10.0, id="group first"),
        pytest.param(
            None, CoschedulingArgs(permit_waiting_time_seconds=30), 30.0, id="then the args"
        ),
        pytest.param(
            0, CoschedulingArgs(permit_waiting_time_seconds=30), 30.0, id="group 0 is unset"
        ),
        pytest.param(None, CoschedulingArgs(permit_waiting_time_seconds=0), 60.0, id="args 0"),
        pytest.param(None, None, 60.0, id="no args: default 60s"),
        pytest.param(7200, None, 900.0, id="capped at the framework's 15 min"),
    ],
)
def test_timeout_precedence(
    group_timeout: int | None, args: CoschedulingArgs | None, want: float
) -> None:
    group = make_pod_group("g", 3, schedule_timeout_seconds=group_timeout)
    assert wait_seconds(group, args) == want
    assert gang_of(member("m0"), group, args) == Gang("default/g", 3, want)


def test_permit_waits_with_the_profile_args() -> None:
    s = setup(
        World(
            groups=[make_pod_group("g", 2)],
            pending=[member("m0"), member("m1")],
            args_yaml="{permitWaitingTimeSeconds: 7}",
        )
    )
    status, timeout = s.plugin.permit(CycleState(), s.cluster.assume(member("m0"), "n0"), "n0")
    assert (status.code, timeout) == (Code.WAIT, 7.0)


# ---------------------------------------------------------------------- Unreserve
def test_unreserve_rejects_the_waiting_siblings() -> None:
    members = [member(f"m{i}") for i in range(3)]
    other = member("o0", "other")
    s = setup(
        World(
            groups=[make_pod_group("g", 4), make_pod_group("other", 2)],
            pending=[*members, member("m3"), other, member("o1", "other")],
        )
    )
    for pod in [members[0], members[1], other]:
        assert s.permit(pod)[0].code == Code.WAIT
    waiting = {w.pod.metadata.name: w for w in s.framework.iterate_over_waiting_pods()}
    failed = s.cluster.assume(members[2], "n1")
    s.framework.run_reserve_plugins_unreserve(CycleState(), failed, "n1")
    for name in ("m0", "m1"):
        result = waiting[name].result
        assert result is not None
        assert (result.code, result.plugin) == (Code.UNSCHEDULABLE, "Coscheduling")
        assert result.message() == "rejection in Unreserve"
    assert waiting["o0"].result is None


def test_unreserve_of_a_pod_without_a_group_rejects_nobody() -> None:
    s = setup(World(groups=[make_pod_group("g", 2)], pending=[member("m0"), member("m1")]))
    assert s.permit(member("m0"))[0].code == Code.WAIT
    s.plugin.unreserve(CycleState(), make_pod("plain").obj(), "n0")
    (waiting,) = s.framework.iterate_over_waiting_pods()
    assert waiting.result is None


# ------------------------------------------------------------------ on, off, args
@pytest.mark.parametrize(
    ("plugins_yaml", "points"),
    [
        pytest.param("", {"pre_filter", "reserve", "permit"}, id="default profile: on"),
        pytest.param(
            "{multiPoint: {disabled: [{name: Coscheduling}]}}", set(), id="multiPoint off"
        ),
        pytest.param(
            "{permit: {disabled: [{name: Coscheduling}]}}",
            {"pre_filter", "reserve"},
            id="permit off (PreFilter then skips)",
        ),
    ],
)
def test_profile_enables_or_disables_it(plugins_yaml: str, points: set[str]) -> None:
    s = setup(World(plugins_yaml=plugins_yaml))
    listed = s.framework.list_plugins()
    assert {point for point, names in listed.items() if "Coscheduling" in names} == points


def test_factory_takes_coscheduling_args_only() -> None:
    frameworks = build_frameworks(default_config(), in_tree_registry(), LocalCluster())
    handle = frameworks["default-scheduler"].handle
    assert new(None, handle).args == CoschedulingArgs()
    five = CoschedulingArgs(permit_waiting_time_seconds=5)
    assert new(five, handle).args is five
    with pytest.raises(TypeError, match="want args to be of type CoschedulingArgs, got dict"):
        new({"permitWaitingTimeSeconds": 5}, handle)


def test_group_key() -> None:
    assert group_key(member("m0", "g", "team-a")) == "team-a/g"
    assert group_key(make_pod("p").obj()) == ""
