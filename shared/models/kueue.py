"""Kueue's quota objects (kueue.x-k8s.io/v1beta1), the subset berth admits pods with.

- ResourceFlavor (cluster-scoped): the node labels (and taints) that make a flavor.
- ClusterQueue (cluster-scoped): per resource group, per flavor, per resource a nominalQuota,
  an optional borrowingLimit and lendingLimit; the cohort it shares with; its fair-sharing
  weight; its preemption policy; its flavorFungibility (when to try the next flavor); its
  stopPolicy; the namespaces it serves (namespaceSelector: null selects none, {} all, as in
  Kueue).
- Cohort (cluster-scoped, kueue.x-k8s.io/v1alpha1): a cohort's own quota (resource groups as
  a ClusterQueue's) and its parent cohort.
- LocalQueue (namespaced): a namespace's name for a ClusterQueue. Pods join with the label
  `kueue.x-k8s.io/queue-name`.

Quantities are kept as written (int or string) and turned into berth's integer units (milli-CPU,
bytes, counts) by `quota_value`, which `validation` runs on each one so an invalid quantity is
refused with its path when the object is applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from shared.models.meta import ObjectMeta, cluster_meta
from shared.models.quantity import parse_quantity, resource_value
from shared.models.selectors import LabelSelector
from shared.models.taints import Taint, Toleration

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
"""Pods name their LocalQueue with this label (Kueue's)."""

KUEUE_MANAGED_LABEL = "kueue.x-k8s.io/managed"
"""Kueue's pod integration labels the pods it admits (and keeps the label after admission)."""
KUEUE_PODSET_LABEL = "kueue.x-k8s.io/podset"
"""Kueue's job integrations label the pods of a Job they admitted with its pod set."""
KUEUE_GATES = ("kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology")
"""Kueue's scheduling gates: held until Kueue admits the pod (and assigns its topology)."""


def kueue_mark(labels: Mapping[str, str], gates: Iterable[str]) -> str:
    """The mark showing that Kueue itself admits this pod ("" when none): one of Kueue's
    scheduling gates, or the labels Kueue puts on the pods it manages. Such a pod is Kueue's
    to admit; berth's quota admission leaves it alone (README, "Kueue in the cluster")."""
    for gate in gates:
        if gate in KUEUE_GATES:
            return f"scheduling gate {gate}"
    for label in (KUEUE_MANAGED_LABEL, KUEUE_PODSET_LABEL):
        if label in labels:
            return f"label {label}"
    return ""


PREEMPTION_NEVER = "Never"
PREEMPTION_LOWER_PRIORITY = "LowerPriority"
PREEMPTION_LOWER_OR_NEWER_EQUAL = "LowerOrNewerEqualPriority"
PREEMPTION_ANY = "Any"
WITHIN_CLUSTER_QUEUE_POLICIES = (
    PREEMPTION_NEVER,
    PREEMPTION_LOWER_PRIORITY,
    PREEMPTION_LOWER_OR_NEWER_EQUAL,
)
RECLAIM_POLICIES = (PREEMPTION_NEVER, PREEMPTION_LOWER_PRIORITY, PREEMPTION_ANY)
BORROW_POLICIES = (PREEMPTION_NEVER, PREEMPTION_LOWER_PRIORITY)
QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
BORROW = "Borrow"
PREEMPT = "Preempt"
MAY_STOP_SEARCH = "MayStopSearch"
"""v1beta2's name (Kueue >= 0.13 also in v1beta1) for Borrow and Preempt: stop at this flavor."""
TRY_NEXT_FLAVOR = "TryNextFlavor"
WHEN_CAN_BORROW = (BORROW, MAY_STOP_SEARCH, TRY_NEXT_FLAVOR)
WHEN_CAN_PREEMPT = (PREEMPT, MAY_STOP_SEARCH, TRY_NEXT_FLAVOR)
STOP_NONE = "None"
STOP_HOLD = "Hold"
STOP_HOLD_AND_DRAIN = "HoldAndDrain"
STOP_POLICIES = (STOP_NONE, STOP_HOLD, STOP_HOLD_AND_DRAIN)
USAGE_BASED = "UsageBasedAdmissionFairSharing"
ADMISSION_MODES = (USAGE_BASED, "NoAdmissionFairSharing")


def quota_value(resource: str, quantity: int | str) -> int:
    """A quota quantity in berth's units for `resource` (ValueError when invalid)."""
    return resource_value(resource, parse_quantity(quantity))


@dataclass(slots=True, kw_only=True)
class ResourceFlavorSpec:
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: list[Taint] = field(default_factory=list)
    tolerations: list[Toleration] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class ResourceFlavor:
    metadata: ObjectMeta = field(default_factory=cluster_meta)
    spec: ResourceFlavorSpec = field(default_factory=ResourceFlavorSpec)

    @property
    def key(self) -> str:
        return self.metadata.name


@dataclass(slots=True, kw_only=True)
class ResourceQuota:
    name: str = ""
    nominal_quota: int | str = 0
    borrowing_limit: int | str | None = None
    lending_limit: int | str | None = None


@dataclass(slots=True, kw_only=True)
class FlavorQuotas:
    name: str = ""
    resources: list[ResourceQuota] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class ResourceGroup:
    covered_resources: list[str] = field(default_factory=list)
    flavors: list[FlavorQuotas] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class BorrowWithinCohort:
    policy: str = PREEMPTION_NEVER
    max_priority_threshold: int | None = None


@dataclass(slots=True, kw_only=True)
class ClusterQueuePreemption:
    reclaim_within_cohort: str = PREEMPTION_NEVER
    borrow_within_cohort: BorrowWithinCohort = field(default_factory=BorrowWithinCohort)
    within_cluster_queue: str = PREEMPTION_NEVER


@dataclass(slots=True, kw_only=True)
class FairSharing:
    weight: int | str = 1


@dataclass(slots=True, kw_only=True)
class FlavorFungibility:
    """Kueue's defaults: borrow in a flavor before trying the next; try the next flavor
    before preempting in one."""

    when_can_borrow: str = BORROW
    when_can_preempt: str = TRY_NEXT_FLAVOR


@dataclass(slots=True, kw_only=True)
class AdmissionScope:
    """admissionMode: UsageBasedAdmissionFairSharing orders the queue's workloads by their
    LocalQueue's recent usage (services.queue.quota.admission_fair); NoAdmissionFairSharing does
    not."""

    admission_mode: str = ""


@dataclass(slots=True, kw_only=True)
class ClusterQueueSpec:
    cohort: str = ""
    namespace_selector: LabelSelector | None = None
    resource_groups: list[ResourceGroup] = field(default_factory=list)
    queueing_strategy: str = "BestEffortFIFO"
    preemption: ClusterQueuePreemption = field(default_factory=ClusterQueuePreemption)
    fair_sharing: FairSharing = field(default_factory=FairSharing)
    flavor_fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    admission_scope: AdmissionScope | None = None
    stop_policy: str = STOP_NONE
    """None admits; Hold admits nothing more; HoldAndDrain also evicts what it admitted."""


@dataclass(slots=True, kw_only=True)
class ClusterQueue:
    metadata: ObjectMeta = field(default_factory=cluster_meta)
    spec: ClusterQueueSpec = field(default_factory=ClusterQueueSpec)

    @property
    def key(self) -> str:
        return self.metadata.name


@dataclass(slots=True, kw_only=True)
class CohortSpec:
    parent: str = ""
    """The parent cohort ("" for a root)."""
    resource_groups: list[ResourceGroup] = field(default_factory=list)
    fair_sharing: FairSharing = field(default_factory=FairSharing)


@dataclass(slots=True, kw_only=True)
class Cohort:
    """Kueue's Cohort object: quota of its own, lent to the queues and cohorts
    below it, and a parent, making cohorts a tree (hierarchical cohorts, KEP-79)."""

    metadata: ObjectMeta = field(default_factory=cluster_meta)
    spec: CohortSpec = field(default_factory=CohortSpec)

    @property
    def key(self) -> str:
        return self.metadata.name


@dataclass(slots=True, kw_only=True)
class LocalQueueSpec:
    cluster_queue: str = ""
    fair_sharing: FairSharing = field(default_factory=FairSharing)
    """Its weight under admission fair sharing."""


@dataclass(slots=True, kw_only=True)
class LocalQueue:
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: LocalQueueSpec = field(default_factory=LocalQueueSpec)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"
