"""How `berth simulate` reads one pod's life from its samples: a pod missing between its
eviction and its owner's replacement is not ended; one gone for good is, at the time it was
first missed; a recorded completion ends it at once."""

from __future__ import annotations

import pytest

from cli.simulate import ABSENCE_GRACE_SECONDS, PodLife

PENDING, BOUND, MISSING = False, True, None
GRACE = ABSENCE_GRACE_SECONDS


@pytest.mark.parametrize(
    ("samples", "bound", "ended", "succeeded"),
    [
        # (wall, present?, finished_at); simulated time = wall x 10
        ([(0, PENDING, None), (1, BOUND, None)], 10.0, None, False),
        # Evicted, sampled between the deletion and the replacement, then completes.
        (
            [
                (1, BOUND, None),
                (2, MISSING, None),
                (2.1, PENDING, None),
                (3, BOUND, None),
                (9, MISSING, 85.0),
            ],
            10.0,
            85.0,
            True,
        ),
        # Gone with no end recorded and not back within the grace: ended when first missed.
        ([(1, BOUND, None), (2, MISSING, None), (2 + GRACE, MISSING, None)], 10.0, 20.0, False),
        # Missing for less than the grace: not yet ended.
        ([(1, BOUND, None), (2, MISSING, None), (2 + GRACE / 2, MISSING, None)], 10.0, None, False),
        # Missing twice, each time shorter than the grace: the clock restarts when it is seen.
        (
            [
                (2, MISSING, None),
                (2 + GRACE * 0.9, PENDING, None),
                (2 + GRACE * 1.1, MISSING, None),
                (2 + GRACE * 1.9, MISSING, None),
            ],
            None,
            None,
            False,
        ),
        # A completion is recorded before the deletion: ended at its time, at once.
        ([(1, BOUND, None), (5, MISSING, 48.0)], 10.0, 48.0, True),
        # Once ended, later samples change nothing.
        ([(5, MISSING, 48.0), (6, PENDING, None)], None, 48.0, True),
    ],
)
def test_a_pods_life_from_its_samples(
    samples: list[tuple[float, bool | None, float | None]],
    bound: float | None,
    ended: float | None,
    succeeded: bool,
) -> None:
    life = PodLife("team", arrived=0.0)
    for wall, present, finished_at in samples:
        life.observe(wall * 10, wall, bound=present, finished_at=finished_at)
    assert (life.bound, life.ended, life.succeeded) == (bound, ended, succeeded)
