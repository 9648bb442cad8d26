"""`berth top`: the quantile arithmetic (table-driven, as Prometheus's histogram_quantile),
counter deltas across a restart, the arguments, and a frame read from real /metrics
endpoints (two services' registries behind HealthServers)."""

from __future__ import annotations

import asyncio
import math

import pytest
from prometheus_client import CollectorRegistry

from cli.main import main
from cli.top import Scrape, Series, TopError, delta, endpoints, frame, quantile, scrape
from shared.observability.health import HealthServer
from shared.observability.metrics import BerthMetrics

INF = math.inf


@pytest.mark.parametrize(
    ("q", "buckets", "expected"),
    [
        pytest.param(0.5, {1.0: 0, 2.0: 10, INF: 10}, 1.5, id="interpolated-in-a-bucket"),
        pytest.param(0.99, {0.1: 50, 0.2: 100, INF: 100}, 0.198, id="p99"),
        pytest.param(0.5, {1.0: 10, INF: 10}, 0.5, id="first-bucket-from-zero"),
        pytest.param(0.99, {1.0: 5, INF: 10}, 1.0, id="in-the-inf-bucket-is-the-last-bound"),
        pytest.param(0.5, {1.0: 0, INF: 0}, None, id="nothing-observed"),
        pytest.param(0.5, {}, None, id="no-buckets"),
    ],
)
def test_quantile(q: float, buckets: dict[float, float], expected: float | None) -> None:
    got = quantile(q, buckets)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected)


def test_a_counter_reset_counts_from_zero() -> None:
    old: Series = {("x_total", ()): 10.0, ("y_total", ()): 3.0}
    new: Series = {("x_total", ()): 15.0, ("y_total", ()): 2.0, ("z_total", ()): 4.0}
    assert delta(new, old) == {("x_total", ()): 5.0, ("y_total", ()): 2.0, ("z_total", ()): 4.0}


@pytest.mark.parametrize(
    ("urls", "interval", "error"),
    [
        pytest.param([], 2.0, "no endpoint", id="none"),
        pytest.param(["queue:9090"], 2.0, "expected http://host:port", id="no-scheme"),
        pytest.param(["http://q:9090"], 0.0, "must be positive", id="interval"),
    ],
)
def test_bad_arguments(urls: list[str], interval: float, error: str) -> None:
    with pytest.raises(TopError, match=error):
        endpoints(urls, interval)


def test_endpoints_get_the_metrics_path() -> None:
    assert endpoints(["http://q:9090", "http://w:9090/metrics/"], 1.0) == [
        "http://q:9090/metrics",
        "http://w:9090/metrics",
    ]


def test_berth_top_without_an_endpoint_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["top", "--once"]) == 2
    assert (
        capsys.readouterr().err.strip() == "berth top: no endpoint: give --url (or $BERTH_TOP_URLS)"
    )


async def test_a_frame_from_two_services(unused_tcp_port: int) -> None:
    binder, queue = BerthMetrics(CollectorRegistry()), BerthMetrics(CollectorRegistry())
    servers = [HealthServer(port=0, host="127.0.0.1", registry=m.registry) for m in (binder, queue)]
    for server in servers:
        await server.start()
    try:
        urls = [f"http://127.0.0.1:{s.port}/metrics" for s in servers]
        dead = f"http://127.0.0.1:{unused_tcp_port}/metrics"
        queue.tenant_pending.labels(tenant="team-a", queue="active").set(7)
        queue.set_pending({"active": 7, "unschedulable": 2})
        first = await scrape([*urls, dead])
        for _ in range(20):
            binder.record_attempt("scheduled", 0.015)
            binder.record_scheduled(1, 0.5)
        binder.record_attempt("conflict", 0.01)
        binder.conflict("reserve")
        queue.set_consumer_lag({"berth.outcomes": 3})
        await asyncio.sleep(0.05)
        second = await scrape([*urls, dead])
    finally:
        for server in servers:
            await server.stop()
    assert set(second.errors) == {dead}
    text = frame(first, second)
    window = second.at - first.at
    assert f"throughput   {20 / window:8.1f} pods bound/s" in text
    # all 20 in the (8 ms, 16 ms] bucket: p50 interpolates to its middle, as Prometheus does
    assert "attempt      p50 12.0ms  p99 15.9ms" in text
    assert "conflicts    reserve" in text
    assert "pending      active 7  backoff 0  gated 0  unschedulable 2" in text
    tenant_line = next(line for line in text.splitlines() if line.startswith("team-a"))
    assert tenant_line.split() == ["team-a", "7", "0", "0", "0", "0"]
    assert f"unreachable  {dead}" in text
    assert "consumer lag" in text


def test_an_empty_window_shows_dashes() -> None:
    empty = Scrape(0.0, {"u": {}})
    text = frame(empty, Scrape(1.0, {"u": {}}))
    assert "attempts     -" in text
    assert "attempt      p50 -  p99 -" in text
