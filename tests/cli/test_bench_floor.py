"""The benchmarks' reference: the naive data-parallel cycle (cli/bench/floor.py)."""

from __future__ import annotations

from cli.bench.floor import floor_pods_per_s, with_floor


def test_the_floor_is_a_rate_of_pods() -> None:
    assert floor_pods_per_s(nodes=50, pods=200) > 0


def test_with_floor_adds_the_floor_and_the_ratio() -> None:
    report: dict[str, object] = {"throughput_avg": 5000.0}
    with_floor(report, "throughput_avg", 2000.0)
    assert report == {"throughput_avg": 5000.0, "floor_pods_per_s": 2000.0, "ratio_to_floor": 2.5}


def test_with_floor_leaves_the_ratio_out_without_a_figure() -> None:
    report: dict[str, object] = {"bound": 0}
    with_floor(report, "pods_per_second", 1234.56)
    assert report == {"bound": 0, "floor_pods_per_s": 1234.6}
