"""shared.observability.health: /metrics, /healthz, /readyz over real HTTP (urllib as the
client)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import urllib.error
import urllib.request
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from shared.observability.health import HealthConfigError, HealthServer
from shared.observability.metrics import BerthMetrics


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


def _fetch(url: str, method: str, headers: dict[str, str]) -> Reply:
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return Reply(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as err:
        with err:
            return Reply(err.code, dict(err.headers), err.read())


async def fetch(
    server: HealthServer, path: str, *, method: str = "GET", headers: dict[str, str] | None = None
) -> Reply:
    url = f"http://127.0.0.1:{server.port}{path}"
    return await asyncio.to_thread(_fetch, url, method, headers or {})


@pytest.fixture
def metrics() -> BerthMetrics:
    return BerthMetrics(CollectorRegistry())


@pytest.fixture
async def server(metrics: BerthMetrics) -> AsyncIterator[HealthServer]:
    async with HealthServer(port=0, host="127.0.0.1", registry=metrics.registry) as running:
        yield running


async def test_readiness_follows_the_service(server: HealthServer) -> None:
    starting = await fetch(server, "/readyz")
    assert (starting.status, starting.body) == (503, b"not ready: starting\n")
    server.set_ready(True)
    ready = await fetch(server, "/readyz")
    assert (ready.status, ready.body) == (200, b"ok\n")
    server.set_ready(False, "draining")
    draining = await fetch(server, "/readyz")
    assert (draining.status, draining.body) == (503, b"not ready: draining\n")


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/healthz?verbose=1"])
async def test_liveness(server: HealthServer, path: str) -> None:
    alive = await fetch(server, path)
    assert (alive.status, alive.body) == (200, b"ok\n")
    server.set_live(False, "redis lost for good")
    dead = await fetch(server, path)
    assert (dead.status, dead.body) == (500, b"not live: redis lost for good\n")


async def test_metrics_are_scraped(server: HealthServer, metrics: BerthMetrics) -> None:
    metrics.set_pending({"active": 5, "gated": 2})
    metrics.record_attempt("scheduled", 0.2)
    reply = await fetch(server, "/metrics")
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("text/plain; version=")
    parsed = {f.name: f for f in text_string_to_metric_families(reply.body.decode())}
    pending = {s.labels["queue"]: s.value for s in parsed["scheduler_pending_pods"].samples}
    assert pending == {"active": 5.0, "backoff": 0.0, "unschedulable": 0.0, "gated": 2.0}
    assert "scheduler_scheduling_attempt_duration_seconds" in parsed


@pytest.mark.parametrize(
    ("headers", "content_type", "gzipped"),
    [
        pytest.param(
            {"Accept": "application/openmetrics-text; version=1.0.0"},
            "application/openmetrics-text",
            False,
            id="openmetrics",
        ),
        pytest.param({"Accept-Encoding": "gzip"}, "text/plain", True, id="gzip"),
    ],
)
async def test_metrics_negotiation(
    server: HealthServer,
    metrics: BerthMetrics,
    headers: dict[str, str],
    content_type: str,
    gzipped: bool,
) -> None:
    metrics.conflict("reserve")
    reply = await fetch(server, "/metrics", headers=headers)
    assert reply.headers["Content-Type"].startswith(content_type)
    assert (reply.headers.get("Content-Encoding") == "gzip") is gzipped
    body = gzip.decompress(reply.body) if gzipped else reply.body
    assert b'berth_conflicts_total{reason="reserve"} 1.0' in body


@pytest.mark.parametrize(
    ("path", "method", "status"),
    [
        pytest.param("/nope", "GET", 404, id="unknown-path"),
        pytest.param("/metrics", "POST", 405, id="post"),
        pytest.param("/readyz", "DELETE", 405, id="delete"),
    ],
)
async def test_refusals(server: HealthServer, path: str, method: str, status: int) -> None:
    reply = await fetch(server, path, method=method)
    assert reply.status == status


async def test_head_has_no_body(server: HealthServer) -> None:
    server.set_ready(True)
    reply = await fetch(server, "/readyz", method="HEAD")
    assert (reply.status, reply.body, reply.headers["Content-Length"]) == (200, b"", "3")


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        pytest.param(b"garbage\r\n\r\n", b"400", id="malformed-line"),
        pytest.param(
            b"GET /healthz HTTP/1.1\r\nno-colon\r\n\r\n",
            b"400",
            id="malformed-header",
        ),
        pytest.param(b"GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n", b"200", id="http-1.0"),
    ],
)
async def test_raw_requests(server: HealthServer, raw: bytes, status: bytes) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(raw)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()
        await writer.wait_closed()
    assert answer.split(b"\r\n", 1)[0].split(b" ")[1] == status


async def test_a_silent_client_does_not_block_others(server: HealthServer) -> None:
    _reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        reply = await fetch(server, "/healthz")  # while the first connection says nothing
        assert reply.status == 200
    finally:
        writer.close()
        await writer.wait_closed()


async def test_stop_closes_the_port(metrics: BerthMetrics) -> None:
    server = HealthServer(port=0, host="127.0.0.1", registry=metrics.registry)
    await server.start()
    port = server.port
    await server.stop()
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", port)


@pytest.mark.parametrize(
    ("env", "enabled", "port", "host"),
    [
        pytest.param({}, False, None, "127.0.0.1", id="unset-is-off"),
        pytest.param({"BERTH_METRICS_PORT": ""}, False, None, "127.0.0.1", id="empty-is-off"),
        pytest.param(
            {"BERTH_METRICS_PORT": "9090"}, True, 9090, "127.0.0.1", id="loopback-by-default"
        ),
        pytest.param(
            {"BERTH_METRICS_PORT": "9090", "BERTH_METRICS_HOST": " "},
            True,
            9090,
            "127.0.0.1",
            id="blank-host-is-loopback",
        ),
        pytest.param(
            {"BERTH_METRICS_PORT": "9090", "BERTH_METRICS_HOST": "0.0.0.0"},
            True,
            9090,
            "0.0.0.0",
            id="every-interface-only-when-asked",
        ),
        pytest.param(
            {"BERTH_METRICS_PORT": "0", "BERTH_METRICS_HOST": "127.0.0.1"},
            True,
            0,
            "127.0.0.1",
            id="any-port-one-host",
        ),
    ],
)
def test_from_env(env: dict[str, str], enabled: bool, port: int | None, host: str | None) -> None:
    server = HealthServer.from_env(env)
    assert server.enabled is enabled
    assert server.host == host
    if port is not None:
        assert server.port == port


@pytest.mark.parametrize("raw", ["http", "-1", "70000"])
def test_from_env_rejects(raw: str) -> None:
    with pytest.raises(HealthConfigError):
        HealthServer.from_env({"BERTH_METRICS_PORT": raw})


async def test_a_disabled_server_starts_nothing() -> None:
    server = HealthServer.from_env({})
    await server.start()
    server.set_ready(True)
    assert server.ready
    await server.stop()
    with pytest.raises(HealthConfigError):
        _ = server.port


async def test_stop_does_not_wait_for_a_silent_client(metrics: BerthMetrics) -> None:
    server = HealthServer(port=0, host="127.0.0.1", registry=metrics.registry)
    await server.start()
    _reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        await asyncio.sleep(0.05)  # the server accepted and waits for a request line
        await asyncio.wait_for(server.stop(), 2)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
