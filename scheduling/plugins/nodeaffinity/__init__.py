"""NodeAffinity: nodeSelector, required and preferred node affinity, and addedAffinity."""

from scheduling.plugins.nodeaffinity.node_affinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_ENFORCED,
    ERR_REASON_POD,
    NodeAffinity,
    NodeAffinityArgsError,
    new,
    required_node_affinity,
)
from scheduling.plugins.nodeaffinity.selector import (
    PreferredTerms,
    RequiredNodeAffinity,
    Selector,
    compile_preferred,
    compile_required,
    compile_selector,
)

__all__ = [
    "ERR_REASON_CONFLICT",
    "ERR_REASON_ENFORCED",
    "ERR_REASON_POD",
    "NodeAffinity",
    "NodeAffinityArgsError",
    "PreferredTerms",
    "RequiredNodeAffinity",
    "Selector",
    "compile_preferred",
    "compile_required",
    "compile_selector",
    "new",
    "required_node_affinity",
]
