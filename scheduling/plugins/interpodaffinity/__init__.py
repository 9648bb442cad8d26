"""InterPodAffinity: required and preferred pod affinity and anti-affinity."""

from scheduling.plugins.interpodaffinity.filtering import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
)
from scheduling.plugins.interpodaffinity.plugin import (
    PRE_FILTER_KEY,
    PRE_SCORE_KEY,
    InterPodAffinity,
    InterPodAffinityArgsError,
    new,
)

__all__ = [
    "ERR_REASON_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "PRE_FILTER_KEY",
    "PRE_SCORE_KEY",
    "InterPodAffinity",
    "InterPodAffinityArgsError",
    "new",
]
