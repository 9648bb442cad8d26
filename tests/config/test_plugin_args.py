"""Plugin args: upstream defaults (v1 defaults.go SetDefaults_*Args) and every validation
message (validation_pluginargs.go), through YAML so decoding and defaulting are covered too."""

from __future__ import annotations

import textwrap

import pytest

from shared.config import (
    CoschedulingArgs,
    DefaultPreemptionArgs,
    InterPodAffinityArgs,
    InvalidConfigError,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    PodTopologySpreadArgs,
    ResourceSpec,
    ScoringStrategy,
    load_config,
)
from shared.config.plugin_args import TypedPluginArgs
from shared.models import (
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
)

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
CPU_MEMORY = [ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1)]


def load_args(plugin: str, args_yaml: str) -> TypedPluginArgs:
    args = textwrap.indent(textwrap.dedent(args_yaml).strip(), "      ")
    text = f"{HEADER}profiles:\n- pluginConfig:\n  - name: {plugin}\n    args:\n{args}\n"
    value = load_config(text).profiles[0].plugin_config[plugin]
    assert not isinstance(value, dict)
    return value


# ---------------------------------------------------------------- defaults
@pytest.mark.parametrize(
    ("plugin", "args_yaml", "want"),
    [
        pytest.param(
            "NodeResourcesFit",
            "{}",
            NodeResourcesFitArgs(
                scoring_strategy=ScoringStrategy(type="LeastAllocated", resources=CPU_MEMORY)
            ),
            id="NodeResourcesFitArgs empty",
        ),
        pytest.param(
            "NodeResourcesFit",
            "scoringStrategy: {type: MostAllocated}",
            NodeResourcesFitArgs(
                scoring_strategy=ScoringStrategy(type="MostAllocated", resources=CPU_MEMORY)
            ),
            id="NodeResourcesFitArgs resources empty",
        ),
        pytest.param(
            "NodeResourcesFit",
            """
            ignoredResources: [example.com/foo]
            scoringStrategy:
              type: LeastAllocated
              resources: [{name: cpu, weight: 0}, {name: example.com/gpu, weight: 4}]
            """,
            NodeResourcesFitArgs(
                ignored_resources=["example.com/foo"],
                scoring_strategy=ScoringStrategy(
                    type="LeastAllocated",
                    resources=[
                        ResourceSpec(name="cpu", weight=1),
                        ResourceSpec(name="example.com/gpu", weight=4),
                    ],
                ),
            ),
            id="NodeResourcesFitArgs zero weight becomes 1",
        ),
        pytest.param(
            "NodeResourcesBalancedAllocation",
            "{}",
            NodeResourcesBalancedAllocationArgs(resources=CPU_MEMORY),
            id="BalancedAllocationArgs empty",
        ),
        pytest.param(
            "NodeResourcesBalancedAllocation",
            "resources: [{name: example.com/gpu}]",
            NodeResourcesBalancedAllocationArgs(
                resources=[ResourceSpec(name="example.com/gpu", weight=1)]
            ),
            id="BalancedAllocationArgs unset weight becomes 1",
        ),
        pytest.param(
            "InterPodAffinity",
            "{}",
            InterPodAffinityArgs(hard_pod_affinity_weight=1),
            id="InterPodAffinityArgs empty",
        ),
        pytest.param(
            "InterPodAffinity",
            "{hardPodAffinityWeight: 0, ignorePreferredTermsOfExistingPods: true}",
            InterPodAffinityArgs(
                hard_pod_affinity_weight=0, ignore_preferred_terms_of_existing_pods=True
            ),
            id="InterPodAffinityArgs explicit zero stays",
        ),
        pytest.param(
            "PodTopologySpread",
            "{}",
            PodTopologySpreadArgs(defaulting_type="System"),
            id="PodTopologySpreadArgs empty",
        ),
        pytest.param(
            "PodTopologySpread",
            "defaultingType: ''",
            PodTopologySpreadArgs(defaulting_type="System"),
            id="PodTopologySpreadArgs empty defaultingType",
        ),
        pytest.param(
            "DefaultPreemption",
            "{}",
            DefaultPreemptionArgs(
                min_candidate_nodes_percentage=10, min_candidate_nodes_absolute=100
            ),
            id="DefaultPreemptionArgs empty",
        ),
        pytest.param(
            "DefaultPreemption",
            "minCandidateNodesPercentage: 50",
            DefaultPreemptionArgs(
                min_candidate_nodes_percentage=50, min_candidate_nodes_absolute=100
            ),
            id="DefaultPreemptionArgs only percentage set",
        ),
        pytest.param(
            "Coscheduling",
            "{}",
            CoschedulingArgs(permit_waiting_time_seconds=60, pod_group_backoff_seconds=0),
            id="CoschedulingArgs empty (scheduler-plugins defaults)",
        ),
        pytest.param(
            "Coscheduling",
            "{apiVersion: kubescheduler.config.k8s.io/v1, kind: CoschedulingArgs, "
            "permitWaitingTimeSeconds: 10, podGroupBackoffSeconds: 20}",
            CoschedulingArgs(permit_waiting_time_seconds=10, pod_group_backoff_seconds=20),
            id="CoschedulingArgs set",
        ),
        pytest.param("NodeAffinity", "{}", NodeAffinityArgs(), id="NodeAffinityArgs empty"),
        pytest.param(
            "NodeAffinity",
            """
            addedAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                nodeSelectorTerms:
                - matchExpressions: [{key: zone, operator: In, values: [a, b]}]
              preferredDuringSchedulingIgnoredDuringExecution:
              - weight: 3
                preference:
                  matchFields: [{key: metadata.name, operator: NotIn, values: [n1]}]
            """,
            NodeAffinityArgs(
                added_affinity=NodeAffinity(
                    required_during_scheduling_ignored_during_execution=NodeSelector(
                        node_selector_terms=[
                            NodeSelectorTerm(
                                match_expressions=[
                                    NodeSelectorRequirement(
                                        key="zone", operator="In", values=["a", "b"]
                                    )
                                ]
                            )
                        ]
                    ),
                    preferred_during_scheduling_ignored_during_execution=[
                        PreferredSchedulingTerm(
                            weight=3,
                            preference=NodeSelectorTerm(
                                match_fields=[
                                    NodeSelectorRequirement(
                                        key="metadata.name", operator="NotIn", values=["n1"]
                                    )
                                ]
                            ),
                        )
                    ],
                )
            ),
            id="NodeAffinityArgs addedAffinity is a models.NodeAffinity",
        ),
    ],
)
def test_args_defaults(plugin: str, args_yaml: str, want: TypedPluginArgs) -> None:
    assert load_args(plugin, args_yaml) == want


