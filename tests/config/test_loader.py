"""load_config: sources, strict decoding, defaulting of profiles and extenders, and every
top-level error message (upstream ValidateKubeSchedulerConfiguration)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from shared.config import (
    LIST_DEFAULTING,
    ConfigError,
    DefaultPreemptionArgs,
    Extender,
    ExtenderManagedResource,
    ExtenderTLSConfig,
    InvalidConfigError,
    NodeResourcesFitArgs,
    PodTopologySpreadArgs,
    Profile,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    SchedulerConfiguration,
    ScoringStrategy,
    UtilizationShapePoint,
    default_config,
    load_config,
    validate_config,
)
from shared.models import TopologySpreadConstraint

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def doc(body: str) -> str:
    return HEADER + textwrap.dedent(body)


# ---------------------------------------------------------------- sources
def test_load_from_text_dict_path_and_str_path(tmp_path: Path) -> None:
    text = doc("parallelism: 8\n")
    file = tmp_path / "scheduler.yaml"
    file.write_text(text)
    mapping = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "parallelism": 8,
    }
    loaded = [load_config(text), load_config(mapping), load_config(file), load_config(str(file))]
    assert [c.parallelism for c in loaded] == [8, 8, 8, 8]
    assert loaded[0] == loaded[1] == loaded[2] == loaded[3]


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"reading .*absent\.yaml"):
        load_config(tmp_path / "absent.yaml")


def test_header_only_equals_default_config() -> None:
    assert load_config(HEADER) == default_config()


# ---------------------------------------------------------------- documentation examples
# The bin-packing docs' examples were written for v1beta3; v1 is the only version upstream still
# reads, so they are loaded with the v1 header. The fields are the same.
MOST_ALLOCATED_EXAMPLE = """
profiles:
- pluginConfig:
  - args:
      scoringStrategy:
        resources:
        - name: cpu
          weight: 1
        - name: memory
          weight: 1
        - name: intel.com/foo
          weight: 3
        - name: intel.com/bar
          weight: 3
        type: MostAllocated
    name: NodeResourcesFit
"""

RTCR_EXAMPLE = """
profiles:
- pluginConfig:
  - args:
      scoringStrategy:
        resources:
        - name: intel.com/foo
          weight: 3
        - name: intel.com/bar
          weight: 3
        requestedToCapacityRatio:
          shape:
          - utilization: 0
            score: 0
          - utilization: 100
            score: 10
        type: RequestedToCapacityRatio
    name: NodeResourcesFit
