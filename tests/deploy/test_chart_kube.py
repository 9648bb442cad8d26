"""The chart in Kubernetes mode: the adapter Deployment, RBAC with exactly the calls berth
makes, and the API token only where the API is called."""

from __future__ import annotations

from typing import Any

import helm_python
import kubernetes_validate
import pytest

from shared.kube.client import ADAPTER_CALLS, API_CALLS, BINDER_CALLS, DASHBOARD_CALLS
from shared.runtime.env import IN_CLUSTER, StackSettings
from tests.deploy.chart import CHART_DIR, KUBE_VERSION, NAMESPACE, Rendered, render

KUBE_MODE: dict[str, Any] = {
    "kubernetes": {"enabled": True},
    "schedulerConfig": {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "berth"}],
    },
}


def granted(rendered: Rendered, account: str | None = None) -> set[tuple[str, str, str]]:
    """What the roles grant (bound to `account` only, when given)."""
    bound: set[str] = set()
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for binding in rendered.kinds(kind):
            if account is None or any(s["name"] == account for s in binding.doc["subjects"]):
                bound.add(binding.doc["roleRef"]["name"])
    out: set[tuple[str, str, str]] = set()
    for kind in ("ClusterRole", "Role"):
        for manifest in rendered.kinds(kind):
            if manifest.name not in bound:
                continue
            for rule in manifest.doc["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        out.update((group, resource, verb) for verb in rule["verbs"])
    return out


def test_standalone_renders_no_adapter_and_no_rbac() -> None:
    rendered = render()
    assert rendered.find("Deployment", "adapter") is None
    assert not rendered.kinds("ClusterRole")
    assert not rendered.kinds("Role")
    assert "BERTH_KUBE" not in rendered.env("binder")


def test_kubernetes_mode_lints_and_validates_strictly() -> None:
    report = helm_python.lint(CHART_DIR, KUBE_MODE, strict=True, kube_version=f"v{KUBE_VERSION}")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
    rendered = render(KUBE_MODE)
    kinds = []
    for manifest in rendered:
        kubernetes_validate.validate(manifest.doc, KUBE_VERSION, strict=True)
        kinds.append(manifest.kind)
    assert kinds.count("Deployment") == 4
    assert {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} <= set(kinds)


def test_rbac_grants_each_component_exactly_the_calls_it_makes() -> None:
    rendered = render(KUBE_MODE | {"dashboard": {"enabled": True}})
    assert granted(rendered) == set(API_CALLS)
    assert granted(rendered, "berth-dashboard") == set(DASHBOARD_CALLS)
    assert rendered.env("dashboard")["BERTH_KUBE"] == IN_CLUSTER
    assert granted(render(KUBE_MODE)) == set(ADAPTER_CALLS | BINDER_CALLS)
    assert granted(rendered, "berth-adapter") == set(ADAPTER_CALLS)
    assert granted(rendered, "berth-binder") == set(BINDER_CALLS)
    for component in ("queue", "scheduler"):
        assert granted(rendered, f"berth-{component}") == set()
    accounts = {m.name for m in rendered.kinds("ServiceAccount")}
    everyone = ("queue", "scheduler", "binder", "adapter", "dashboard")
    assert accounts == {f"berth-{c}" for c in everyone}
    for component in everyone:
        pod_spec = rendered.get("Deployment", component).doc["spec"]["template"]["spec"]
        assert pod_spec["serviceAccountName"] == f"berth-{component}"
    lease_rules = rendered.get("Role").doc["rules"]
    named = [r for r in lease_rules if "resourceNames" in r]
    assert named == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["berth"],
            "verbs": ["get", "update"],
        }
    ]
    lease_binding = rendered.get("RoleBinding").doc
    assert lease_binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "berth-adapter", "namespace": NAMESPACE}
    ]


def test_a_default_scheduler_profile_fails_the_render_unless_opted_in() -> None:
    configs: list[dict[str, Any]] = [
        {"profiles": [{"schedulerName": "default-scheduler"}]},
        {"profiles": [{}]},  # a lone unnamed profile is default-scheduler
        {"profiles": [{"schedulerName": "berth"}, {"schedulerName": "default-scheduler"}]},
        {},  # no profiles: upstream's default one
    ]
    for config in configs:
        values = {
            "kubernetes": {"enabled": True},
            "schedulerConfig": {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                **config,
            },
        }
        with pytest.raises(helm_python.HelmError) as caught:
            render(values)
        assert 'kubernetes.enabled with a profile named "default-scheduler"' in str(caught.value)
        assert "kubernetes.takeOverDefaultScheduler=true" in str(caught.value)
        opted = values | {"kubernetes": {"enabled": True, "takeOverDefaultScheduler": True}}
        assert render(opted).env("adapter")["BERTH_KUBE_TAKE_DEFAULT_SCHEDULER"] == "1"
    # Standalone mode keeps upstream's default profile.
    assert "BERTH_KUBE_TAKE_DEFAULT_SCHEDULER" not in render().env("binder")