def test_programmatic_args_defaults_match_loaded() -> None:
    """Constructing args in code gives the same defaults as loading them."""
    for plugin, cls in [
        ("NodeResourcesFit", NodeResourcesFitArgs),
        ("NodeResourcesBalancedAllocation", NodeResourcesBalancedAllocationArgs),
        ("InterPodAffinity", InterPodAffinityArgs),
        ("PodTopologySpread", PodTopologySpreadArgs),
        ("DefaultPreemption", DefaultPreemptionArgs),
        ("NodeAffinity", NodeAffinityArgs),
        ("Coscheduling", CoschedulingArgs),
    ]:
        assert cls() == load_args(plugin, "{}"), plugin


def test_plugin_args_getter() -> None:
    profile = load_config(HEADER).profiles[0]
    assert profile.plugin_args(DefaultPreemptionArgs).min_candidate_nodes_absolute == 100
    del profile.plugin_config["DefaultPreemption"]
    assert profile.plugin_args(DefaultPreemptionArgs) == DefaultPreemptionArgs()


# ---------------------------------------------------------------- validation
ARGS = "profiles[0].pluginConfig[0].args"
VALID_TERM = "{matchExpressions: [{key: zone, operator: In, values: [a]}]}"


def affinity(expressions: str = "", fields: str = "") -> str:
    term = []
    if expressions:
        term.append(f"matchExpressions: [{expressions}]")
    if fields:
        term.append(f"matchFields: [{fields}]")
    return (
        "addedAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
        f"{{nodeSelectorTerms: [{{{', '.join(term)}}}]}}}}"
    )


TERM = f"{ARGS}.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"


