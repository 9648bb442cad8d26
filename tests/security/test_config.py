"""The security settings, without servers: what a combination of BERTH_* variables means,
which combinations are refused (and with which words), and what every client gets."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from cli.client import read_settings, write_state
from cli.commands import Args
from cli.servers import start_dev_servers
from shared.messaging.kafka import make_admin, make_consumer, make_producer, make_reader
from shared.runtime.env import StackSettings
from shared.runtime.redisconn import FastConnection, FastSSLConnection, connect
from shared.runtime.security import KafkaSecurity, RedisSecurity, SecurityConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def files(pki: Path) -> dict[str, str]:
    """The test CA and a client certificate (made by openssl, tests/security/tls.py)."""
    return {
        "ca": str(pki / "ca.crt"),
        "cert": str(pki / "client.crt"),
        "key": str(pki / "client.key"),
    }


# ================================================================================= Kafka
KAFKA_OK = [
    pytest.param({}, {}, id="nothing: plaintext"),
    pytest.param({"BERTH_KAFKA_SECURITY_PROTOCOL": "ssl"}, {"security_protocol": "SSL"}, id="ssl"),
    pytest.param(
        {"BERTH_KAFKA_SECURITY_PROTOCOL": "SSL", "BERTH_KAFKA_CA": "{ca}"},
        {"security_protocol": "SSL"},
        id="ssl-ca",
    ),
    pytest.param(
        {
            "BERTH_KAFKA_SECURITY_PROTOCOL": "SSL",
            "BERTH_KAFKA_CERT": "{cert}",
            "BERTH_KAFKA_KEY": "{key}",
        },
        {"security_protocol": "SSL"},
        id="ssl-client-cert",
    ),
    *(
        pytest.param(
            {
                "BERTH_KAFKA_SECURITY_PROTOCOL": protocol,
                "BERTH_KAFKA_SASL_MECHANISM": mechanism.lower(),
                "BERTH_KAFKA_SASL_USERNAME": "berth",
                "BERTH_KAFKA_SASL_PASSWORD": "pw",
            },
            {
                "security_protocol": protocol,
                "sasl_mechanism": mechanism,
                "sasl_plain_username": "berth",
                "sasl_plain_password": "pw",
            },
            id=f"{protocol}-{mechanism}",
        )
        for protocol in ("SASL_SSL", "SASL_PLAINTEXT")
        for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    ),
]


def _fill(env: dict[str, str], files: dict[str, str]) -> dict[str, str]:
    return {name: value.format(**files) for name, value in env.items()}


@pytest.mark.parametrize(("env", "options"), KAFKA_OK)
def test_kafka_settings_that_work(
    env: dict[str, str], options: dict[str, Any], files: dict[str, str]
) -> None:
    security = KafkaSecurity.from_env(_fill(env, files))
    got = security.client_options()
    assert ("ssl_context" in got) == security.tls
    got.pop("ssl_context", None)
    assert got == options
    # The variables come back as they were read (what `berth up` hands its services).
    assert KafkaSecurity.from_env(security.env()) == security


KAFKA_REFUSED = [
    pytest.param(
        {"BERTH_KAFKA_SECURITY_PROTOCOL": "TLS"},
        "BERTH_KAFKA_SECURITY_PROTOCOL=TLS: not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
        id="unknown-protocol",
    ),
    pytest.param(
        {"BERTH_KAFKA_CA": "{ca}"},
        "BERTH_KAFKA_CA set, but BERTH_KAFKA_SECURITY_PROTOCOL=PLAINTEXT does not use TLS "
        "(use SSL or SASL_SSL)",
        id="ca-without-tls",
    ),
    pytest.param(
        {"BERTH_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "BERTH_KAFKA_CERT": "{cert}"},
        "BERTH_KAFKA_CERT set, but BERTH_KAFKA_SECURITY_PROTOCOL=SASL_PLAINTEXT does not use TLS",
        id="cert-with-sasl-plaintext",
    ),
    pytest.param(
        {"BERTH_KAFKA_SASL_MECHANISM": "PLAIN", "BERTH_KAFKA_SASL_USERNAME": "u"},
        "BERTH_KAFKA_SASL_MECHANISM, BERTH_KAFKA_SASL_USERNAME set, but "
        "BERTH_KAFKA_SECURITY_PROTOCOL=PLAINTEXT does not authenticate with SASL",
        id="sasl-without-protocol",
    ),
    pytest.param(
        {"BERTH_KAFKA_SECURITY_PROTOCOL": "SSL", "BERTH_KAFKA_SASL_PASSWORD": "pw"},
        "BERTH_KAFKA_SASL_PASSWORD set, but BERTH_KAFKA_SECURITY_PROTOCOL=SSL does not "
        "authenticate with SASL (use SASL_SSL, or SASL_PLAINTEXT)",
        id="password-with-ssl",
    ),
    pytest.param(
        {"BERTH_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"},
        "BERTH_KAFKA_SECURITY_PROTOCOL=SASL_SSL needs BERTH_KAFKA_SASL_MECHANISM "
        "(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)",
        id="sasl-without-mechanism",
    ),
    pytest.param(
        {
            "BERTH_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "BERTH_KAFKA_SASL_MECHANISM": "GSSAPI",
            "BERTH_KAFKA_SASL_USERNAME": "u",
            "BERTH_KAFKA_SASL_PASSWORD": "p",
        },
        "BERTH_KAFKA_SASL_MECHANISM=GSSAPI: not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
        id="unsupported-mechanism",
    ),
    pytest.param(
        {
            "BERTH_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "BERTH_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "BERTH_KAFKA_SASL_USERNAME": "u",
        },
        "SASL SCRAM-SHA-512 needs BERTH_KAFKA_SASL_PASSWORD",
        id="no-password",
    ),
    pytest.param(
        {"BERTH_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "BERTH_KAFKA_SASL_MECHANISM": "PLAIN"},
        "SASL PLAIN needs BERTH_KAFKA_SASL_USERNAME and BERTH_KAFKA_SASL_PASSWORD",
        id="no-credentials",
    ),
    pytest.param(
        {"BERTH_KAFKA_SECURITY_PROTOCOL": "SSL", "BERTH_KAFKA_KEY": "{key}"},
        "BERTH_KAFKA_KEY needs BERTH_KAFKA_CERT",
        id="key-without-cert",
    ),
    pytest.param(
        {"BERTH_KAFKA_SECURITY_PROTOCOL": "SSL", "BERTH_KAFKA_CA": "/nonexistent/ca.pem"},
        "BERTH_KAFKA_CA=/nonexistent/ca.pem: no such file",
        id="missing-ca-file",
    ),
]


@pytest.mark.parametrize(("env", "message"), KAFKA_REFUSED)
def test_kafka_settings_that_are_refused(
    env: dict[str, str], message: str, files: dict[str, str]
) -> None:
    with pytest.raises(SecurityConfigError) as caught:
        KafkaSecurity.from_env(_fill(env, files))
    assert message in str(caught.value)
    # A service reading its environment refuses it the same way, before connecting.
    full = {"BERTH_REDIS_URL": "redis://r:6379/0", "BERTH_KAFKA_BOOTSTRAP": "k:9092"}
    with pytest.raises(SecurityConfigError, match="BERTH_KAFKA"):
        StackSettings.from_env(full | _fill(env, files))


async def test_every_kafka_client_gets_the_settings(files: dict[str, str]) -> None:
    """Producers, group consumers, readers and admin clients are made with the same TLS
    and SASL options (aiokafka checks them when the client is made; no broker needed)."""
    security = KafkaSecurity.from_env(
        {
            "BERTH_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "BERTH_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "BERTH_KAFKA_SASL_USERNAME": "berth",
            "BERTH_KAFKA_SASL_PASSWORD": "pw",
        }
    )
    clients: list[AIOKafkaProducer | AIOKafkaConsumer | AIOKafkaAdminClient] = [
        make_producer("k:9092", security=security),
        make_consumer("k:9092", ["t"], "g", security=security),
        make_reader("k:9092", security=security),
        make_admin("k:9092", security=security),
    ]
    plain = make_producer("k:9092")
    try:
        for client in clients:
            inner = client.client if isinstance(client, AIOKafkaProducer) else client._client
            assert inner._security_protocol == "SASL_SSL"
            assert inner._sasl_mechanism == "SCRAM-SHA-512"
            assert inner._sasl_plain_username == "berth"
            assert inner._ssl_context is not None
            assert inner._ssl_context.check_hostname
        # Without settings: plaintext, as before.
        assert plain.client._security_protocol == "PLAINTEXT"
    finally:
        for client in [*clients, plain]:
            await (client.close() if isinstance(client, AIOKafkaAdminClient) else client.stop())


def test_passwords_stay_out_of_reprs() -> None:
    kafka = KafkaSecurity("SASL_SSL", "PLAIN", "berth", "hunter2")
    redis = RedisSecurity(password="hunter2")
    settings = StackSettings("redis://r", "k:9092", redis_security=redis, kafka_security=kafka)
    assert "hunter2" not in repr(kafka) + repr(redis) + repr(settings)


# ================================================================================= Redis
REDIS_REFUSED = [
    pytest.param(
        "redis://:pw@r:6379/0",
        {"BERTH_REDIS_CA": "{ca}"},
        "BERTH_REDIS_CA set, but Redis at redis://:***@r:6379/0 is not TLS: use a rediss:// URL",
        id="ca-with-plain-url",
    ),
    pytest.param(
        "rediss://r:6380/0",
        {"BERTH_REDIS_KEY": "{key}"},
        "BERTH_REDIS_KEY needs BERTH_REDIS_CERT",
        id="key-without-cert",
    ),
    pytest.param(
        "rediss://r:6380/0",
        {"BERTH_REDIS_CERT": "/nonexistent/client.pem"},
        "BERTH_REDIS_CERT=/nonexistent/client.pem: no such file",
        id="missing-cert",
    ),
]


@pytest.mark.parametrize(("url", "env", "message"), REDIS_REFUSED)
def test_redis_settings_that_are_refused(
    url: str, env: dict[str, str], message: str, files: dict[str, str]
) -> None:
    security = RedisSecurity.from_env(_fill(env, files))
    with pytest.raises(SecurityConfigError) as caught:
        connect(url, security)
    assert str(caught.value) == message
    full = {"BERTH_REDIS_URL": url, "BERTH_KAFKA_BOOTSTRAP": "k:9092"}
    with pytest.raises(SecurityConfigError):
        StackSettings.from_env(full | _fill(env, files))


def test_redis_connections(files: dict[str, str]) -> None:
    """redis:// keeps the hiredis-packing plain connection; rediss:// gets its TLS twin,
    verifying the server against the CA with the hostname; the URL's own password and
    redis-py query parameters win over the variables."""
    security = RedisSecurity(password="from-env", ca=files["ca"], cert=files["cert"])
    plain = connect("redis://r:6379/0", RedisSecurity(password="from-env"))
    assert plain.connection_pool.connection_class is FastConnection
    assert plain.connection_pool.connection_kwargs["password"] == "from-env"

    tls = connect("rediss://berth@r:6380/2", security, max_connections=7)
    pool = tls.connection_pool
    assert pool.connection_class is FastSSLConnection
    assert pool.max_connections == 7
    kwargs = pool.connection_kwargs
    assert (kwargs["username"], kwargs["password"], kwargs["db"]) == ("berth", "from-env", 2)
    assert kwargs["ssl_ca_certs"] == files["ca"]
    assert kwargs["ssl_certfile"] == files["cert"]
    assert (kwargs["ssl_cert_reqs"], kwargs["ssl_check_hostname"]) == ("required", True)

    url = f"rediss://:in-url@r:6380/0?ssl_ca_certs={files['key']}"
    overridden = connect(url, security).connection_pool.connection_kwargs
    assert (overridden["password"], overridden["ssl_ca_certs"]) == ("in-url", files["key"])

    unix = connect("unix:///tmp/redis.sock")
    assert unix.connection_pool.connection_class.__name__ == "UnixDomainSocketConnection"


def test_the_state_file_carries_the_settings(tmp_path: Path, files: dict[str, str]) -> None:
    """`berth up` hands its services, and `berth get` finds, the same settings."""
    settings = StackSettings(
        "rediss://r:6380/0",
        "k:9093",
        redis_security=RedisSecurity(password="pw", ca=files["ca"]),
        kafka_security=KafkaSecurity("SSL", ca=files["ca"]),
    )
    path = tmp_path / "stack.json"
    write_state(settings, path)
    no_flags = Args(redis_url=None, kafka_bootstrap=None)
    read = read_settings(no_flags, {"BERTH_STATE": str(path)})
    assert (read.redis_security, read.kafka_security) == (
        settings.redis_security,
        settings.kafka_security,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param(
            {"BERTH_REDIS_CA": "{ca}"},
            "need a rediss:// server in BERTH_REDIS_URL: the embedded Redis has no TLS",
            id="redis",
        ),
        pytest.param(
            {"BERTH_KAFKA_SECURITY_PROTOCOL": "SSL"},
            "BERTH_KAFKA_SECURITY_PROTOCOL=SSL needs brokers in BERTH_KAFKA_BOOTSTRAP: the "
            "embedded broker serves PLAINTEXT only",
            id="kafka",
        ),
    ],
)
def test_the_embedded_servers_refuse_tls_they_do_not_have(
    env: dict[str, str], message: str, files: dict[str, str]
) -> None:
    with pytest.raises(SecurityConfigError, match=message):
        start_dev_servers(_fill(env, files), containers=False)


# ======================================================================== one way in
def test_every_client_is_made_by_shared_kafka_or_shared_redisconn() -> None:
    """Outside shared/messaging/kafka.py and shared/runtime/redisconn.py no code constructs an
    aiokafka or redis-py client itself (it would miss the TLS and SASL settings)."""
    constructors = {
        "AIOKafkaProducer",
        "AIOKafkaConsumer",
        "AIOKafkaAdminClient",
        "Redis",
        "StrictRedis",
        "from_url",
        "from_pool",
    }
    allowed = {
        ROOT / "shared" / "messaging" / "kafka.py",
        ROOT / "shared" / "runtime" / "redisconn.py",
    }
    offenders = []
    for folder in ("cli", "scheduling", "services", "shared"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path in allowed or "/tests/" in str(path) or path.name.startswith("test_"):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call):
                    func = node.func
                    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                    if name in constructors:
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert offenders == []
