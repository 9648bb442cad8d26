"""deploy/helm/berth, secured connections: the Redis and Kafka SASL passwords come from
Secrets (secretKeyRef, never a plain value), the TLS CAs and client certificates from Secret
volumes, and the services read exactly the settings the values asked for."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest

from services.scheduler.config import config_from_args
from shared.runtime.env import StackSettings
from shared.runtime.security import KafkaSecurity, RedisSecurity
from tests.deploy.chart import CHART_DIR, COMPONENTS, KUBE_VERSION, Rendered, render

SECURED: dict[str, Any] = {
    "redis": {
        "url": "rediss://berth@redis.data:6380/0",
        "existingSecret": "berth-redis",
        "existingSecretKey": "",  # the URL is redis.url; the Secret holds the password
        "passwordKey": "password",
        "tls": {"existingSecret": "redis-client-tls", "certKey": "tls.crt", "keyKey": "tls.key"},
    },
    "kafka": {
        "bootstrap": "kafka.data:9093",
        "securityProtocol": "SASL_SSL",
        "sasl": {
            "mechanism": "SCRAM-SHA-512",
            "username": "berth",
            "existingSecret": "berth-kafka",
        },
        "tls": {"existingSecret": "kafka-ca"},
    },
}

SECRETS = {("berth-redis", "password"): "redis-pw", ("berth-kafka", "password"): "kafka-pw"}


def _pod_spec(rendered: Rendered, component: str) -> dict[str, Any]:
    spec: dict[str, Any] = rendered.get("Deployment", component).doc["spec"]["template"]["spec"]
    return spec


def _resolved_env(rendered: Rendered, component: str, files: Path) -> dict[str, str]:
    """The container's environment as the kubelet would give it: secretKeyRefs resolved from
    SECRETS, /etc/berth-tls/<server>/<key> files from the Secret volumes (materialised under
    `files`, with the Secret's keys as file names)."""
    volumes = {v["name"]: v for v in _pod_spec(rendered, component)["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in rendered.container(component)["volumeMounts"]}
    env: dict[str, str] = {}
    for name, value in rendered.env(component).items():
        if isinstance(value, str):
            if name == "BERTH_MESSAGE_KEYS":
                # The message keys' Secret, one file per component it holds.
                secret = volumes[mounts[value]]["secret"]
                local = files / secret["secretName"]
                local.mkdir(parents=True, exist_ok=True)
                for item in secret["items"]:
                    (local / item["path"]).write_text(base64.b64encode(os.urandom(32)).decode())
                value = str(local)
            elif value.startswith("/etc/berth-tls/"):
                mount, _, key = value.rpartition("/")
                secret = volumes[mounts[mount]]["secret"]
                assert {"key": key, "path": key} in secret["items"]
                local = files / secret["secretName"] / key
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_text("PEM\n")
                value = str(local)
            env[name] = value
        elif "secretKeyRef" in value:
            ref = value["secretKeyRef"]
            env[name] = SECRETS[(ref["name"], ref["key"])]
    return env


@pytest.mark.parametrize("component", COMPONENTS)
def test_passwords_come_from_secrets_and_tls_files_from_secret_volumes(component: str) -> None:
    rendered = render(SECURED)
    env = rendered.env(component)
    assert env["BERTH_REDIS_PASSWORD"] == {
        "secretKeyRef": {"name": "berth-redis", "key": "password"}
    }
    assert env["BERTH_KAFKA_SASL_PASSWORD"] == {
        "secretKeyRef": {"name": "berth-kafka", "key": "password"}
    }
    assert env["BERTH_REDIS_URL"] == "rediss://berth@redis.data:6380/0"
    assert (env["BERTH_KAFKA_SECURITY_PROTOCOL"], env["BERTH_KAFKA_SASL_MECHANISM"]) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
    )
    assert env["BERTH_KAFKA_SASL_USERNAME"] == "berth"
    assert env["BERTH_REDIS_CA"] == "/etc/berth-tls/redis/ca.crt"
    assert env["BERTH_REDIS_CERT"] == "/etc/berth-tls/redis/tls.crt"
    assert env["BERTH_REDIS_KEY"] == "/etc/berth-tls/redis/tls.key"
    assert env["BERTH_KAFKA_CA"] == "/etc/berth-tls/kafka/ca.crt"
    assert "BERTH_KAFKA_CERT" not in env

    mounts = rendered.container(component)["volumeMounts"]
    assert {"name": "redis-tls", "mountPath": "/etc/berth-tls/redis", "readOnly": True} in mounts
    assert {"name": "kafka-tls", "mountPath": "/etc/berth-tls/kafka", "readOnly": True} in mounts
    volumes = {v["name"]: v for v in _pod_spec(rendered, component)["volumes"]}
    assert volumes["redis-tls"]["secret"] == {
        "secretName": "redis-client-tls",
        "defaultMode": 0o440,
        "items": [
            {"key": "ca.crt", "path": "ca.crt"},
            {"key": "tls.crt", "path": "tls.crt"},
            {"key": "tls.key", "path": "tls.key"},
        ],
    }
    assert volumes["kafka-tls"]["secret"] == {
        "secretName": "kafka-ca",
        "defaultMode": 0o440,
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }
    # No password is ever rendered as a plain value.
    passwords = [e for e in rendered.container(component)["env"] if "PASSWORD" in e["name"]]
    assert len(passwords) == 2
    assert all(set(e) == {"name", "valueFrom"} for e in passwords)


def test_the_services_read_the_settings_the_values_asked_for(tmp_path: Path) -> None:
    rendered = render(SECURED)
    for component in ("queue", "binder"):
        env = _resolved_env(rendered, component, tmp_path)
        settings = StackSettings.from_env(env)
        assert settings.redis_security == RedisSecurity(
            password="redis-pw",
            ca=str(tmp_path / "redis-client-tls" / "ca.crt"),
            cert=str(tmp_path / "redis-client-tls" / "tls.crt"),
            key=str(tmp_path / "redis-client-tls" / "tls.key"),
        )
        assert settings.kafka_security == KafkaSecurity(
            "SASL_SSL",
            "SCRAM-SHA-512",
            "berth",
            "kafka-pw",
            ca=str(tmp_path / "kafka-ca" / "ca.crt"),
            message_keys=str(tmp_path / "berth-message-keys"),
        )
    env = _resolved_env(rendered, "scheduler", tmp_path)
    env.pop("BERTH_CONFIG")  # the KubeSchedulerConfiguration is not under test here
    worker = config_from_args(["--worker-id", "w"], env)
    assert worker.redis_security.password == "redis-pw"
    assert worker.kafka_security.sasl_password == "kafka-pw"


def test_the_defaults_add_no_security_settings() -> None:
    rendered = render()
    for component in COMPONENTS:
        env = rendered.env(component)
        assert not [name for name in env if "PASSWORD" in name or "SECURITY" in name]
        volumes = {v["name"] for v in _pod_spec(rendered, component)["volumes"]}
        kafka = {"message-keys"} if component != "agent" else set()
        assert volumes == {"config", "tmp"} | kafka


def test_the_url_and_the_password_from_one_secret() -> None:
    env = render(
        {"redis": {"existingSecret": "r", "existingSecretKey": "url", "passwordKey": "pw"}}
    ).env("queue")
    assert env["BERTH_REDIS_URL"] == {"secretKeyRef": {"name": "r", "key": "url"}}
    assert env["BERTH_REDIS_PASSWORD"] == {"secretKeyRef": {"name": "r", "key": "pw"}}


@pytest.mark.parametrize(
    "values",
    [
        pytest.param(SECURED, id="sasl-ssl-redis-tls"),
        pytest.param(
            {
                "kafka": {
                    "securityProtocol": "SSL",
                    "tls": {"existingSecret": "k", "certKey": "c", "keyKey": "k"},
                }
            },
            id="kafka-mtls",
        ),
    ],
)
def test_secured_values_lint_and_validate_strictly(values: dict[str, Any]) -> None:
    report = helm_python.lint(CHART_DIR, values, strict=True, kube_version=f"v{KUBE_VERSION}")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
    for manifest in render(values):
        if manifest.kind == "Deployment":
            kubernetes_validate.validate(manifest.doc, KUBE_VERSION, strict=True)


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        pytest.param(
            {"kafka": {"securityProtocol": "TLS"}},
            "/kafka/securityProtocol",
            id="unknown-protocol",
        ),
        pytest.param(
            {"kafka": {"securityProtocol": "SASL_SSL", "sasl": {"mechanism": "GSSAPI"}}},
            "/kafka/sasl/mechanism",
            id="unknown-mechanism",
        ),
        pytest.param(
            {"kafka": {"securityProtocol": "SASL_SSL"}},
            "kafka.securityProtocol=SASL_SSL needs kafka.sasl.mechanism",
            id="sasl-without-mechanism",
        ),
        pytest.param(
            {"kafka": {"securityProtocol": "SASL_PLAINTEXT", "sasl": {"mechanism": "PLAIN"}}},
            "SASL PLAIN needs kafka.sasl.username and kafka.sasl.existingSecret",
            id="sasl-without-credentials",
        ),
        pytest.param(
            {"kafka": {"sasl": {"mechanism": "PLAIN", "username": "u"}}},
            "kafka.sasl set, but kafka.securityProtocol=PLAINTEXT does not authenticate with SASL",
            id="sasl-with-plaintext",
        ),
        pytest.param(
            {
                "kafka": {
                    "securityProtocol": "SASL_PLAINTEXT",
                    "tls": {"existingSecret": "ca"},
                    "sasl": {"mechanism": "PLAIN", "username": "u", "existingSecret": "s"},
                }
            },
            "kafka.tls.existingSecret set, but kafka.securityProtocol=SASL_PLAINTEXT does not "
            "use TLS",
            id="tls-secret-without-tls",
        ),
        pytest.param(
            {"redis": {"tls": {"existingSecret": "ca"}}},
            'redis.tls.existingSecret set, but redis.url "redis://berth-redis:6379/0" is not '
            "TLS: use a rediss:// URL",
            id="redis-tls-with-redis-url",
        ),
        pytest.param(
            {"redis": {"passwordKey": "pw"}},
            "redis.passwordKey needs redis.existingSecret",
            id="password-key-without-secret",
        ),
        pytest.param(
            {"kafka": {"securityProtocol": "SSL", "tls": {"existingSecret": "k", "keyKey": "k"}}},
            "kafka.tls.keyKey needs kafka.tls.certKey",
            id="key-without-cert",
        ),
        pytest.param(
            {"redis": {"tls": {"caKey": "ca/crt"}}}, "/redis/tls/caKey", id="bad-secret-key"
        ),
    ],
)
def test_bad_security_values_are_refused(values: dict[str, Any], reason: str) -> None:
    with pytest.raises(helm_python.HelmError) as caught:
        render(values)
    assert reason in str(caught.value)


