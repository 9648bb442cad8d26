"""The capacity model of `berth bench --mode distributed --model` (cli/bench/capacity.py): its
split of each role's CPU into what scales out and what every replica pays, and its projection,
against figures worked out by hand."""

from __future__ import annotations

import math
from typing import Any

import pytest

from cli.bench.capacity import MODEL_RUNS, fit, median_run, model_report, model_table

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


def _scaled(cpu: dict[str, float], factor: float) -> dict[str, float]:
    return {name: value * factor for name, value in cpu.items()}


def test_repeated_runs_give_each_figure_its_median() -> None:
    """`--repeat 3`: each process's figure is the median of its three, the total too (not
    the sum of the medians), with the runs' ranges beside them."""
    runs = [
        run(_scaled(ONE_ONE, factor), workers=1, binders=1, pods_per_second=rate, conflicts=c)
        for factor, rate, c in ((1.0, 2000.0, 0), (2.0, 900.0, 3), (1.1, 1800.0, 1))
    ]
    runs[2]["cpu_ms_per_pod"]["worker-0"] = 0.4  # the lowest worker figure: not the median
    merged = median_run(runs)
    assert merged["cpu_ms_per_pod"]["worker-0"] == pytest.approx(0.5)
    assert merged["cpu_ms_per_pod"]["binder-0"] == pytest.approx(0.715)
    assert merged["cpu_ms_per_pod"]["total"] == pytest.approx(1.1 * 1.56, abs=1e-3)
    assert (merged["pods_per_second"], merged["conflicts"], merged["bound"]) == (1800.0, 1, 10_000)
    assert merged["runs"] == 3
    assert merged["pods_per_second_range"] == [900.0, 2000.0]
    assert merged["cpu_ms_per_pod_range"] == pytest.approx([1.56, 3.12])


def test_one_slow_run_of_each_shape_does_not_move_the_model() -> None:
    """Three runs of each shape, one of them on a slow spell (every figure doubled, a
    different run for each shape): the medians fit the model of the clean runs, where the
    slow runs alone would double a replica's cost or clamp it to zero."""
    shapes = []
    cpus = (ONE_ONE, TWO_ONE, TWO_TWO)
    for slow, ((w, b), cpu) in enumerate(zip(MODEL_RUNS, cpus, strict=True)):
        figures: dict[str, Any] = {"workers": w, "binders": b, "pods_per_second": 1e3}
        figures["conflicts"] = 0
        shapes.append(
            median_run([run(_scaled(cpu, 2.0 if i == slow else 1.0), **figures) for i in range(3)])
        )
    model = fit(shapes)
    assert model.worker.scaled == pytest.approx(0.4)
    assert model.worker.per_replica == pytest.approx(0.1)
    assert model.binder.per_replica == pytest.approx(0.05)
    assert model.redis.per_reader == pytest.approx(0.02)
    table = model_table(model_report(shapes, floor=2000.0))
    assert "median of 3 runs" in table


def test_repeat_runs_the_shapes_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """`berth bench distributed --model --repeat 2`: 1/1, 2/1, 2/2, 1/1, 2/1, 2/2 (a slow
    spell falls on every shape alike), one median result per shape."""
    from cli.bench import distributed, modes
    from cli.commands import Args

    order: list[tuple[int, int]] = []

    def bench(**options: Any) -> dict[str, Any]:
        shape = (options["workers"], options["binders"])
        order.append(shape)
        cpu = dict(zip(MODEL_RUNS, [ONE_ONE, TWO_ONE, TWO_TWO], strict=True))[shape]
        return run(cpu, workers=shape[0], binders=shape[1], pods_per_second=1000.0, conflicts=0)

    monkeypatch.setattr(distributed, "bench_distributed", bench)
    monkeypatch.setattr(modes, "floor_pods_per_s", lambda: 2000.0)
    args = Args.of(
        {
            "workload": "scheduling-basic",
            "nodes": 10,
            "pods": 10,
            "running": 0,
            "workers": 1,
            "binders": 1,
            "percentage": 100,
            "seed": 0,
            "profile": None,
            "rate": 0.0,
            "duration": 0.0,
            "model": True,
            "repeat": 2,
            "output": "table",
        }
    )
    assert modes.distributed(args) == 0
    assert order == [*MODEL_RUNS, *MODEL_RUNS]
