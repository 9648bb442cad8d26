"""KWOK stage annotations: Go durations, delay and jitter-delay, which stage fires first."""

from __future__ import annotations

import random

import pytest

from shared.lifecycle.kwok import (
    COMPLETE,
    DELETE,
    StageDelay,
    StageError,
    parse_duration,
    plan,
    stage_delay,
)

C = "pod-complete.stage.kwok.x-k8s.io/"
D = "pod-delete.stage.kwok.x-k8s.io/"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("30s", 30.0),
        ("1m30s", 90.0),
        ("1h", 3600.0),
        ("1.5s", 1.5),
        ("500ms", 0.5),
        ("2h45m", 9900.0),
        ("+10s", 10.0),
        (".5s", 0.5),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "-1s", "1d", "s", "1s2", "ten seconds", "1m 30s"])
def test_not_durations(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, None),
        ({C + "delay": "10s"}, StageDelay(10.0, 10.0)),
        ({C + "delay": "10s", C + "jitter-delay": "20s"}, StageDelay(10.0, 20.0)),
        # A jitter below the delay is ignored (the latest delay cannot be before the delay).
        ({C + "delay": "10s", C + "jitter-delay": "5s"}, StageDelay(10.0, 10.0)),
        # jitter-delay alone is no stage (KWOK: the delay annotation decides).
        ({C + "jitter-delay": "5s"}, None),
        ({D + "delay": "1s"}, None),  # another stage's annotation
    ],
)
def test_stage_delay(annotations: dict[str, str], expected: StageDelay | None) -> None:
    assert stage_delay(annotations, COMPLETE, "default/p") == expected


def test_a_bad_annotation_names_pod_and_annotation() -> None:
    with pytest.raises(StageError) as info:
        stage_delay({C + "delay": "soon"}, COMPLETE, "team-a/job-1")
    assert str(info.value).startswith(
        "pod team-a/job-1: metadata.annotations['pod-complete.stage.kwok.x-k8s.io/delay']:"
    )


def test_jitter_draws_within_delay_and_jitter() -> None:
    rng = random.Random(7)
    delay = StageDelay(10.0, 20.0)
    draws = [delay.draw(rng) for _ in range(500)]
    assert all(10.0 <= d <= 20.0 for d in draws)
    assert max(draws) - min(draws) > 8.0  # spread over the range, not one value


@pytest.mark.parametrize(
    ("annotations", "action", "after"),
    [
        ({}, None, None),
        ({C + "delay": "5s"}, COMPLETE, 5.0),
        ({D + "delay": "3s"}, DELETE, 3.0),
        ({C + "delay": "5s", D + "delay": "3s"}, DELETE, 3.0),
        ({C + "delay": "3s", D + "delay": "5s"}, COMPLETE, 3.0),
        ({C + "delay": "3s", D + "delay": "3s"}, COMPLETE, 3.0),
    ],
)
def test_plan(annotations: dict[str, str], action: str | None, after: float | None) -> None:
    got = plan(annotations, "default/p", random.Random(0))
    assert (None if got is None else (got.action, got.after)) == (
        None if action is None else (action, after)
    )
