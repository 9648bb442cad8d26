"""Plugin names, as upstream kube-scheduler spells them (pkg/scheduler/framework/plugins/names)."""

from typing import Final

PRIORITY_SORT: Final = "PrioritySort"
SCHEDULING_GATES: Final = "SchedulingGates"
NODE_NAME: Final = "NodeName"
NODE_UNSCHEDULABLE: Final = "NodeUnschedulable"
NODE_PORTS: Final = "NodePorts"
NODE_AFFINITY: Final = "NodeAffinity"
TAINT_TOLERATION: Final = "TaintToleration"
NODE_RESOURCES_FIT: Final = "NodeResourcesFit"
NODE_RESOURCES_BALANCED_ALLOCATION: Final = "NodeResourcesBalancedAllocation"
IMAGE_LOCALITY: Final = "ImageLocality"
INTER_POD_AFFINITY: Final = "InterPodAffinity"
POD_TOPOLOGY_SPREAD: Final = "PodTopologySpread"
DEFAULT_PREEMPTION: Final = "DefaultPreemption"
DEFAULT_BINDER: Final = "DefaultBinder"
COSCHEDULING: Final = "Coscheduling"
