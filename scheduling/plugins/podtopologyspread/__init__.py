"""PodTopologySpread: topologySpreadConstraints and the cluster's default constraints."""

from scheduling.plugins.podtopologyspread.common import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    SYSTEM_DEFAULT_CONSTRAINTS,
    Constraint,
    default_selector,
)
from scheduling.plugins.podtopologyspread.critical_paths import (
    CriticalPath,
    CriticalPaths,
)
from scheduling.plugins.podtopologyspread.plugin import (
    PRE_FILTER_KEY,
    PRE_SCORE_KEY,
    PodTopologySpread,
    PodTopologySpreadArgsError,
    new,
)
from scheduling.plugins.podtopologyspread.scoring import (
    score_for_count,
    topology_normalizing_weight,
)

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "PRE_FILTER_KEY",
    "PRE_SCORE_KEY",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "Constraint",
    "CriticalPath",
    "CriticalPaths",
    "PodTopologySpread",
    "PodTopologySpreadArgsError",
    "default_selector",
    "new",
    "score_for_count",
    "topology_normalizing_weight",
]