@pytest.mark.parametrize(
    ("plugin", "args_yaml", "errors"),
    [
        # Coscheduling (scheduler-plugins ValidateCoschedulingArgs; its wording, 0 is valid)
        pytest.param(
            "Coscheduling",
            "permitWaitingTimeSeconds: -1",
            [f"{ARGS}.permitWaitingTimeSeconds: Invalid value: -1: must be greater than 0"],
            id="coscheduling negative wait",
        ),
        pytest.param(
            "Coscheduling",
            "{permitWaitingTimeSeconds: -5, podGroupBackoffSeconds: -1}",
            [
                f"{ARGS}.permitWaitingTimeSeconds: Invalid value: -5: must be greater than 0",
                f"{ARGS}.podGroupBackoffSeconds: Invalid value: -1: must be greater than 0",
            ],
            id="coscheduling both negative",
        ),
        pytest.param(
            "Coscheduling",
            "{permitWaitingTimeSeconds: 10, scheduleTimeoutSeconds: 5}",
            [f"{ARGS}.scheduleTimeoutSeconds: unknown field"],
            id="coscheduling unknown field",
        ),
        pytest.param(
            "Coscheduling",
            "permitWaitingTimeSeconds: '10'",
            [f"{ARGS}.permitWaitingTimeSeconds: expected an integer"],
            id="coscheduling wrong type",
        ),
        pytest.param(
            "Coscheduling",
            "{kind: DefaultPreemptionArgs}",
            [f"{ARGS}: args for plugin Coscheduling were not of type CoschedulingArgs"],
            id="coscheduling wrong kind",
        ),
        # NodeResourcesFit
        pytest.param(
            "NodeResourcesFit",
            "ignoredResources: ['-bad']",
            [f'{ARGS}.ignoredResources[0]: Invalid value: "-bad": name part must consist of'],
            id="fit ignored resource not a qualified name",
        ),
        pytest.param(
            "NodeResourcesFit",
            "ignoredResourceGroups: [example.com/aaa]",
            [
                f'{ARGS}.ignoredResourceGroups[0]: Invalid value: "example.com/aaa": resource '
                "group name can't contain '/'"
            ],
            id="fit ignored group with slash",
        ),
        pytest.param(
            "NodeResourcesFit",
            "scoringStrategy: {type: Invalid}",
            [
                f'{ARGS}.scoringStrategy.type: Unsupported value: "Invalid": supported values: '
                '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"'
            ],
            id="fit unknown strategy",
        ),
        pytest.param(
            "NodeResourcesFit",
            "scoringStrategy: {resources: [{name: cpu, weight: 1}]}",
            [f'{ARGS}.scoringStrategy.type: Unsupported value: "": supported values:'],
            id="fit strategy without type",
        ),
        pytest.param(
            "NodeResourcesFit",
            "scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 101}, "
            "{name: memory, weight: -1}]}",
            [
                f"{ARGS}.scoringStrategy.resources[0].weight: Invalid value: 101: resource weight "
                "of cpu not in valid range (0, 100]",
                f"{ARGS}.scoringStrategy.resources[1].weight: Invalid value: -1: resource weight "
                "of memory not in valid range (0, 100]",
            ],
            id="fit resource weights out of range",
        ),
        pytest.param(
            "NodeResourcesFit",
            "scoringStrategy: {type: RequestedToCapacityRatio}",
            [
                f"{ARGS}.scoringStrategy.requestedToCapacityRatio: Required value: must be "
                "specified when type is RequestedToCapacityRatio"
            ],
            id="fit RTCR without params",
        ),
        pytest.param(
            "NodeResourcesFit",
            "scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: {}}",
            [
                f"{ARGS}.scoringStrategy.requestedToCapacityRatio.shape: Required value: at least "
                "one point must be specified"
            ],
            id="fit RTCR empty shape",
        ),
        pytest.param(
            "NodeResourcesFit",
            "scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: "
            "{shape: [{utilization: 50, score: 5}, {utilization: 50, score: 6}, "
            "{utilization: 10, score: 7}]}}",
            [
                f"{ARGS}.scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid "
                "value: 50: values must be sorted in increasing order"
            ],
            id="fit RTCR utilization not increasing (first violation only)",
        ),
        pytest.param(
            "NodeResourcesFit",
            "scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: "
            "{shape: [{utilization: -10, score: -1}, {utilization: 110, score: 11}]}}",
            [
                f"{ARGS}.scoringStrategy.requestedToCapacityRatio.shape[0].utilization: Invalid "
                "value: -10: not in valid range [0, 100]",
                f"{ARGS}.scoringStrategy.requestedToCapacityRatio.shape[0].score: Invalid value: "
                "-1: not in valid range [0, 10]",
                f"{ARGS}.scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid "
                "value: 110: not in valid range [0, 100]",
                f"{ARGS}.scoringStrategy.requestedToCapacityRatio.shape[1].score: Invalid value: "
                "11: not in valid range [0, 10]",
            ],
            id="fit RTCR points out of range",
        ),
        pytest.param(
            "NodeResourcesFit",
            "scoringStrategy: {type: MostAllocated, requestedToCapacityRatio: "
            "{shape: [{utilization: 0, score: 0}]}}",
            [
                f"{ARGS}.scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when "
                "type is not RequestedToCapacityRatio"
            ],
            id="fit RTCR params with another type",
        ),
        # NodeResourcesBalancedAllocation
        pytest.param(
            "NodeResourcesBalancedAllocation",
            "resources: [{name: cpu, weight: 2}, {name: cpu, weight: 1}]",
            [
                f"{ARGS}.resources[0].weight: Invalid value: 2: must be 1",
                f'{ARGS}.resources[1].name: Duplicate value: "cpu"',
            ],
            id="balanced weight not 1 and duplicate",
        ),
        # InterPodAffinity
        pytest.param(
            "InterPodAffinity",
            "hardPodAffinityWeight: -1",
            [f"{ARGS}.hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]"],
            id="hard affinity weight negative",
        ),
        pytest.param(
            "InterPodAffinity",
            "hardPodAffinityWeight: 101",
            [f"{ARGS}.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"],
            id="hard affinity weight above 100",
        ),
        # DefaultPreemption
        pytest.param(
            "DefaultPreemption",
            "{minCandidateNodesPercentage: 101, minCandidateNodesAbsolute: -1}",
            [
                f"{ARGS}.minCandidateNodesPercentage: Invalid value: 101: not in valid range "
                "[0, 100]",
                f"{ARGS}.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)",
            ],
            id="preemption out of range",
        ),
        pytest.param(
            "DefaultPreemption",
            "{minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 0}",
            [
                f"{ARGS}.minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same "
                "time as minCandidateNodesAbsolute",
                f"{ARGS}.minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same "
                "time as minCandidateNodesPercentage",
            ],
            id="preemption both zero",
        ),
        # PodTopologySpread
        pytest.param(
            "PodTopologySpread",
            "defaultingType: Other",
            [
                f'{ARGS}.defaultingType: Unsupported value: "Other": supported values: "System", '
                '"List"'
            ],
            id="spread unknown defaulting type",
        ),
        pytest.param(
            "PodTopologySpread",
            "defaultConstraints: [{maxSkew: 1, topologyKey: zone, "
            "whenUnsatisfiable: DoNotSchedule}]",
            [
                f'{ARGS}.defaultingType: Invalid value: "System": when .defaultConstraints are '
                "not empty"
            ],
            id="spread constraints with System defaulting",
        ),
        pytest.param(
            "PodTopologySpread",
            "{defaultingType: List, defaultConstraints: [{maxSkew: 0, topologyKey: zone, "
            "whenUnsatisfiable: DoNotSchedule}, "
            "{topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}",
            [
                f"{ARGS}.defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range "
                "(0, inf)",
                f"{ARGS}.defaultConstraints[1].maxSkew: Invalid value: 0: not in valid range "
                "(0, inf)",
                f'{ARGS}.defaultConstraints[1]: Duplicate value: "{{zone, DoNotSchedule}}"',
            ],
            id="spread maxSkew zero or absent, repeated constraint",
        ),
        pytest.param(
            "PodTopologySpread",
            "{defaultingType: List, defaultConstraints: [{maxSkew: 1}]}",
            [
                f"{ARGS}.defaultConstraints[0].topologyKey: Required value: can not be empty",
                f"{ARGS}.defaultConstraints[0].whenUnsatisfiable: Required value: can not be empty",
            ],
            id="spread key and action missing",
        ),
        pytest.param(
            "PodTopologySpread",
            "{defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: 'a b', "
            "whenUnsatisfiable: Sometimes}]}",
            [
                f'{ARGS}.defaultConstraints[0].topologyKey: Invalid value: "a b": name part must '
                "consist of",
                f'{ARGS}.defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Sometimes": '
                'supported values: "DoNotSchedule", "ScheduleAnyway"',
            ],
            id="spread bad key and action",
        ),
        pytest.param(
            "PodTopologySpread",
            "{defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: zone, "
            "whenUnsatisfiable: ScheduleAnyway, labelSelector: {}}]}",
            [
                f"{ARGS}.defaultConstraints[0].labelSelector: Forbidden: constraint must not "
                "define a selector, as they deduced for each pod"
            ],
            id="spread constraint with selector",
        ),
        # NodeAffinity (component-helpers parsing of addedAffinity)
        pytest.param(
            "NodeAffinity",
            affinity("{key: zone, operator: Near, values: [a]}"),
            [
                f'{TERM}.matchExpressions[0].operator: Unsupported value: "Near": supported '
                'values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"'
            ],
            id="affinity unknown operator",
        ),
        pytest.param(
            "NodeAffinity",
            affinity("{key: 'a/b/c', operator: Exists}"),
            [f'{TERM}.matchExpressions[0].key: Invalid value: "a/b/c": a qualified name must'],
            id="affinity bad key",
        ),
        pytest.param(
            "NodeAffinity",
            affinity("{key: zone, operator: In, values: []}"),
            [
                f"{TERM}.matchExpressions[0].values: Invalid value: []: for 'in', 'notin' "
                "operators, values set can't be empty"
            ],
            id="affinity In without values",
        ),
        pytest.param(
            "NodeAffinity",
            affinity("{key: zone, operator: DoesNotExist, values: [a]}"),
            [
                f'{TERM}.matchExpressions[0].values: Invalid value: ["a"]: values set must be '
                "empty for exists and does not exist"
            ],
            id="affinity DoesNotExist with values",
        ),
        pytest.param(
            "NodeAffinity",
            affinity("{key: cores, operator: Gt, values: ['1', x]}"),
            [
                f'{TERM}.matchExpressions[0].values: Invalid value: ["1", "x"]: for \'Gt\', '
                "'Lt' operators, exactly one value is required",
                f"{TERM}.matchExpressions[0].values[1]: Invalid value: \"x\": for 'Gt', 'Lt' "
                "operators, the value must be an integer",
            ],
            id="affinity Gt with two values",
        ),
        pytest.param(
            "NodeAffinity",
            affinity("{key: zone, operator: In, values: ['-a-']}"),
            [
                f'{TERM}.matchExpressions[0].values[0]: Invalid value: "-a-": a valid label must '
                "be an empty string"
            ],
            id="affinity bad label value",
        ),
        pytest.param(
            "NodeAffinity",
            affinity(fields="{key: metadata.name, operator: Exists}"),
            [
                f'{TERM}.matchFields[0].operator: Unsupported value: "Exists": supported values: '
                '"In", "NotIn"'
            ],
            id="affinity field operator",
        ),
        pytest.param(
            "NodeAffinity",
            affinity(fields="{key: metadata.name, operator: In, values: [a, b]}"),
            [f'{TERM}.matchFields[0].values: Invalid value: ["a", "b"]: must have one element'],
            id="affinity field with two values",
        ),
        pytest.param(
            "NodeAffinity",
            "addedAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, "
            "preference: {matchExpressions: [{key: zone, operator: Bad}]}}]}",
            [
                f"{ARGS}.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
                '.matchExpressions[0].operator: Unsupported value: "Bad"'
            ],
            id="affinity bad preferred term",
        ),
    ],
)
def test_args_validation(plugin: str, args_yaml: str, errors: list[str]) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        load_args(plugin, args_yaml)
    got = caught.value.errors
    suffix = f' (profile "default-scheduler", plugin {plugin})'
    assert all(error.endswith(suffix) for error in got), got
    assert len(got) == len(errors), got
    for error, want in zip(got, errors, strict=True):
        assert error.startswith(want), (error, want)


