"""Kafka topics and client defaults shared by the berth services (aiokafka).

Everything here works on the embedded Tansu broker and on Apache Kafka: no idempotent
producer, no transactions, consumer lag from `highwater` (Tansu's end_offsets is wrong).

Every client (producer, group consumer, group-less reader, admin) is made here, with the
TLS and SASL settings of a `shared.runtime.security.KafkaSecurity` (PLAINTEXT when none is given).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, KafkaError, TopicAlreadyExistsError

from shared.messaging.message_auth import Signer, Verifier, topic_roles

# Topics lives in shared.messaging.topics (no aiokafka there); importing it from here still works.
from shared.messaging.topics import Topics as Topics
from shared.runtime.retry import Backoff
from shared.runtime.security import ENV_KAFKA_CA, ENV_KAFKA_CERT, ConnectError, KafkaSecurity

# aiokafka headers: a list of (name, value) pairs.
Headers = list[tuple[str, bytes]]


DEFAULT_PARTITIONS = 8


async def ensure_topics(
    bootstrap: str,
    topics: Iterable[str] | Mapping[str, int],
    *,
    partitions: int = DEFAULT_PARTITIONS,
    attempts: int = 20,
    security: KafkaSecurity | None = None,
) -> None:
    """Create the topics that do not exist yet (partition count per topic if a mapping).

    The first thing every service does with the broker: a broker it cannot reach (or whose
    certificate or SASL login fails) is a ConnectError naming the bootstrap servers and why."""
    wanted = dict(topics) if isinstance(topics, Mapping) else dict.fromkeys(topics, partitions)
    admin = make_admin(bootstrap, security=security)
    backoff = Backoff(initial=0.1, maximum=0.1, jitter=0.0)  # the broker may be starting
    for attempt in range(attempts):
        try:
            await admin.start()
            break
        except KafkaConnectionError:
            if attempt == attempts - 1:
                await admin.close()
                raise ConnectError(await explain_kafka_failure(bootstrap, security)) from None
            await asyncio.sleep(backoff.next())
        except KafkaError as exc:  # e.g. SaslAuthenticationFailed, UnsupportedSaslMechanism
            await admin.close()
            raise ConnectError(f"Kafka at {bootstrap}: {type(exc).__name__}: {exc}") from None
    try:
        existing = set(await admin.list_topics())
        missing = [
            NewTopic(name=name, num_partitions=count, replication_factor=1)
            for name, count in wanted.items()
            if name not in existing
        ]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):  # another replica won the race
                await admin.create_topics(missing)
    finally:
        await admin.close()


PROBE_SECONDS = 5.0


async def explain_kafka_failure(bootstrap: str, security: KafkaSecurity | None) -> str:
    """Why the first bootstrap server cannot be used: aiokafka only logs the cause of a
    failed bootstrap, so the connection (TLS handshake included, with the same context) and
    one ApiVersions round trip are tried again here to name it."""
    security = security or KafkaSecurity()
    where = f"Kafka at {bootstrap} ({security.protocol})"
    host, _, port_text = bootstrap.split(",")[0].strip().rpartition(":")
    host = host.strip("[]")
    if not host or not port_text.isdigit():
        return f"{where}: not host:port"
    port = int(port_text)
    context = security.ssl_context() if security.tls else None
    client_id = b"berth-probe"
    request = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id  # ApiVersions v0
    try:
        async with asyncio.timeout(PROBE_SECONDS):
            reader, writer = await asyncio.open_connection(
                host, port, ssl=context, server_hostname=host if context else None
            )
            try:
                writer.write(struct.pack(">i", len(request)) + request)
                await writer.drain()
                await reader.readexactly(8)
            finally:
                writer.close()
                with contextlib.suppress(OSError, ssl.SSLError):
                    await writer.wait_closed()
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:  # SSLError: OSError
        reason = str(exc) or type(exc).__name__
        hint = ""
        if isinstance(exc, asyncio.IncompleteReadError):
            reason = "the broker closed the connection"
            if security.tls and not security.cert:
                hint = f" (does it require a client certificate? {ENV_KAFKA_CERT})"
        if "CERTIFICATE_VERIFY_FAILED" in reason:
            hint = (
                f" (the broker's certificate does not verify against {ENV_KAFKA_CA}={security.ca})"
                if security.ca
                else f" (checked against the system's CAs: set {ENV_KAFKA_CA})"
            )
        elif "CERTIFICATE_REQUIRED" in reason:
            hint = f" (the broker requires a client certificate: {ENV_KAFKA_CERT})"
        return f"{where}: {reason}{hint}"
    return f"{where}: the broker answers, but the client's requests failed (see its log)"


def make_admin(bootstrap: str, *, security: KafkaSecurity | None = None) -> AIOKafkaAdminClient:
    """An admin client (call `await admin.start()`)."""
    options = (security or KafkaSecurity()).client_options()
    return AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000, **options)


class SigningProducer(AIOKafkaProducer):  # type: ignore[misc]
    """A producer whose every message carries its sender's authenticator
    (shared.messaging.message_auth); send_and_wait goes through send."""

    def __init__(self, signer: Signer, **options: Any) -> None:
        super().__init__(**options)
        self._signer = signer

    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
    ) -> Any:
        signed = [*(headers or ()), self._signer.header(topic, key, value or b"")]
        return await super().send(
            topic,
            value=value,
            key=key,
            partition=partition,
            timestamp_ms=timestamp_ms,
            headers=signed,
        )


def message_signer(security: KafkaSecurity | None, sender: str, topics: Topics) -> Signer | None:
    """The authenticator of `sender`'s messages, when message keys are configured."""
    keys = security.keys() if security is not None else None
    return None if keys is None else Signer(keys, sender, topic_roles(topics))