"""


@pytest.mark.parametrize(
    ("body", "want"),
    [
        pytest.param(
            MOST_ALLOCATED_EXAMPLE,
            NodeResourcesFitArgs(
                scoring_strategy=ScoringStrategy(
                    type="MostAllocated",
                    resources=[
                        ResourceSpec(name="cpu", weight=1),
                        ResourceSpec(name="memory", weight=1),
                        ResourceSpec(name="intel.com/foo", weight=3),
                        ResourceSpec(name="intel.com/bar", weight=3),
                    ],
                )
            ),
            id="MostAllocated",
        ),
        pytest.param(
            RTCR_EXAMPLE,
            NodeResourcesFitArgs(
                scoring_strategy=ScoringStrategy(
                    type="RequestedToCapacityRatio",
                    resources=[
                        ResourceSpec(name="intel.com/foo", weight=3),
                        ResourceSpec(name="intel.com/bar", weight=3),
                    ],
                    requested_to_capacity_ratio=RequestedToCapacityRatioParam(
                        shape=[
                            UtilizationShapePoint(utilization=0, score=0),
                            UtilizationShapePoint(utilization=100, score=10),
                        ]
                    ),
                )
            ),
            id="RequestedToCapacityRatio",
        ),
    ],
)
def test_bin_packing_examples(body: str, want: NodeResourcesFitArgs) -> None:
    profile = load_config(doc(body)).profiles[0]
    assert profile.scheduler_name == "default-scheduler"
    assert profile.plugin_args(NodeResourcesFitArgs) == want


def test_bin_packing_example_as_written_in_the_docs_is_rejected() -> None:
    seed = "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n"
    with pytest.raises(InvalidConfigError, match="apiVersion: Unsupported value"):
        load_config(seed + MOST_ALLOCATED_EXAMPLE)


@pytest.mark.parametrize(
    ("body", "want"),
    [
        pytest.param(
            """
            profiles:
              - schedulerName: default-scheduler
                pluginConfig:
                  - name: PodTopologySpread
                    args:
                      defaultConstraints:
                        - maxSkew: 1
                          topologyKey: topology.kubernetes.io/zone
                          whenUnsatisfiable: ScheduleAnyway
                      defaultingType: List
            """,
            PodTopologySpreadArgs(
                default_constraints=[
                    TopologySpreadConstraint(
                        max_skew=1,
                        topology_key="topology.kubernetes.io/zone",
                        when_unsatisfiable="ScheduleAnyway",
                    )
                ],
                defaulting_type=LIST_DEFAULTING,
            ),
            id="cluster-level constraints",
        ),
        pytest.param(
            """
            profiles:
              - schedulerName: default-scheduler
                pluginConfig:
                  - name: PodTopologySpread
                    args:
                      defaultConstraints: []
                      defaultingType: List
            """,
            PodTopologySpreadArgs(default_constraints=[], defaulting_type=LIST_DEFAULTING),
            id="disable default spreading",
        ),
    ],
)
def test_topology_spread_examples(body: str, want: PodTopologySpreadArgs) -> None:
    assert load_config(doc(body)).profiles[0].plugin_args(PodTopologySpreadArgs) == want


# ---------------------------------------------------------------- defaulting
def test_scalars_and_profile_fields() -> None:
    config = load_config(
        doc(
            """
            parallelism: 4
            percentageOfNodesToScore: 0
            podInitialBackoffSeconds: 2
            podMaxBackoffSeconds: 20
            profiles:
            - schedulerName: one
              percentageOfNodesToScore: 30
            - schedulerName: two
            """
        )
    )
    assert (config.parallelism, config.percentage_of_nodes_to_score) == (4, 0)
    assert (config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds) == (2, 20)
    assert [(p.scheduler_name, p.percentage_of_nodes_to_score) for p in config.profiles] == [
        ("one", 30),
        ("two", None),
    ]
    assert config.profile("two") is config.profiles[1]
    assert config.profile("three") is None


def test_every_profile_gets_default_plugins_and_args() -> None:
    config = load_config(doc("profiles: [{schedulerName: a}, {schedulerName: b}]\n"))
    a, b = config.profiles
    assert a.plugins == b.plugins == default_config().profiles[0].plugins
    assert a.plugin_config == b.plugin_config == default_config().profiles[0].plugin_config


def test_args_of_other_plugins_are_kept_raw_and_given_args_come_first() -> None:
    config = load_config(
        doc(
            """
            profiles:
            - plugins: {multiPoint: {enabled: [{name: CapacityScheduling}]}}
              pluginConfig:
              - {name: CapacityScheduling, args: {kubeConfigPath: /etc/k}}
              - {name: VolumeBinding, args: {bindTimeoutSeconds: 600}}
              - {name: InterPodAffinity, args: {hardPodAffinityWeight: 5}}
            """
        )
    )
    plugin_config = config.profiles[0].plugin_config
    assert plugin_config["CapacityScheduling"] == {"kubeConfigPath": "/etc/k"}
    assert plugin_config["VolumeBinding"] == {"bindTimeoutSeconds": 600}
    assert list(plugin_config)[:3] == ["CapacityScheduling", "VolumeBinding", "InterPodAffinity"]
    assert "DefaultPreemption" in plugin_config
    assert "Coscheduling" in plugin_config  # berth's default profile enables it


def test_default_args_only_for_enabled_plugins() -> None:
    config = load_config(
        doc(
            """
            profiles:
            - plugins:
                multiPoint:
                  disabled: [{name: '*'}]
                  enabled: [{name: PrioritySort}, {name: DefaultBinder}, {name: NodeResourcesFit}]
            """
        )
    )
    assert list(config.profiles[0].plugin_config) == ["NodeResourcesFit"]


def test_args_may_carry_type_meta() -> None:
    config = load_config(
        doc(
            """
            profiles:
            - pluginConfig:
              - name: NodeResourcesFit
                args:
                  apiVersion: kubescheduler.config.k8s.io/v1
                  kind: NodeResourcesFitArgs
                  scoringStrategy: {type: MostAllocated}
            """
        )
    )
    strategy = config.profiles[0].plugin_args(NodeResourcesFitArgs).scoring_strategy
    assert strategy.type == "MostAllocated"
    assert strategy.resources == [
        ResourceSpec(name="cpu", weight=1),
        ResourceSpec(name="memory", weight=1),
    ]


def test_null_args_mean_defaults() -> None:
    config = load_config(
        doc("profiles: [{pluginConfig: [{name: NodeResourcesFit, args: null}]}]\n")
    )
    assert config.profiles[0].plugin_args(NodeResourcesFitArgs) == NodeResourcesFitArgs()


def test_upstream_fields_are_accepted_and_leader_election_and_client_connection_kept() -> None:
    config = load_config(
        doc(
            """
            leaderElection:
              leaderElect: true
              leaseDuration: 15s
              renewDeadline: 10s
              retryPeriod: 2s
              resourceLock: leases
              resourceName: kube-scheduler
              resourceNamespace: kube-system
            clientConnection:
              kubeconfig: /etc/kubernetes/scheduler.conf
              acceptContentTypes: ""
              contentType: application/vnd.kubernetes.protobuf
              qps: 50
              burst: 100
            enableProfiling: true
            enableContentionProfiling: true
            delayCacheUntilActive: false
            """
        )
    )
    assert config.leader_election.resource_name == "kube-scheduler"
    assert config.leader_election.resource_namespace == "kube-system"
    assert (config.client_connection.qps, config.client_connection.burst) == (50, 100)
    config.leader_election = default_config().leader_election
    config.client_connection = default_config().client_connection
    assert config == default_config()


@pytest.mark.parametrize(
    ("section", "error"),
    [
        (
            "leaderElection: {leaseDuration: 5s, renewDeadline: 10s}",
            "leaderElection.leaseDuration: Invalid value: 5",
        ),
        (
            "leaderElection: {renewDeadline: 2s, retryPeriod: 2s}",
            "RenewDeadline must be greater than RetryPeriod*1.2",
        ),
        ("leaderElection: {retryPeriod: 0s}", "leaderElection.retryPeriod"),
        ("leaderElection: {resourceLock: endpoints}", 'only "leases" is supported'),
        ("clientConnection: {burst: -1}", "clientConnection.burst"),
    ],
)
def test_leader_election_and_client_connection_are_validated(section: str, error: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        load_config(doc(section + "\n"))
    assert error in str(info.value)


def test_leader_election_off_is_not_validated_and_zero_qps_takes_the_default() -> None:
    config = load_config(
        doc("leaderElection: {leaderElect: false, leaseDuration: 0s}\nclientConnection: {qps: 0}\n")
    )
    assert not config.leader_election.leader_elect
    assert config.client_connection.qps == 50


def test_extenders() -> None:
    config = load_config(
        doc(
            """
            extenders:
            - urlPrefix: http://127.0.0.1:8888/
              filterVerb: filter
              prioritizeVerb: prioritize
              preemptVerb: preempt
              bindVerb: bind
              weight: 2
              enableHTTPS: true
              tlsConfig: {insecure: true, serverName: ext}
              httpTimeout: 1m30s
              nodeCacheCapable: true
              managedResources:
              - {name: example.com/foo, ignoredByScheduler: true}
              ignorable: true
            - urlPrefix: http://other/
              httpTimeout: 0s
            """
        )
    )
    assert config.extenders == [
        Extender(
            url_prefix="http://127.0.0.1:8888/",
            filter_verb="filter",
            prioritize_verb="prioritize",
            preempt_verb="preempt",
            bind_verb="bind",
            weight=2,
            enable_https=True,
            tls_config=ExtenderTLSConfig(insecure=True, server_name="ext"),
            http_timeout_seconds=90.0,
            node_cache_capable=True,
            managed_resources=[
                ExtenderManagedResource(name="example.com/foo", ignored_by_scheduler=True)
            ],
            ignorable=True,
        ),
        Extender(url_prefix="http://other/", http_timeout_seconds=5.0),
    ]


@pytest.mark.parametrize(
    ("duration", "seconds"),
    [
        pytest.param("30s", 30.0, id="seconds"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param("1h2m3s", 3723.0, id="compound"),
        pytest.param("1.5m", 90.0, id="fraction"),
        pytest.param("100us", 1e-4, id="microseconds"),
    ],
)
def test_extender_timeout_durations(duration: str, seconds: float) -> None:
    config = load_config(doc(f"extenders: [{{urlPrefix: x, httpTimeout: {duration}}}]\n"))
    assert config.extenders[0].http_timeout_seconds == pytest.approx(seconds)


# ---------------------------------------------------------------- errors
TWO_BINDERS = "extenders: [{urlPrefix: a, bindVerb: bind}, {urlPrefix: b, bindVerb: bind}]"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # type meta
        pytest.param(
            "kind: KubeSchedulerConfiguration\n", "apiVersion: Required value", id="no apiVersion"
        ),
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
            'apiVersion: Unsupported value: "kubescheduler.config.k8s.io/v1beta3": '
            'supported values: "kubescheduler.config.k8s.io/v1"',
            id="old apiVersion",
        ),
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1\n",
            "kind: Required value",
            id="no kind",
        ),
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: Pod\n",
            'kind: Unsupported value: "Pod": supported values: "KubeSchedulerConfiguration"',
            id="wrong kind",
        ),
        # strict decoding
        pytest.param(HEADER + "- a\n", "invalid YAML", id="broken YAML"),
        pytest.param("[1, 2]\n", "(document): expected an object, got list", id="not a mapping"),
        pytest.param(
            HEADER + "parallelism: 1\nparallelism: 2\n",
            'invalid YAML: duplicate key "parallelism"',
            id="repeated key",
        ),
        pytest.param(
            HEADER + "algorithmSource: {}\n",
            "algorithmSource: unknown field",
            id="unknown top-level field",
        ),
        pytest.param(
            HEADER + "podMaxInUnschedulablePodsDuration: 5m\n",
            "podMaxInUnschedulablePodsDuration: unknown field",
            id="not a v1 field",
        ),
        pytest.param(
            HEADER
            + "profiles: [{plugins: {score: {enabled: [{name: A}, {name: B, wieght: 3}]}}}]\n",
            "profiles[0].plugins.score.enabled[1].wieght: unknown field",
            id="typo in plugin entry",
        ),
        pytest.param(
            HEADER + "profiles: [{plugins: {placementScore: {}}}]\n",
            "profiles[0].plugins.placementScore: unknown field",
            id="unknown extension point",
        ),
        pytest.param(
            HEADER + "leaderElection: {leader: true}\n",
            "leaderElection.leader: unknown field",
            id="unknown nested ignored field",
        ),
        pytest.param(
            HEADER + "parallelism: '16'\n",
            "parallelism: expected an integer, got string",
            id="string for int",
        ),
        pytest.param(
            HEADER + "parallelism: 1.5\n",
            "parallelism: expected an integer, got number",
            id="float for int",
        ),
        pytest.param(
            HEADER + "enableProfiling: 1\n",
            "enableProfiling: expected a boolean, got number",
            id="int for bool",
        ),
        pytest.param(
            HEADER + "parallelism: 4294967296\n",
            "parallelism: 4294967296 does not fit in int32",
            id="int32 overflow",
        ),
        pytest.param(
            HEADER + "profiles: {}\n",
            "profiles: expected a list, got object",
            id="profiles not a list",
        ),
        pytest.param(
            HEADER + "profiles: [{plugins: {score: {enabled: [{name: A, weight: 2147483648}]}}}]\n",
            "profiles[0].plugins.score.enabled[0].weight: 2147483648 does not fit in int32",
            id="weight overflow",
        ),
        pytest.param(
            HEADER + "extenders: [{urlPrefix: a, httpTimeout: 5 seconds}]\n",
            'extenders[0].httpTimeout: invalid duration "5 seconds"',
            id="bad duration",
        ),
        pytest.param(
            HEADER
            + "profiles: [{pluginConfig: [{name: NodeResourcesFit}, {name: NodeResourcesFit}]}]\n",
            'profiles[0].pluginConfig[1].name: Duplicate value: "NodeResourcesFit"',
            id="repeated plugin config",
        ),
        pytest.param(
            HEADER + "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: [1]}]}]\n",
            "profiles[0].pluginConfig[0].args: expected an object, got list",
            id="args not a mapping",
        ),
        pytest.param(
            HEADER + "profiles: [{pluginConfig: [{name: NodeResourcesFit, "
            "args: {scoringStratgy: {}}}]}]\n",
            "profiles[0].pluginConfig[0].args.scoringStratgy: unknown field "
            '(profile "default-scheduler", plugin NodeResourcesFit)',
            id="unknown field in args names profile and plugin",
        ),
        pytest.param(
            HEADER + "profiles: [{pluginConfig: [{name: NodeResourcesFit, "
            "args: {kind: InterPodAffinityArgs}}]}]\n",
            "profiles[0].pluginConfig[0].args: args for plugin NodeResourcesFit were not of type "
            'NodeResourcesFitArgs, got InterPodAffinityArgs (profile "default-scheduler", '
            "plugin NodeResourcesFit)",
            id="args of another kind",
        ),
        pytest.param(
            HEADER
            + "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {apiVersion: v1}}]}]\n",
            'profiles[0].pluginConfig[0].args.apiVersion: Unsupported value: "v1": supported '
            'values: "kubescheduler.config.k8s.io/v1" (profile "default-scheduler", plugin '
            "NodeResourcesFit)",
            id="args of another apiVersion",
        ),
        pytest.param(
            HEADER + "profiles: [{pluginConfig: [{name: NodeAffinity, args: {addedAffinity: "
            "{requiredDuringSchedulingIgnoredDuringExecution: "
            "{nodeSelectorTerms: [{matchFields: 1}]}}}}]}]\n",
            "profiles[0].pluginConfig[0].args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchFields: expected array, got integer "
            '(profile "default-scheduler", plugin NodeAffinity)',
            id="model decoding error is re-rooted",
        ),
        # validation (upstream wording)
        pytest.param(
            HEADER + "parallelism: 0\n",
            "parallelism: Invalid value: 0: should be an integer value greater than zero",
            id="parallelism zero",
        ),
        pytest.param(
            HEADER + "profiles: []\n",
            "profiles: Required value: at least one profile is required",
            id="explicitly no profiles",
        ),
        pytest.param(
            HEADER + "profiles: [{schedulerName: a}, {}]\n",
            "profiles[1].schedulerName: Required value",
            id="unnamed profile among several",
        ),
        pytest.param(
            HEADER + "profiles: [{schedulerName: a}, {schedulerName: a}]\n",
            'profiles[1].schedulerName: Duplicate value: "a"',
            id="duplicate scheduler name",
        ),
        pytest.param(
            HEADER + "percentageOfNodesToScore: 101\n",
            "percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]",
            id="percentage above 100",
        ),
        pytest.param(
            HEADER + "percentageOfNodesToScore: -1\n",
            "percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]",
            id="negative percentage",
        ),
        pytest.param(
            HEADER + "profiles: [{percentageOfNodesToScore: 120}]\n",
            "profiles[0].percentageOfNodesToScore: Invalid value: 120: not in valid range [0-100]",
            id="profile percentage above 100",
        ),
        pytest.param(
            HEADER + "podInitialBackoffSeconds: 0\n",
            "podInitialBackoffSeconds: Invalid value: 0: must be greater than 0",
            id="zero initial backoff",
        ),
        pytest.param(
            HEADER + "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 4\n",
            "podMaxBackoffSeconds: Invalid value: 4: must be greater than or equal to "
            "PodInitialBackoffSeconds",
            id="max backoff below initial",
        ),
        pytest.param(
            HEADER + "profiles: [{schedulerName: a, "
            "plugins: {queueSort: {enabled: [{name: X}, {name: Y}]}}}]\n",
            "profiles[0].plugins.queueSort.enabled: Invalid value: 2: only one queue sort plugin "
            "can be enabled",
            id="two queue sorts",
        ),
        pytest.param(
            HEADER + "profiles: [{schedulerName: a}, "
            "{schedulerName: b, plugins: {queueSort: {enabled: [{name: X}]}}}]\n",
            "profiles[1].plugins.queueSort: Invalid value: must be the same for all profiles",
            id="queue sort differs between profiles",
        ),
        pytest.param(
            HEADER + "profiles:\n"
            "- {schedulerName: a, plugins: {queueSort: {enabled: [{name: X}]}}, "
            "pluginConfig: [{name: X, args: {v: 1}}]}\n"
            "- {schedulerName: b, plugins: {queueSort: {enabled: [{name: X}]}}, "
            "pluginConfig: [{name: X, args: {v: 2}}]}\n",
            "profiles[1].pluginConfig.args: Invalid value: queueSort must be the same for all "
            "profiles",
            id="queue sort args differ between profiles",
        ),
        pytest.param(
            HEADER + "profiles: [{plugins: {filter: {enabled: [{name: EBSLimits}]}}}]\n",
            'profiles[0].plugins.filter.enabled[0]: Invalid value: "EBSLimits": was invalid in '
            'version "kubescheduler.config.k8s.io/v1" (KubeSchedulerConfiguration is version '
            '"kubescheduler.config.k8s.io/v1")',
            id="removed plugin enabled",
        ),
        pytest.param(
            HEADER + "profiles: [{pluginConfig: [{name: GCEPDLimits}]}]\n",
            'profiles[0].pluginConfig[0]: Invalid value: "GCEPDLimits": was invalid in version',
            id="removed plugin configured",
        ),
        pytest.param(
            HEADER + "extenders: [{urlPrefix: a, prioritizeVerb: prioritize}]\n",
            "extenders[0].weight: Invalid value: 0: must have a positive weight applied to it",
            id="prioritizing extender without weight",
        ),
        pytest.param(
            HEADER + TWO_BINDERS + "\n",
            'extenders: Invalid value: "found 2 extenders implementing bind": only one extender '
            "can implement bind",
            id="two binding extenders",
        ),
        pytest.param(
            HEADER + "extenders: [{urlPrefix: a, managedResources: [{name: cpu}]}]\n",
            'extenders[0].managedResources[0].name: Invalid value: "cpu": is an invalid extended '
            "resource name",
            id="native resource managed by extender",
        ),
        pytest.param(
            HEADER + "extenders: [{urlPrefix: a, managedResources: [{name: kubernetes.io/foo}]}]\n",
            'extenders[0].managedResources[0].name: Invalid value: "kubernetes.io/foo": is an '
            "invalid extended resource name",
            id="kubernetes.io resource managed by extender",
        ),
        pytest.param(
            HEADER + "extenders: [{urlPrefix: a, managedResources: [{name: 'a/b/c'}]}]\n",
            'extenders[0].managedResources[0].name: Invalid value: "a/b/c": a qualified name must '
            "consist of",
            id="unqualified managed resource name",
        ),
        pytest.param(
            HEADER + "extenders: [{urlPrefix: a, managedResources: [{name: example.com/x}]}, "
            "{urlPrefix: b, managedResources: [{name: example.com/x}]}]\n",
            'extenders[1].managedResources[0].name: Invalid value: "example.com/x": duplicate '
            "extender managed resource name",
            id="resource managed twice",
        ),
    ],
)
def test_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        load_config(text)
    assert any(error.startswith(message) for error in caught.value.errors), caught.value.errors
    assert str(caught.value).startswith("KubeSchedulerConfiguration: ")


def test_all_validation_errors_are_reported_together() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        load_config(
            HEADER + "parallelism: 0\npercentageOfNodesToScore: 101\npodInitialBackoffSeconds: 0\n"
        )
    assert [error.split(":")[0] for error in caught.value.errors] == [
        "parallelism",
        "percentageOfNodesToScore",
        "podInitialBackoffSeconds",
    ]
    assert str(caught.value).count("KubeSchedulerConfiguration: ") == 3


def test_plugin_args_errors_name_profile_and_plugin() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        load_config(
            doc(
                """
                profiles:
                - schedulerName: batch
                  pluginConfig:
                  - {name: InterPodAffinity, args: {hardPodAffinityWeight: 101}}
                """
            )
        )
    assert caught.value.errors == (
        "profiles[0].pluginConfig[0].args.hardPodAffinityWeight: Invalid value: 101: not in "
        'valid range [0, 100] (profile "batch", plugin InterPodAffinity)',
    )


def test_str_that_is_neither_file_nor_mapping() -> None:
    with pytest.raises(
        InvalidConfigError, match=r"no such file, and not a YAML mapping: nope\.yaml"
    ):
        load_config("nope.yaml")


def _wrong_args(config: SchedulerConfiguration) -> None:
    config.profiles[0].plugin_config = {"InterPodAffinity": DefaultPreemptionArgs()}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(lambda config: None, None, id="a profile built in code is valid"),
        pytest.param(
            lambda config: setattr(config, "parallelism", 0),
            "parallelism: Invalid value: 0: should be an integer value greater than zero",
            id="invalid scalar",
        ),
        pytest.param(
            _wrong_args,
            "profiles[0].pluginConfig[0].args: has to match plugin args",
            id="args of the wrong type",
        ),
    ],
)
def test_validate_config_built_in_code(change, message: str | None) -> None:
    config = SchedulerConfiguration(profiles=[Profile()])
    change(config)
    if message is None:
        validate_config(config)
        return
    with pytest.raises(InvalidConfigError) as caught:
        validate_config(config)
    assert caught.value.errors == (message,)