@pytest.mark.parametrize(
    ("plugin", "args_yaml"),
    [
        pytest.param(
            "NodeAffinity",
            f"addedAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: "
            f"{{nodeSelectorTerms: [{{}}, {VALID_TERM}]}}}}",
            id="empty term is skipped",
        ),
        pytest.param(
            "NodeAffinity",
            "addedAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 0, "
            "preference: {matchExpressions: [{key: zone, operator: Bad}]}}]}",
            id="weight-0 preferred term is not parsed",
        ),
        pytest.param(
            "NodeResourcesFit",
            "{ignoredResources: [example.com/foo, cpu], ignoredResourceGroups: [example.com]}",
            id="valid ignored resources",
        ),
        pytest.param(
            "NodeResourcesFit",
            "scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: "
            "{shape: [{utilization: 0, score: 10}, {utilization: 100, score: 0}]}}",
            id="least-requested RTCR shape",
        ),
        pytest.param(
            "PodTopologySpread",
            "{defaultingType: List, defaultConstraints: ["
            "{maxSkew: 3, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}, "
            "{maxSkew: 5, topologyKey: topology.kubernetes.io/zone, "
            "whenUnsatisfiable: ScheduleAnyway}]}",
            id="system constraints written as a List",
        ),
        pytest.param("InterPodAffinity", "hardPodAffinityWeight: 100", id="hard weight 100"),
        pytest.param(
            "Coscheduling",
            "{permitWaitingTimeSeconds: 0, podGroupBackoffSeconds: 0}",
            id="coscheduling zeros",
        ),
        pytest.param(
            "DefaultPreemption",
            "{minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 1}",
            id="preemption percentage zero alone",
        ),
    ],
)
def test_valid_args(plugin: str, args_yaml: str) -> None:
    load_args(plugin, args_yaml)
