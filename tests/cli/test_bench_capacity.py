"""The capacity model of `berth bench --mode distributed --model` (cli/bench/capacity.py): its
split of each role's CPU into what scales out and what every replica pays, and its projection,
against figures worked out by hand."""

from __future__ import annotations

import math
from typing import Any

import pytest

from cli.bench.capacity import MODEL_RUNS, fit, model_report, model_table

# A pipeline where a worker decides for 0.4 ms and follows for 0.1 ms per pod, a binder binds
# for 0.6 ms and follows for 0.05 ms, the queue spends 0.2 ms, Redis 0.1 ms plus 0.02 ms per
# reader and the broker 0.05 ms plus 0.01 ms per reader (readers: workers + binders).
ONE_ONE = {
    "worker-0": 0.5,
    "binder-0": 0.65,
    "queue-0": 0.2,
    "redis": 0.14,
    "kafka": 0.07,
}
TWO_ONE = {
    "worker-0": 0.3,  # half the deciding, all the following: 0.2 + 0.1
    "worker-1": 0.3,
    "binder-0": 0.65,
    "queue-0": 0.2,
    "redis": 0.16,
    "kafka": 0.08,
}
TWO_TWO = {
    "worker-0": 0.3,
    "worker-1": 0.3,
    "binder-0": 0.35,  # 0.3 + 0.05
    "binder-1": 0.35,
    "queue-0": 0.2,
    "redis": 0.18,
    "kafka": 0.09,
}


def run(
    cpu: dict[str, float], idle: dict[str, float] | None = None, **extra: Any
) -> dict[str, Any]:
    """A bench result with these CPU ms per pod (and idle CPU ms per second)."""
    return {
        "cpu_ms_per_pod": {**cpu, "total": sum(cpu.values())},
        "idle_cpu_ms_per_s": idle or {},
        "cpu_window_seconds": 4.0,
        "bound": 10_000,
        **extra,
    }


RUNS = [run(ONE_ONE), run(TWO_ONE), run(TWO_TWO)]


def test_the_model_recovers_the_costs_it_was_built_from() -> None:
    model = fit(RUNS)
    assert model.worker.scaled == pytest.approx(0.4)
    assert model.worker.per_replica == pytest.approx(0.1)
    assert model.binder.scaled == pytest.approx(0.6)
    assert model.binder.per_replica == pytest.approx(0.05)
    assert model.queue.scaled == pytest.approx(0.2)
    assert model.redis.base == pytest.approx(0.1)
    assert model.redis.per_reader == pytest.approx(0.02)
    assert model.broker.base == pytest.approx(0.05)
    assert model.broker.per_reader == pytest.approx(0.01)


@pytest.mark.parametrize(
    ("workers", "binders", "rate", "bottleneck"),
    [
        # binders: 0.6 / 1 + 0.05 = 0.65 ms per pod on one core
        pytest.param(1, 1, 1000 / 0.65, "binders", id="1w1b"),
        # workers 0.3, binders 0.6 / 2 + 0.05 = 0.35, queue 0.2, redis 0.18, broker 0.09
        pytest.param(2, 2, 1000 / 0.35, "binders", id="2w2b"),
        # workers 0.15, binders 0.2, queue 0.2, redis 0.1 + 12 * 0.02 = 0.34: Redis
        pytest.param(8, 4, 1000 / 0.34, "redis", id="8w4b"),
        # workers 0.4/16 + 0.1 = 0.125, binders 0.6/16 + 0.05 = 0.0875, queue 0.2,
        # redis 0.1 + 32 * 0.02 = 0.74: Redis sets the pace
        pytest.param(16, 16, 1000 / 0.74, "redis", id="16w16b"),
    ],
)
def test_the_projection_names_the_part_that_saturates_first(
    workers: int, binders: int, rate: float, bottleneck: str
) -> None:
    got_rate, got_bottleneck = fit(RUNS).project(workers, binders)
    assert got_rate == pytest.approx(rate)
    assert got_bottleneck == bottleneck


def test_noise_that_makes_a_difference_negative_is_clamped() -> None:
    """A second worker measured cheaper in total than one (noisy cores): no negative cost."""
    cheaper = {**TWO_ONE, "worker-0": 0.2, "worker-1": 0.2}
    model = fit([run(ONE_ONE), run(cheaper), run(TWO_TWO)])
    assert model.worker.per_replica == 0.0
    assert model.worker.scaled == pytest.approx(0.5)
    assert math.isfinite(model.project(8, 4)[0])


def test_the_report_keeps_the_measured_runs_beside_the_model() -> None:
    runs = [
        run(cpu, workers=w, binders=b, pods_per_second=1000.0, conflicts=0)
        for (w, b), cpu in zip(MODEL_RUNS, [ONE_ONE, TWO_ONE, TWO_TWO], strict=True)
    ]
    report = model_report(runs, floor=2000.0)
    assert report["floor_ms_per_pod"] == 0.5
    assert [r["ratio_to_floor"] for r in report["measured"]] == [0.5, 0.5, 0.5]
    assert report["measured"][0]["cpu_floor_units_per_pod"] == round(1.56 / 0.5, 2)
    assert report["worker_follow_floor_units"] == pytest.approx(0.2)
    eight_four = next(p for p in report["projected"] if (p["workers"], p["binders"]) == (8, 4))
    assert eight_four["bottleneck"] == "redis"
    assert eight_four["ratio_to_floor"] == pytest.approx(round(1000 / 0.34 / 2000, 2))
    table = model_table(report)
    assert "  8 workers  4 binders" in table
    assert "redis" in table


def test_the_model_needs_its_three_runs() -> None:
    with pytest.raises(ValueError, match="3 runs"):
        fit(RUNS[:2])


def test_idle_cost_is_a_cost_per_second_not_per_pod() -> None:
    """Each broker reader polls for 25 ms of CPU a second while idle. Measured over a 4 s
    window of 10,000 pods that is 0.01 ms per pod per reader, which the model takes out of the
    per pod figures and charges per second instead."""

    def polling(cpu: dict[str, float], readers: int) -> dict[str, Any]:
        idle = {"kafka": 25.0 * readers, "worker-0": 10.0}
        per_pod = {
            **cpu,
            "kafka": cpu["kafka"] + 25.0 * readers * 4.0 / 10_000,
            "worker-0": cpu["worker-0"] + 10.0 * 4.0 / 10_000,
        }
        return run(per_pod, idle)

    model = fit([polling(ONE_ONE, 2), polling(TWO_ONE, 3), polling(TWO_TWO, 4)])
    assert model.broker.base == pytest.approx(0.05)
    assert model.broker.per_reader == pytest.approx(0.01)
    assert model.broker.idle_base == pytest.approx(0.0)
    assert model.broker.idle_per_reader == pytest.approx(25.0)
    assert model.worker.idle == pytest.approx(10.0)
    # 16 + 16: the broker's core holds 32 * 25 = 800 ms/s of polling; 200 ms/s are left for
    # 0.05 + 32 * 0.01 = 0.37 ms per pod. Redis: 1,000 / 0.74.
    limits = model.limits(16, 16)
    assert limits["broker"] == pytest.approx(200 / 0.37)
    rate, bottleneck = model.project(16, 16)
    assert rate == pytest.approx(200 / 0.37)
    assert bottleneck == "broker"
    # The worker's idle cost leaves 990 ms/s for its pods: 0.4 / 16 + 0.1 ms each.
    assert limits["workers"] == pytest.approx(990 / 0.125)
