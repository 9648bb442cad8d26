"""NodeResourcesFit and NodeResourcesBalancedAllocation (upstream plugins/noderesources).

Two plugins share this package, as upstream: `new` builds NodeResourcesFit and
`new_balanced_allocation` builds NodeResourcesBalancedAllocation.
"""

from scheduling.plugins.noderesources.balanced_allocation import (
    BalancedAllocation,
    BalancedAllocationArgsError,
)
from scheduling.plugins.noderesources.balanced_allocation import (
    new as new_balanced_allocation,
)
from scheduling.plugins.noderesources.fit import (
    TOO_MANY_PODS,
    Fit,
    FitArgsError,
    PodResourceRequest,
    compute_pod_resource_request,
    insufficient_reason,
    new,
)

__all__ = [
    "TOO_MANY_PODS",
    "BalancedAllocation",
    "BalancedAllocationArgsError",
    "Fit",
    "FitArgsError",
    "PodResourceRequest",
    "compute_pod_resource_request",
    "insufficient_reason",
    "new",
    "new_balanced_allocation",
]
