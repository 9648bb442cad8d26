"""deploy/helm/berth: lint, strict schema validation of every manifest for Kubernetes 1.30,
labels and selectors, the config checksum, the HPA cap, and the contract with the services."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml

from services.scheduler.config import config_from_args
from shared.config import MOST_ALLOCATED, NodeResourcesFitArgs, default_config, load_config
from shared.observability.health import ENV_PORT
from shared.observability.tracing import ENV_ENDPOINT, ENV_SAMPLE_RATIO
from shared.runtime.env import StackSettings
from tests.deploy.chart import (
    CHART_DIR,
    COMPONENTS,
    KUBE_VERSION,
    NAMESPACE,
    RELEASE,
    Rendered,
    chart,
    render,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SKIPPED_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
"""CRDs kubernetes-validate has no schema for: checked by the assertions below instead."""

EVERYTHING_ON: dict[str, Any] = {
    "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
    "tracing": {"otlpEndpoint": "http://jaeger-collector.observability:4318"},
    "kafka": {"topicSuffix": "blue", "sessionTimeoutMs": 3000},
    "queue": {
        "singleTenant": "all",
        "autoscaling": {"enabled": True},
        "pdb": {"minAvailable": "50%"},
        "extraEnv": [{"name": "QUEUE_ONLY", "value": "1"}],
        "nodeSelector": {"pool": "system"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "queue"}},
            }
        ],
        "priorityClassName": "system-cluster-critical",
    },
    "scheduler": {"seed": 7, "autoscaling": {"metricType": "External"}},
    "binder": {"autoscaling": {"enabled": False}, "replicaCount": 3},
    "redis": {"existingSecret": "berth-redis", "existingSecretKey": "url"},
    "imagePullSecrets": [{"name": "regcred"}],
    "extraEnv": [{"name": "EVERYWHERE", "value": "yes"}],
    "podAnnotations": {"team": "sched"},
}

VALUE_SETS = [
    pytest.param({}, id="defaults"),
    pytest.param(EVERYTHING_ON, id="everything-on"),
    pytest.param(
        {
            "scheduler": {"autoscaling": {"enabled": False}},
            "binder": {"pdb": {"enabled": False}},
            "serviceAccount": {"create": False, "name": "existing"},
        },
        id="static-replicas-no-pdb-existing-sa",
    ),
    pytest.param({"fullnameOverride": "sched-berth"}, id="fullname-override"),
]


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def pod_labels(rendered: Rendered, component: str) -> dict[str, str]:
    deployment = rendered.get("Deployment", component)
    return dict(deployment.doc["spec"]["template"]["metadata"]["labels"])


# ------------------------------------------------------------------------------ lint
@pytest.mark.parametrize("values", [*VALUE_SETS])
def test_lint_is_clean(values: dict[str, Any]) -> None:
    report = helm_python.lint(CHART_DIR, values, strict=True, kube_version=f"v{KUBE_VERSION}")
    assert report["errors"] == []
    problems = [m for m in report["messages"] if m["severity"] >= 2]  # warning or error
    assert problems == []
    # Only the informational "icon is recommended" remains: there is no berth icon yet.
    assert {m["error"] for m in report["messages"]} <= {"icon is recommended"}


# ------------------------------------------------------------------------ validation
@pytest.mark.parametrize("values", [*VALUE_SETS])
def test_every_manifest_validates_strictly_for_kubernetes_1_30(values: dict[str, Any]) -> None:
    rendered = render(values)
    validated, skipped = [], []
    for manifest in rendered:
        if (manifest.api_version, manifest.kind) in SKIPPED_KINDS:
            # kubernetes-validate knows only built-in kinds: prove it, then skip on purpose.
            with pytest.raises(kubernetes_validate.SchemaNotFoundError):
                kubernetes_validate.validate(manifest.doc, KUBE_VERSION, strict=True)
            skipped.append(manifest.kind)
            continue
        kubernetes_validate.validate(manifest.doc, KUBE_VERSION, strict=True)
        validated.append(manifest.kind)
    # queue, scheduler, binder and the node agent (standalone mode)
    assert validated.count("Deployment") == 4
    assert validated.count("Service") == 4
    assert "ConfigMap" in validated
    assert set(skipped) <= {"ServiceMonitor"}


def test_the_validator_is_strict() -> None:
    rendered = render()
    bogus = copy.deepcopy(rendered.get("Deployment", "scheduler").doc)
    bogus["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bogus, KUBE_VERSION, strict=True)


def test_all_namespaced_objects_land_in_the_release_namespace() -> None:
    rendered = render(EVERYTHING_ON)
    assert {m.doc["metadata"]["namespace"] for m in rendered} == {NAMESPACE}


# ------------------------------------------------------------------- labels, selectors
@pytest.mark.parametrize("values", [*VALUE_SETS])
@pytest.mark.parametrize("component", COMPONENTS)
def test_selectors_pick_exactly_their_components_pods(
    values: dict[str, Any], component: str
) -> None:
    rendered = render(values)
    deployment = rendered.get("Deployment", component)
    selector = deployment.doc["spec"]["selector"]["matchLabels"]
    assert selector == {
        "app.kubernetes.io/name": "berth",
        "app.kubernetes.io/instance": RELEASE,
        "app.kubernetes.io/component": component,
    }
    own = pod_labels(rendered, component)
    others = [pod_labels(rendered, c) for c in COMPONENTS if c != component]
    service = rendered.get("Service", component)
    selectors = [selector, service.doc["spec"]["selector"]]
    pdb = rendered.find("PodDisruptionBudget", component)
    if pdb is not None:
        selectors.append(pdb.doc["spec"]["selector"]["matchLabels"])
    for chosen in selectors:
        assert matches(chosen, own)
        assert not any(matches(chosen, other) for other in others)
    monitor = rendered.find("ServiceMonitor", component)
    if monitor is not None:
        assert matches(monitor.doc["spec"]["selector"]["matchLabels"], service.labels)
        assert monitor.doc["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        (endpoint,) = monitor.doc["spec"]["endpoints"]
        assert endpoint["port"] == service.doc["spec"]["ports"][0]["name"]
        assert endpoint["path"] == "/metrics"
    hpa = rendered.find("HorizontalPodAutoscaler", component)
    if hpa is not None:
        assert hpa.doc["spec"]["scaleTargetRef"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": deployment.name,
        }


def test_every_object_carries_the_standard_labels() -> None:
    rendered = render(EVERYTHING_ON)
    for manifest in rendered:
        labels = manifest.labels
        assert labels["app.kubernetes.io/name"] == "berth"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["helm.sh/chart"] == "berth-0.1.0"
        assert labels["app.kubernetes.io/version"] == "0.1.0"
        if manifest.kind not in ("ConfigMap", "ServiceAccount", "Secret"):  # shared by all
            assert manifest.component in COMPONENTS
    monitors = rendered.kinds("ServiceMonitor")
    assert all(m.labels["release"] == "prom" for m in monitors)


@pytest.mark.parametrize(
    ("values", "release", "prefix", "config_map"),
    [
        pytest.param({}, "berth", "berth", "berth-config", id="release-named-like-the-chart"),
        pytest.param({}, "prod", "prod-berth", "prod-berth-config", id="release-plus-chart"),
        pytest.param({"fullnameOverride": "x"}, "prod", "x", "x-config", id="override"),
        pytest.param(
            {}, "a" * 53, "a" * 52, "a" * 53 + "-be-config", id="long-release-is-truncated"
        ),
    ],
)
def test_names(values: dict[str, Any], release: str, prefix: str, config_map: str) -> None:
    rendered = render(values, name=release)
    for component in COMPONENTS:
        name = rendered.get("Deployment", component).name
        assert name == f"{prefix}-{component}"
    assert rendered.get("ConfigMap").name == config_map
    assert all(len(m.name) <= 63 for m in rendered)


# ------------------------------------------------------------------------- checksum
def checksums(rendered: Rendered) -> set[str]:
    return {
        rendered.get("Deployment", c).doc["spec"]["template"]["metadata"]["annotations"][
            "checksum/config"
        ]
        for c in COMPONENTS
    }


def test_config_checksum_follows_the_scheduler_config() -> None:
    base = checksums(render())
    assert len(base) == 1  # every service reads the same ConfigMap
    changed = checksums(
        render(
            {"schedulerConfig": yaml.safe_load((EXAMPLES / "binpacking-config.yaml").read_text())}
        )
    )
    assert len(changed) == 1
    assert changed != base
    unrelated = checksums(render({"scheduler": {"replicaCount": 1}, "redis": {"url": "redis://r"}}))
    assert unrelated == base


# ------------------------------------------------------------------------- autoscaling
def autoscaled(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with the scheduler's and binder's HPAs on (off by default: they need a
    metrics pipeline)."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in values.items()}
    for component in ("scheduler", "binder"):
        block = dict(out.get(component) or {})
        block["autoscaling"] = {"enabled": True, **(block.get("autoscaling") or {})}
        out[component] = block
    return out


@pytest.mark.parametrize(
    ("values", "component", "min_replicas", "max_replicas"),
    [
        pytest.param({}, "scheduler", 1, 8, id="scheduler-default-equals-partitions"),
        pytest.param(
            {"kafka": {"partitions": {"schedule": 4}}},
            "scheduler",
            1,
            4,
            id="scheduler-capped-at-schedule-partitions",
        ),
        pytest.param(
            {
                "kafka": {"partitions": {"schedule": 3}},
                "scheduler": {"autoscaling": {"minReplicas": 5, "maxReplicas": 20}},
            },
            "scheduler",
            3,
            3,
            id="scheduler-min-capped-too",
        ),
        pytest.param(
            {
                "kafka": {"partitions": {"schedule": 32}},
                "scheduler": {"autoscaling": {"maxReplicas": 12}},
            },
            "scheduler",
            1,
            12,
            id="scheduler-below-the-cap",
        ),
        pytest.param(
            {"kafka": {"partitions": {"proposals": 2}}},
            "binder",
            1,
            2,
            id="binder-capped-at-proposals-partitions",
        ),
        pytest.param(
            {
                "kafka": {"partitions": {"outcomes": 1}},
                "queue": {"autoscaling": {"enabled": True, "maxReplicas": 3}},
            },
            "queue",
            1,
            3,
            id="queue-not-capped",
        ),
        pytest.param(
            {
                "kafka": {"partitions": {"schedule": 2}},
                "scheduler": {"autoscaling": {"capToPartitions": False, "maxReplicas": 6}},
            },
            "scheduler",
            1,
            6,
            id="cap-turned-off",
        ),
    ],
)
def test_hpa_replicas(
    values: dict[str, Any], component: str, min_replicas: int, max_replicas: int
) -> None:
    spec = render(autoscaled(values)).get("HorizontalPodAutoscaler", component).doc["spec"]
    assert (spec["minReplicas"], spec["maxReplicas"]) == (min_replicas, max_replicas)


@pytest.mark.parametrize(
    ("values", "metric_type", "topic", "target"),
    [
        pytest.param({}, "Pods", "berth.schedule", "20", id="pods-metric"),
        pytest.param(
            {
                "kafka": {"topicSuffix": "blue"},
                "scheduler": {
                    "autoscaling": {
                        "metricType": "External",
                        "targetLagPerReplica": 50,
                        "metricSelector": {"namespace": "sched"},
                    }
                },
            },
            "External",
            "berth.schedule.blue",
            "50",
            id="external-metric-suffixed-topic",
        ),
    ],
)
def test_hpa_scales_on_consumer_lag(
    values: dict[str, Any], metric_type: str, topic: str, target: str
) -> None:
    spec = render(autoscaled(values)).get("HorizontalPodAutoscaler", "scheduler").doc["spec"]
    (metric,) = spec["metrics"]
    assert metric["type"] == metric_type
    source = metric[metric_type.lower()]
    assert source["metric"]["name"] == "berth_consumer_lag"
    assert source["metric"]["selector"]["matchLabels"]["topic"] == topic
    assert source["target"] == {"type": "AverageValue", "averageValue": target}


@pytest.mark.parametrize(
    ("values", "component", "replicas"),
    [
        pytest.param(
            {"scheduler": {"autoscaling": {"enabled": False}, "replicaCount": 20}},
            "scheduler",
            8,
            id="static-scheduler-replicas-capped",
        ),
        pytest.param(
            {"binder": {"autoscaling": {"enabled": False}, "replicaCount": 2}},
            "binder",
            2,
            id="static-binder-replicas",
        ),
        pytest.param({}, "queue", 1, id="queue-static-by-default"),
    ],
)
def test_static_replicas(values: dict[str, Any], component: str, replicas: int) -> None:
    rendered = render(values)
    assert rendered.get("Deployment", component).doc["spec"]["replicas"] == replicas
    assert rendered.find("HorizontalPodAutoscaler", component) is None


def test_an_autoscaled_deployment_leaves_replicas_to_the_hpa() -> None:
    spec = render(autoscaled({})).get("Deployment", "scheduler").doc["spec"]
    assert "replicas" not in spec


def test_no_hpa_by_default() -> None:
    """An HPA on a metric nobody serves never scales and reports errors: off unless asked."""
    rendered = render()
    assert rendered.kinds("HorizontalPodAutoscaler") == []
    assert rendered.get("Deployment", "scheduler").doc["spec"]["replicas"] == 2


# ----------------------------------------------------------------------- config map
def test_default_config_map_is_berths_default_config() -> None:
    text = render().config_yaml()
    assert load_config(text) == default_config()


def test_config_map_carries_an_overridden_config(tmp_path: Path) -> None:
    override = yaml.safe_load((EXAMPLES / "binpacking-config.yaml").read_text())
    path = tmp_path / "config.yaml"
    path.write_text(render({"schedulerConfig": override}).config_yaml())
    config = load_config(path)
    profile = config.profile("default-scheduler")
    assert profile is not None
    fit = profile.plugin_args(NodeResourcesFitArgs)
    assert fit.scoring_strategy.type == MOST_ALLOCATED
    assert config.percentage_of_nodes_to_score == 100


# ---------------------------------------------------------------- service contract
def plain_env(rendered: Rendered, component: str, **substitutions: str) -> dict[str, str]:
    """The plain values of the container's env; the message keys (mounted from a Secret,
    tests/deploy/test_chart_message_keys.py) left out."""
    env = {k: v for k, v in rendered.env(component).items() if isinstance(v, str)}
    env.pop("BERTH_MESSAGE_KEYS", None)
    for name, value in substitutions.items():
        env[name] = value
    return env


@pytest.mark.parametrize("component", COMPONENTS)
def test_entry_points_exist(component: str) -> None:
    command = render().container(component)["command"]
    assert command[:2] == ["python", "-m"]
    assert importlib.util.find_spec(command[2]) is not None


@pytest.mark.parametrize("component", ["queue", "binder"])
def test_queue_and_binder_read_their_settings_from_the_rendered_env(component: str) -> None:
    rendered = render(EVERYTHING_ON | {"redis": {"url": "redis://r:6379/2"}})
    command = rendered.container(component)["command"]
    assert command[2:] == [f"services.{component}", "--name", "$(POD_NAME)"]
    settings = StackSettings.from_env(plain_env(rendered, component))
    assert settings.redis_url == "redis://r:6379/2"
    assert settings.kafka_bootstrap == "berth-kafka:9092"
    assert settings.topic_suffix == "blue"
    assert settings.session_ms == 3000
    assert settings.config_path == "/etc/berth/config.yaml"
    assert (settings.cluster, settings.store_prefix, settings.queue_prefix) == (
        "default",
        "berth:",
        "berth:q:",
    )
    assert settings.single_tenant == ("all" if component == "queue" else None)


def test_the_worker_reads_its_settings_from_the_rendered_command_and_env(
    tmp_path: Path,
) -> None:
    rendered = render(EVERYTHING_ON | {"redis": {"url": "redis://r:6379/2"}})
    config_file = tmp_path / "config.yaml"
    config_file.write_text(rendered.config_yaml())
    env = plain_env(rendered, "scheduler", BERTH_CONFIG=str(config_file))
    argv = [
        arg.replace("$(POD_NAME)", "berth-scheduler-abc")
        for arg in rendered.container("scheduler")["command"][3:]
    ]
    config = config_from_args(argv, env)
    assert config.worker_id == "berth-scheduler-abc"
    assert config.group_id == "berth-scheduler.blue"  # as shared.runtime.env.StackSettings names it
    assert config.topics.schedule == "berth.schedule.blue"
    assert config.redis_url == "redis://r:6379/2"
    assert config.seed == 7
    assert config.profiles() == default_config()


def test_redis_url_from_an_existing_secret() -> None:
    env = render(EVERYTHING_ON).env("binder")
    assert env["BERTH_REDIS_URL"] == {"secretKeyRef": {"name": "berth-redis", "key": "url"}}


@pytest.mark.parametrize("component", COMPONENTS)
def test_probes_and_metrics_port(component: str) -> None:
    rendered = render({"metrics": {"port": 8088}})
    container = rendered.container(component)
    assert container["ports"] == [
        {"name": "http-metrics", "containerPort": 8088, "protocol": "TCP"}
    ]
    assert rendered.env(component)[ENV_PORT] == "8088"
    probes = {
        key: (container[key]["httpGet"]["path"], container[key]["httpGet"]["port"])
        for key in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert probes == {
        "startupProbe": ("/healthz", "http-metrics"),
        "livenessProbe": ("/healthz", "http-metrics"),
        "readinessProbe": ("/readyz", "http-metrics"),
    }
    service_port = rendered.get("Service", component).doc["spec"]["ports"][0]
    assert (service_port["port"], service_port["targetPort"]) == (8088, "http-metrics")


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param({}, {"fieldRef": {"fieldPath": "status.podIP"}}, id="the-pods-ip"),
        pytest.param({"metrics": {"host": "0.0.0.0"}}, "0.0.0.0", id="as-configured"),
    ],
)
@pytest.mark.parametrize("component", COMPONENTS)
def test_metrics_listen_on_the_pods_ip_not_every_interface(
    component: str, values: dict[str, Any], expected: object
) -> None:
    assert render(values).env(component)["BERTH_METRICS_HOST"] == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param({}, None, id="off-by-default"),
        pytest.param(
            {"tracing": {"otlpEndpoint": "http://jaeger:4318", "sampleRatio": 0.1}},
            ("http://jaeger:4318", "0.1"),
            id="endpoint",
        ),
    ],
)
def test_tracing_env(values: dict[str, Any], expected: tuple[str, str] | None) -> None:
    for component in COMPONENTS:
        env = render(values).env(component)
        if expected is None:
            assert ENV_ENDPOINT not in env
            continue
        assert (env[ENV_ENDPOINT], env[ENV_SAMPLE_RATIO]) == expected
        assert env["OTEL_SERVICE_NAME"] == f"berth-{component}"
        assert "k8s.pod.name=$(POD_NAME)" in env["OTEL_RESOURCE_ATTRIBUTES"]


# -------------------------------------------------------------------------- security
@pytest.mark.parametrize("component", COMPONENTS)
def test_pods_run_non_root_with_a_read_only_root_filesystem(component: str) -> None:
    rendered = render()
    pod = rendered.get("Deployment", component).doc["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    container = rendered.container(component)
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/tmp"]]["emptyDir"] == {}
    assert volumes[mounts["/etc/berth"]]["configMap"]["name"] == rendered.get("ConfigMap").name


# -------------------------------------------------------------------------- optional
@pytest.mark.parametrize(
    ("values", "kind", "count"),
    [
        pytest.param({}, "ServiceMonitor", 0, id="no-servicemonitor-by-default"),
        pytest.param(
            {"metrics": {"serviceMonitor": {"enabled": True}}}, "ServiceMonitor", 4, id="monitors"
        ),
        pytest.param({}, "HorizontalPodAutoscaler", 0, id="no-hpa-by-default"),
        pytest.param(
            autoscaled({}), "HorizontalPodAutoscaler", 2, id="hpa-for-scheduler-and-binder"
        ),
        pytest.param({}, "PodDisruptionBudget", 3, id="pdbs"),
        pytest.param(
            {c: {"pdb": {"enabled": False}} for c in COMPONENTS},
            "PodDisruptionBudget",
            0,
            id="pdbs-off",
        ),
        pytest.param({"serviceAccount": {"create": False}}, "ServiceAccount", 0, id="no-sa"),
    ],
)
def test_optional_resources(values: dict[str, Any], kind: str, count: int) -> None:
    assert len(render(values).kinds(kind)) == count


def test_probes_can_be_turned_off() -> None:
    container = render({"probes": {"enabled": False}}).container("scheduler")
    assert not {"startupProbe", "livenessProbe", "readinessProbe"} & set(container)


def test_pdb_min_available_replaces_max_unavailable() -> None:
    spec = render(EVERYTHING_ON).get("PodDisruptionBudget", "queue").doc["spec"]
    assert spec["minAvailable"] == "50%"
    assert "maxUnavailable" not in spec


def test_chart_metadata() -> None:
    loaded = chart()
    assert loaded.name == "berth"
    assert loaded.metadata["kubeVersion"] == ">=1.23.0-0"
    assert loaded.schema is not None


# -------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    ("values", "reason"),
    [
        pytest.param(
            {"kafka": {"partitions": {"schedule": 0}}},
            "/kafka/partitions/schedule",
            id="zero-partitions",
        ),
        pytest.param(
            {"scheduler": {"autoscaling": {"metricType": "Object"}}},
            "/scheduler/autoscaling/metricType",
            id="metric-type",
        ),
        pytest.param(
            {"schedulerConfig": {"kind": "Pod"}}, "/schedulerConfig/kind", id="not-a-config"
        ),
        pytest.param({"tracing": {"sampleRatio": 2}}, "/tracing/sampleRatio", id="sample-ratio"),
        pytest.param(
            {"tracing": {"otlpEndpoint": "jaeger:4318"}},
            "/tracing/otlpEndpoint",
            id="endpoint-without-scheme",
        ),
        pytest.param({"replicas": 3}, "'replicas' not allowed", id="unknown-top-level-key"),
        pytest.param(
            {"scheduler": {"replicas": 3}}, "'replicas' not allowed", id="unknown-component-key"
        ),
        pytest.param(
            {"queue": {"autoscaling": {"lagTopic": "bogus"}}},
            "/queue/autoscaling/lagTopic",
            id="unknown-lag-topic",
        ),
        pytest.param(
            {
                "scheduler": {
                    "autoscaling": {"enabled": True, "capToPartitions": False, "minReplicas": 9}
                }
            },
            "minReplicas (9) is above maxReplicas (8)",
            id="min-above-max",
        ),
    ],
)
def test_bad_values_are_refused(values: dict[str, Any], reason: str) -> None:
    with pytest.raises(helm_python.HelmError) as caught:
        render(values)
    assert reason in str(caught.value)