def test_an_optional_flow_schema_for_the_api_callers() -> None:
    assert render(KUBE_MODE).kinds("FlowSchema") == []
    values = KUBE_MODE | {"kubernetes": {"enabled": True, "flowSchema": {"enabled": True}}}
    rendered = render(values)
    flow = rendered.get("FlowSchema").doc
    kubernetes_validate.validate(flow, KUBE_VERSION, strict=True)
    assert flow["spec"]["priorityLevelConfiguration"] == {"name": "workload-high"}
    subjects = flow["spec"]["rules"][0]["subjects"]
    assert [s["serviceAccount"]["name"] for s in subjects] == ["berth-adapter", "berth-binder"]


def test_the_image_can_be_pinned_by_digest() -> None:
    digest = "sha256:" + "ab" * 32
    rendered = render({"image": {"repository": "ghcr.io/acme/berth", "digest": digest}})
    assert rendered.container("queue")["image"] == f"ghcr.io/acme/berth:0.1.0@{digest}"
    with pytest.raises(helm_python.HelmError):
        render({"image": {"digest": "latest"}})


def test_the_adapter_and_binder_read_kubernetes_mode_from_the_rendered_env() -> None:
    rendered = render(KUBE_MODE)
    command = rendered.container("adapter")["command"]
    assert command == ["python", "-m", "services.adapter", "--name", "$(POD_NAME)"]
    deployment = rendered.get("Deployment", "adapter").doc
    assert deployment["spec"]["replicas"] == 2  # one leads, one stands by
    for component in ("adapter", "binder"):
        env = {k: v for k, v in rendered.env(component).items() if isinstance(v, str)}
        # Mounted from a Secret (tests/deploy/test_chart_message_keys.py), not here.
        assert env.pop("BERTH_MESSAGE_KEYS") == "/etc/berth-message-keys"
        settings = StackSettings.from_env(env)
        assert settings.kube == IN_CLUSTER
        pod_spec = rendered.get("Deployment", component).doc["spec"]["template"]["spec"]
        assert pod_spec["automountServiceAccountToken"] is True
    adapter_env = rendered.env("adapter")
    assert adapter_env["BERTH_KUBE_LEASE_NAMESPACE"] == NAMESPACE
    assert adapter_env["BERTH_KUBE_LEASE_NAME"] == "berth"
    # The queue and the workers never call the API: no token, no BERTH_KUBE.
    for component in ("queue", "scheduler"):
        assert "BERTH_KUBE" not in rendered.env(component)
        pod_spec = rendered.get("Deployment", component).doc["spec"]["template"]["spec"]
        assert pod_spec["automountServiceAccountToken"] is False
    assert "schedulerName: berth" in rendered.config_yaml()


def test_the_lease_can_live_elsewhere() -> None:
    rendered = render(
        KUBE_MODE | {"kubernetes": {"enabled": True, "leaseNamespace": "kube-system"}}
    )
    assert rendered.get("Role").doc["metadata"]["namespace"] == "kube-system"
    assert rendered.env("adapter")["BERTH_KUBE_LEASE_NAMESPACE"] == "kube-system"


def test_the_dashboard_deployment_and_its_front_door_tokens() -> None:
    """dashboard.enabled: a Deployment listening on the pod's IP, a Service with its port,
    and with tokensSecret the tokens file mounted read-only where the service reads it."""
    assert render().find("Deployment", "dashboard") is None
    values = {"dashboard": {"enabled": True, "tokensSecret": "berth-tokens"}}
    report = helm_python.lint(CHART_DIR, values, strict=True, kube_version=f"v{KUBE_VERSION}")
    assert report["errors"] == []
    rendered = render(values)
    for manifest in rendered:
        kubernetes_validate.validate(manifest.doc, KUBE_VERSION, strict=True)
    container = rendered.container("dashboard")
    assert container["command"] == ["python", "-m", "services.dashboard", "--name", "$(POD_NAME)"]
    assert {"name": "http", "containerPort": 8280, "protocol": "TCP"} in container["ports"]
    env = rendered.env("dashboard")
    assert env["BERTH_DASHBOARD_PORT"] == "8280"
    assert env["BERTH_DASHBOARD_HOST"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["BERTH_TOKENS_FILE"] == "/etc/berth-tokens/tokens.yaml"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "tokens")
    assert (mount["mountPath"], mount["readOnly"]) == ("/etc/berth-tokens", True)
    pod_spec = rendered.get("Deployment", "dashboard").doc["spec"]["template"]["spec"]
    volume = next(v for v in pod_spec["volumes"] if v["name"] == "tokens")
    assert volume["secret"]["secretName"] == "berth-tokens"
    ports = rendered.get("Service", "dashboard").doc["spec"]["ports"]
    assert {"name": "http", "port": 8280, "targetPort": "http", "protocol": "TCP"} in ports
    # The service reads what the chart renders.
    from services.dashboard.config import DashboardConfig

    plain = {k: v for k, v in env.items() if isinstance(v, str)}
    config = DashboardConfig.from_env({**plain, "BERTH_DASHBOARD_HOST": "10.0.0.7"})
    assert (config.host, config.port) == ("10.0.0.7", 8280)


