"""The Kafka clients over TLS: the broker (Tansu behind a TLS proxy, see tls.py) verified
against BERTH_KAFKA_CA, a client certificate presented; admin, producer, group consumer and
group-less reader all work, and a wrong CA or a missing certificate is one line naming the
brokers and the reason, from the library and from a service process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared.messaging.kafka import (
    Topics,
    assign_all,
    ensure_topics,
    make_consumer,
    make_producer,
    make_reader,
)
from shared.runtime.security import ConnectError, KafkaSecurity
from tests.security.tls import TLSProxy

ROOT = Path(__file__).resolve().parents[2]


def _security(pki: Path, **changes: str) -> KafkaSecurity:
    files = {
        "ca": str(pki / "ca.crt"),
        "cert": str(pki / "client.crt"),
        "key": str(pki / "client.key"),
    }
    return KafkaSecurity("SSL", **(files | changes))


async def test_every_client_works_over_tls(
    kafka_tls: tuple[str, TLSProxy], pki: Path, topics: Topics, group_id: str
) -> None:
    bootstrap, proxy = kafka_tls
    before = proxy.connections
    security = _security(pki)
    await ensure_topics(bootstrap, [topics.schedule], partitions=2, security=security)
    producer = make_producer(bootstrap, security=security)
    await producer.start()
    try:
        for i in range(10):
            await producer.send(topics.schedule, f"m{i}".encode(), key=f"k{i}".encode())
        await producer.flush()
    finally:
        await producer.stop()
    consumer = make_consumer(
        bootstrap,
        [topics.schedule],
        group_id,
        security=security,
        session_timeout_ms=1500,
        heartbeat_interval_ms=300,
    )
    reader = make_reader(bootstrap, security=security)
    await consumer.start()
    await reader.start()
    try:
        got: list[bytes] = []
        while len(got) < 10:
            batches = await consumer.getmany(timeout_ms=5000)
            assert batches, f"only {len(got)} of 10 messages"
            got += [record.value or b"" for records in batches.values() for record in records]
        await consumer.commit()
        assert sorted(got) == sorted(f"m{i}".encode() for i in range(10))
        assigned = await assign_all(reader, [topics.schedule])
        await reader.seek_to_beginning(*assigned)
        read = 0
        while read < 10:
            batches = await reader.getmany(timeout_ms=5000)
            assert batches
            read += sum(len(records) for records in batches.values())
    finally:
        await consumer.stop()
        await reader.stop()
    # Every connection went through the TLS proxy: the broker advertises only its address.
    assert proxy.connections - before >= 4


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        pytest.param(
            {"ca": "other-ca.crt"},
            "CERTIFICATE_VERIFY_FAILED] certificate verify failed",
            id="wrong-ca",
        ),
        pytest.param(
            {"ca": ""}, "(checked against the system's CAs: set BERTH_KAFKA_CA)", id="system-cas"
        ),
        pytest.param(
            {"cert": "", "key": ""},
            "(does it require a client certificate? BERTH_KAFKA_CERT)",
            id="no-client-certificate",
        ),
    ],
)
async def test_a_refused_connection_is_one_line_naming_the_brokers(
    kafka_tls: tuple[str, TLSProxy],
    pki: Path,
    topics: Topics,
    changes: dict[str, str],
    reason: str,
) -> None:
    bootstrap, _ = kafka_tls
    if changes.get("ca"):
        changes = changes | {"ca": str(pki / changes["ca"])}
    with pytest.raises(ConnectError) as caught:
        await ensure_topics(
            bootstrap, [topics.schedule], attempts=2, security=_security(pki, **changes)
        )
    message = str(caught.value)
    assert message.startswith(f"Kafka at {bootstrap} (SSL): ")
    assert reason in message
    assert "\n" not in message


def test_a_service_with_the_wrong_kafka_ca_exits_with_one_line(
    kafka_tls: tuple[str, TLSProxy], pki: Path, redis_url: str, tmp_path: Path
) -> None:
    bootstrap, _ = kafka_tls
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("BERTH_")},
        "BERTH_REDIS_URL": redis_url,  # the session's plain Redis: Kafka is what fails
        "BERTH_KAFKA_BOOTSTRAP": bootstrap,
        "BERTH_KAFKA_SECURITY_PROTOCOL": "SSL",
        "BERTH_KAFKA_CA": str(pki / "other-ca.crt"),
        "BERTH_KEY_PREFIX": f"berth-test:{tmp_path.name}:",
        "BERTH_TOPIC_SUFFIX": tmp_path.name,
    }
    done = subprocess.run(
        [sys.executable, "-m", "services.binder", "--name", "b"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    # JSON lines by default (stderr is not a terminal): the one error line names its logger.
    errors = [
        line
        for line in done.stderr.splitlines()
        if '"level":"ERROR"' in line and '"logger":"shared.runtime.service"' in line
    ]
    assert len(errors) == 1, done.stderr[-3000:]
    assert f"Kafka at {bootstrap} (SSL): " in errors[0]
    assert "CERTIFICATE_VERIFY_FAILED" in errors[0]
