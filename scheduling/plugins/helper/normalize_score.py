"""Upstream helper.DefaultNormalizeScore, over a whole score column at once."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.interfaces import MAX_NODE_SCORE


def default_normalize_score(
    scores: NDArray[np.int64], *, reverse: bool = False, max_priority: int = MAX_NODE_SCORE
) -> NDArray[np.int64]:
    """Scale scores from [0, max(scores)] to [0, max_priority]; `reverse` flips them.

    As upstream: integer division truncates; when every score is 0 the scores are left as they
    are (all `max_priority` when reversed). Scores are assumed non-negative.
    """
    max_count = int(scores.max(initial=0))
    if max_count == 0:
        if reverse:
            return np.full_like(scores, max_priority)
        return scores.copy()
    scaled = scores * max_priority // max_count
    if reverse:
        return max_priority - scaled
    return scaled