def test_a_password_in_the_redis_url_is_refused() -> None:
    """Passwords come from Secrets only: a URL with one would be in four Deployments' env
    and in NOTES."""
    for url in ("redis://:hunter2@redis:6379/0", "rediss://berth:hunter2@redis:6380/0"):
        with pytest.raises(helm_python.HelmError) as caught:
            render({"redis": {"url": url}})
        assert "redis.url carries a password" in str(caught.value)
        assert "hunter2" not in str(caught.value)
    rendered = render(
        {
            "redis": {
                "url": "rediss://berth@redis:6380/0",
                "existingSecret": "redis-auth",
                "existingSecretKey": "",
                "passwordKey": "password",
            }
        }
    )
    assert rendered.env("queue")["BERTH_REDIS_URL"] == "rediss://berth@redis:6380/0"
    assert rendered.env("queue")["BERTH_REDIS_PASSWORD"] == {
        "secretKeyRef": {"name": "redis-auth", "key": "password"}
    }


def test_network_policies_let_only_berths_pods_in() -> None:
    values = KUBE_MODE | {
        "dashboard": {"enabled": True},
        "networkPolicy": {
            "redis": {"podSelector": {"app.kubernetes.io/name": "redis"}},
            "kafka": {"podSelector": {"app": "kafka"}, "port": 9093},
            "dashboardFrom": [{"namespaceSelector": {"matchLabels": {"name": "ingress"}}}],
        },
    }
    rendered = render(values)
    policies = {m.name: m.doc for m in rendered.kinds("NetworkPolicy")}
    assert set(policies) == {"berth-dashboard", "berth-redis", "berth-kafka"}
    berth_pods = {"app.kubernetes.io/name": "berth", "app.kubernetes.io/instance": "berth"}
    for policy in policies.values():
        kubernetes_validate.validate(policy, KUBE_VERSION, strict=True)
        (first, *_) = policy["spec"]["ingress"]
        assert first["from"][0] == {"podSelector": {"matchLabels": berth_pods}}
    assert policies["berth-kafka"]["spec"]["podSelector"] == {"matchLabels": {"app": "kafka"}}
    assert policies["berth-kafka"]["spec"]["ingress"][0]["ports"] == [
        {"port": 9093, "protocol": "TCP"}
    ]
    dashboard_from = policies["berth-dashboard"]["spec"]["ingress"][0]["from"]
    assert dashboard_from[1] == {"namespaceSelector": {"matchLabels": {"name": "ingress"}}}
    # Without selectors for Redis and Kafka (they run elsewhere) only the dashboard's.
    assert [m.name for m in render(KUBE_MODE).kinds("NetworkPolicy")] == []
    assert (
        render({"networkPolicy": {"enabled": False}, "dashboard": {"enabled": True}}).kinds(
            "NetworkPolicy"
        )
        == []
    )


def test_each_component_is_its_own_redis_user() -> None:
    values = KUBE_MODE | {
        "dashboard": {"enabled": True},
        "redis": {
            "existingSecret": "redis-users",
            "existingSecretKey": "",
            "users": {"enabled": True},
        },
    }
    rendered = render(values)
    for component in ("queue", "scheduler", "binder", "adapter", "dashboard"):
        env = rendered.env(component)
        assert env["BERTH_REDIS_USERNAME"] == f"berth-{component}"
        assert env["BERTH_REDIS_PASSWORD"] == {
            "secretKeyRef": {"name": "redis-users", "key": f"{component}-password"}
        }
        assert env["BERTH_REDIS_URL"] == "redis://berth-redis:6379/0"
    with pytest.raises(helm_python.HelmError) as caught:
        render({"redis": {"users": {"enabled": True}}})
    assert "redis.users.enabled needs redis.existingSecret" in str(caught.value)


def test_kueue_mode_reaches_the_queue_and_nothing_else() -> None:
    """kueue.mode (berth by default, or kueue: Kueue runs in the cluster and admits) is the
    queue's BERTH_KUEUE_MODE, which its --kueue-mode flag defaults to; anything else fails
    the render."""
    assert render(KUEUE_MODE_VALUES["berth"]).env("queue")["BERTH_KUEUE_MODE"] == "berth"
    rendered = render(KUEUE_MODE_VALUES["kueue"])
    assert rendered.env("queue")["BERTH_KUEUE_MODE"] == "kueue"
    for component in ("scheduler", "binder", "adapter"):
        assert "BERTH_KUEUE_MODE" not in rendered.env(component)
    with pytest.raises(helm_python.HelmError):
        render({**KUBE_MODE, "kueue": {"mode": "both"}})


def test_the_adapter_may_list_and_watch_kueues_objects() -> None:
    adapter = granted(render(KUBE_MODE), "berth-adapter")
    for plural in ("resourceflavors", "clusterqueues", "localqueues", "cohorts"):
        assert {("kueue.x-k8s.io", plural, "list"), ("kueue.x-k8s.io", plural, "watch")} <= adapter


KUEUE_MODE_VALUES: dict[str, dict[str, Any]] = {
    "berth": KUBE_MODE,
    "kueue": {**KUBE_MODE, "kueue": {"mode": "kueue"}},
}
