"""The queue benchmark runs end to end on the session's servers (small, to keep CI quick)."""

from __future__ import annotations

from cli.bench.queue import run_queue_bench


def test_bench_reports_its_figures(redis_url: str, kafka_bootstrap: str) -> None:
    report = run_queue_bench(
        2000,
        tenants=2,
        partitions=2,
        redis_url=redis_url,
        kafka_bootstrap=kafka_bootstrap,
        output=False,
    )
    assert report["mode"] == "queue"
    assert report["store"]["add_to_dispatch_pods_per_s"] > 0
    assert report["service"]["pods"] == 2000
    assert report["service"]["add_to_dispatch_pods_per_s"] > 0
    assert report["wake"]["parked_pods"] == 2000
    assert (
        0
        < report["wake"]["event_to_woken_seconds"]
        <= report["wake"]["event_to_all_redispatched_seconds"]
    )