def test_each_kafka_component_gets_its_own_sasl_user(tmp_path: Path) -> None:
    """kafka.sasl.users: every component that talks to Kafka logs in as its own principal
    (berth-<component>, password key <component>-password), so the broker's ACLs can give
    each only its topics; the agent, which never talks to Kafka, gets no SASL user."""
    values = {
        **SECURED,
        "kafka": {
            **SECURED["kafka"],
            "sasl": {
                "mechanism": "SCRAM-SHA-512",
                "existingSecret": "berth-kafka",
                "users": {"enabled": True},
            },
        },
    }
    rendered = render(values)
    for component in ("queue", "scheduler", "binder"):
        env = rendered.env(component)
        assert env["BERTH_KAFKA_SASL_USERNAME"] == f"berth-{component}"
        assert env["BERTH_KAFKA_SASL_PASSWORD"] == {
            "secretKeyRef": {"name": "berth-kafka", "key": f"{component}-password"}
        }
        names = [e["name"] for e in rendered.container(component)["env"]]
        assert names.count("BERTH_KAFKA_SASL_USERNAME") == 1  # not also the shared user
    agent = rendered.env("agent")
    assert "BERTH_KAFKA_SASL_USERNAME" not in agent
    assert "BERTH_KAFKA_SASL_PASSWORD" not in agent
    # What the binder's process reads from that environment.
    secrets = {**SECRETS, ("berth-kafka", "binder-password"): "binder-pw"}
    env = {
        name: (
            secrets[(v["secretKeyRef"]["name"], v["secretKeyRef"]["key"])]
            if "secretKeyRef" in v
            else ""
        )
        if isinstance(v, dict)
        else v
        for name, v in rendered.env("binder").items()
        if name.startswith("BERTH_KAFKA_SASL")
    }
    assert (env["BERTH_KAFKA_SASL_USERNAME"], env["BERTH_KAFKA_SASL_PASSWORD"]) == (
        "berth-binder",
        "binder-pw",
    )


@pytest.mark.parametrize(
    ("kafka", "message"),
    [
        (
            {
                "securityProtocol": "SASL_SSL",
                "sasl": {"mechanism": "PLAIN", "users": {"enabled": True}},
            },
            "kafka.sasl.users.enabled needs kafka.sasl.existingSecret",
        ),
        (
            {"securityProtocol": "PLAINTEXT", "sasl": {"users": {"enabled": True}}},
            "kafka.sasl set, but kafka.securityProtocol=PLAINTEXT does not authenticate with SASL",
        ),
    ],
)
def test_kafka_sasl_users_refuse_what_cannot_work(kafka: dict[str, Any], message: str) -> None:
    with pytest.raises(Exception, match=message):
        render({"kafka": kafka})
