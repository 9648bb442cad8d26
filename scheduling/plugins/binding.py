"""The plugins' rules the binder re-checks at bind time, named in one place: the binder's only
door into scheduling/plugins besides the registry and the plugin names (tests/test_import_walls.py
keeps it so), so what binding depends on in each plugin is read here.

- Coscheduling: a pod's gang, its PodGroup key, how long Permit waits for it.
- DefaultPreemption: whether a preemption is justified (the binder's authoritative check) and
  which nominations a preemptor takes away.
- NodeResourcesFit: a pod's request as the Filter computes it.
"""

from scheduling.plugins.coscheduling import gang_of, group_key, wait_seconds
from scheduling.plugins.defaultpreemption import loses_nomination
from scheduling.plugins.defaultpreemption.justify import preemption_refusal
from scheduling.plugins.noderesources.fit import compute_pod_resource_request

__all__ = [
    "compute_pod_resource_request",
    "gang_of",
    "group_key",
    "loses_nomination",
    "preemption_refusal",
    "wait_seconds",
]
