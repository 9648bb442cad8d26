import numpy as np
import pytest

from scheduling.plugins.helper import default_normalize_score


@pytest.mark.parametrize(
    ("scores", "reverse", "want"),
    [
        pytest.param([2, 11, 4], False, [18, 100, 36], id="scaled-by-max-truncating"),
        pytest.param([0, 1, 2], True, [100, 50, 0], id="reversed"),
        pytest.param([0, 0], False, [0, 0], id="all-zero-kept"),
        pytest.param([0, 0], True, [100, 100], id="all-zero-reversed-is-max"),
        pytest.param([], False, [], id="empty"),
        pytest.param([7], False, [100], id="single"),
    ],
)
def test_default_normalize_score(scores: list[int], reverse: bool, want: list[int]) -> None:
    got = default_normalize_score(np.array(scores, dtype=np.int64), reverse=reverse)
    assert got.dtype == np.int64
    assert got.tolist() == want