def message_verifier(security: KafkaSecurity | None, topics: Topics) -> Verifier | None:
    """The check of received messages' authenticators, when message keys are configured."""
    keys = security.keys() if security is not None else None
    return None if keys is None else Verifier(keys, topic_roles(topics))


def refusal(verifier: Verifier | None, record: Any) -> str:
    """Why a consumed record is not accepted ("" when it is, or when nothing is checked)."""
    if verifier is None:
        return ""
    return verifier.refusal(record.topic, record.key, record.value, record.headers)


def make_producer(
    bootstrap: str,
    *,
    security: KafkaSecurity | None = None,
    signer: Signer | None = None,
    **overrides: Any,
) -> AIOKafkaProducer:
    """A producer tuned for batched publishing (call `await producer.start()`); with a
    `signer`, every message it sends carries the sender's authenticator."""
    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "acks": "all",
        "linger_ms": 2,
        "max_batch_size": 512 * 1024,
        "max_request_size": 8 * 1024 * 1024,
        "request_timeout_ms": 15_000,
        **(security or KafkaSecurity()).client_options(),
    }
    options.update(overrides)
    if signer is not None:
        return SigningProducer(signer, **options)
    return AIOKafkaProducer(**options)


def make_consumer(
    bootstrap: str,
    topics: Sequence[str],
    group_id: str,
    *,
    security: KafkaSecurity | None = None,
    **overrides: Any,
) -> AIOKafkaConsumer:
    """A group consumer with manual commits (commit after processing: at-least-once)."""
    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": group_id,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "max_poll_records": 5000,
        "fetch_max_bytes": 64 * 1024 * 1024,
        "max_partition_fetch_bytes": 16 * 1024 * 1024,
        "session_timeout_ms": 10_000,
        "heartbeat_interval_ms": 1_000,
        **(security or KafkaSecurity()).client_options(),
    }
    options.update(overrides)
    return AIOKafkaConsumer(*topics, **options)


def make_reader(
    bootstrap: str, *, security: KafkaSecurity | None = None, **overrides: Any
) -> AIOKafkaConsumer:
    """A consumer outside any group (`assign_all` its partitions, then seek), with
    aiokafka's defaults but for `overrides`."""
    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": None,
        "enable_auto_commit": False,
        **(security or KafkaSecurity()).client_options(),
    }
    options.update(overrides)
    return AIOKafkaConsumer(**options)


async def consumer_lag(consumer: AIOKafkaConsumer) -> int:
    """Messages not yet consumed over the assigned partitions (from highwater marks)."""
    total = 0
    for tp in consumer.assignment():
        highwater = consumer.highwater(tp)
        if highwater is None:
            continue
        total += max(0, highwater - await consumer.position(tp))
    return total


async def assign_all(
    consumer: AIOKafkaConsumer, topics: Sequence[str], *, attempts: int = 100
) -> list[TopicPartition]:
    """Assign (no group) every partition of `topics` to a started consumer, waiting for their
    metadata; returns them (seek afterwards: to the beginning, or to the end)."""
    assigned: list[TopicPartition] = []
    for topic in topics:
        partitions = consumer.partitions_for_topic(topic)
        for _ in range(attempts):
            if partitions:
                break
            await consumer.topics()  # refreshes the cluster metadata
            partitions = consumer.partitions_for_topic(topic)
            if not partitions:
                await asyncio.sleep(0.05)
        assigned += [TopicPartition(topic, p) for p in sorted(partitions or ())]
    consumer.assign(assigned)
    return assigned


FETCH_MAX_WAIT_MS = 20
"""How long a fetch may wait at the broker for records. The embedded broker answers a fetch
only when this runs out, not when a record arrives: at the client's default (500 ms) a
proposal waited ~130 ms (p50) before the binder saw it; at 20 ms, ~4 ms, for ~50 idle
fetches a second."""
