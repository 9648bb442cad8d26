"""Cluster events and queueing hints: which event may help a pod that a plugin rejected.

Mirrors upstream `framework.ClusterEvent` (a resource and an ActionType bit set) and the
plugins' `EventsToRegister`. berth has no per-pod QueueingHintFn, so every
registered event answers "Queue"; the tables use the event sets upstream registers when
queueing hints are enabled (no preCheck, hence no extra UpdateNodeTaint/Label registrations).

A parked pod moves when the event's plugin set meets its failed plugins, or when it has no
failed plugins at all (upstream podMatchesEvent). Wildcard events (UnschedulableTimeout) match
every plugin.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from shared.models import Node, Pod
from shared.models.resources import pod_requests


class ActionType(enum.IntFlag):
    """upstream framework.ActionType."""

    ADD = 1 << 0
    DELETE = 1 << 1
    UPDATE_NODE_ALLOCATABLE = 1 << 2
    UPDATE_NODE_LABEL = 1 << 3
    UPDATE_NODE_TAINT = 1 << 4
    UPDATE_NODE_CONDITION = 1 << 5
    UPDATE_NODE_ANNOTATION = 1 << 6
    UPDATE_POD_LABEL = 1 << 7
    UPDATE_POD_SCALE_DOWN = 1 << 8
    UPDATE_POD_TOLERATION = 1 << 9
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1 << 10
    UPDATE_POD_OTHER = 1 << 11
    NONE = 0
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE
        | UPDATE_NODE_LABEL
        | UPDATE_NODE_TAINT
        | UPDATE_NODE_CONDITION
        | UPDATE_NODE_ANNOTATION
        | UPDATE_POD_LABEL
        | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATION
        | UPDATE_POD_SCHEDULING_GATES_ELIMINATED
        | UPDATE_POD_OTHER
    )
    ALL = (1 << 12) - 1


class Resource(enum.StrEnum):
    POD = "Pod"
    NODE = "Node"
    POD_GROUP = "PodGroup"
    WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: Resource
    action: ActionType
    label: str
    """The metrics label (PodAdd, NodeAdd, AssignedPodAdd, ...)."""

    def matches(self, registered: ClusterEvent) -> bool:
        """upstream ClusterEvent.Match: same resource (or a wildcard) and a shared bit."""
        if self.resource is Resource.WILDCARD or registered.resource is Resource.WILDCARD:
            return bool(self.action & registered.action)
        return self.resource == registered.resource and bool(self.action & registered.action)

    @property
    def is_wildcard(self) -> bool:
        return self.resource is Resource.WILDCARD and self.action == ActionType.ALL


def _event(resource: Resource, action: ActionType, label: str) -> ClusterEvent:
    return ClusterEvent(resource, action, label)


# The queue's event labels (upstream framework/events.go) and the ones berth's event
# handlers raise.
NODE_ADD = _event(Resource.NODE, ActionType.ADD, "NodeAdd")
NODE_DELETE = _event(Resource.NODE, ActionType.DELETE, "NodeDelete")
ASSIGNED_POD_ADD = _event(Resource.POD, ActionType.ADD, "AssignedPodAdd")
ASSIGNED_POD_UPDATE = _event(Resource.POD, ActionType.UPDATE, "AssignedPodUpdate")
ASSIGNED_POD_DELETE = _event(Resource.POD, ActionType.DELETE, "AssignedPodDelete")
POD_GROUP_ADD = _event(Resource.POD_GROUP, ActionType.ADD, "PodGroupAdd")
POD_GROUP_UPDATE = _event(Resource.POD_GROUP, ActionType.UPDATE, "PodGroupUpdate")
POD_GROUP_DELETE = _event(Resource.POD_GROUP, ActionType.DELETE, "PodGroupDelete")
POD_GROUP_MEMBER_ADD = _event(Resource.POD_GROUP, ActionType.UPDATE, "PodGroupMemberAdd")
"""A pending pod joined a gang (a new pod labelled for a PodGroup): the gang grew, which is
what Coscheduling's PreFilter ("cannot find enough sibling pods") waits for. Only
Coscheduling registers for PodGroup events, so only pods it rejected wake."""
UNSCHEDULABLE_TIMEOUT = _event(Resource.WILDCARD, ActionType.ALL, "UnschedulableTimeout")

# Registrations. Keep each plugin's list next to upstream's EventsToRegister.
_N, _P, _G = Resource.NODE, Resource.POD, Resource.POD_GROUP
A = ActionType

DEFAULT_EVENTS_TO_REGISTER: Mapping[str, tuple[tuple[Resource, ActionType], ...]] = {
    # Node/Add only: a node update never changes the node name.
    "NodeName": ((_N, A.ADD),),
    "NodeUnschedulable": ((_N, A.ADD | A.UPDATE_NODE_TAINT), (_P, A.UPDATE_POD_TOLERATION)),
    # Ports are immutable in a pod spec: only freed (deleted) pods or new nodes help.
    "NodePorts": ((_P, A.DELETE), (_N, A.ADD)),
    "NodeAffinity": ((_N, A.ADD | A.UPDATE_NODE_LABEL),),
    "TaintToleration": ((_N, A.ADD | A.UPDATE_NODE_TAINT), (_P, A.UPDATE_POD_TOLERATION)),
    "NodeResourcesFit": (
        (_P, A.DELETE | A.UPDATE_POD_SCALE_DOWN),
        (_N, A.ADD | A.UPDATE_NODE_ALLOCATABLE),
    ),
    "NodeResourcesBalancedAllocation": (
        (_P, A.DELETE | A.UPDATE_POD_SCALE_DOWN),
        (_N, A.ADD | A.UPDATE_NODE_ALLOCATABLE),
    ),
    "InterPodAffinity": (
        (_P, A.ADD | A.UPDATE_POD_LABEL | A.DELETE),
        (_N, A.ADD | A.UPDATE_NODE_LABEL),
    ),
    "PodTopologySpread": (
        (_P, A.ADD | A.UPDATE_POD_LABEL | A.UPDATE_POD_TOLERATION | A.DELETE),
        (_N, A.ADD | A.DELETE | A.UPDATE_NODE_LABEL | A.UPDATE_NODE_TAINT),
    ),
    "ImageLocality": (),
    "SchedulingGates": ((_P, A.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),),
    "VolumeBinding": ((_N, A.ADD | A.UPDATE_NODE_LABEL | A.UPDATE_NODE_TAINT),),
    "VolumeRestrictions": ((_P, A.DELETE),),
    "VolumeZone": ((_N, A.ADD | A.UPDATE_NODE_LABEL),),
    "NodeVolumeLimits": ((_P, A.DELETE), (_N, A.ADD)),
    "DefaultPreemption": (),
    "PrioritySort": (),
    "DefaultBinder": (),
    # scheduler-plugins coscheduling: a new member pod or a changed PodGroup may complete a gang.
    "Coscheduling": ((_P, A.ADD), (_G, A.ADD | A.UPDATE)),
}


@dataclass(frozen=True, slots=True)
class QueueingHints:
    """plugin -> registered events; answers "which plugins may this event help?"."""

    registrations: Mapping[str, tuple[ClusterEvent, ...]]

    @classmethod
    def from_table(
        cls, table: Mapping[str, Iterable[tuple[Resource, ActionType]]]
    ) -> QueueingHints:
        return cls(
            {
                plugin: tuple(
                    ClusterEvent(resource, action, f"{plugin}:{resource}")
                    for resource, action in events
                )
                for plugin, events in table.items()
            }
        )

    @classmethod
    def default(cls) -> QueueingHints:
        return cls.from_table(DEFAULT_EVENTS_TO_REGISTER)

    def with_plugin(
        self, plugin: str, events: Iterable[tuple[Resource, ActionType]]
    ) -> QueueingHints:
        """An out-of-tree plugin's EventsToRegister added to (or replacing) the table."""
        table = dict(self.registrations)
        table[plugin] = tuple(ClusterEvent(r, a, f"{plugin}:{r}") for r, a in events)
        return QueueingHints(table)

    def plugins_for(self, event: ClusterEvent) -> frozenset[str] | None:
        """Plugins the event may help; None means every plugin (a wildcard event)."""
        if event.is_wildcard:
            return None
        return frozenset(
            plugin
            for plugin, registered in self.registrations.items()
            if any(event.matches(r) for r in registered)
        )


# ---------------------------------------------------------------------------------------------
# What changed: upstream NodeSchedulingPropertiesChange and the pod update classification.


def node_update_action(old: Node, new: Node) -> ActionType:
    """The update bits of a node change; NONE when nothing a plugin watches changed."""
    action = ActionType.NONE
    # Only a node that became schedulable can help (upstream extractNodeSpecUnschedulableChange).
    if old.spec.unschedulable != new.spec.unschedulable and not new.spec.unschedulable:
        action |= ActionType.UPDATE_NODE_TAINT
    if old.status.allocatable != new.status.allocatable:
        action |= ActionType.UPDATE_NODE_ALLOCATABLE
    if old.metadata.labels != new.metadata.labels:
        action |= ActionType.UPDATE_NODE_LABEL
    if old.spec.taints != new.spec.taints:
        action |= ActionType.UPDATE_NODE_TAINT
    # berth's Node model has no conditions yet (upstream also extracts UpdateNodeCondition).
    if old.metadata.annotations != new.metadata.annotations:
        action |= ActionType.UPDATE_NODE_ANNOTATION
    return action


def node_update_event(old: Node, new: Node) -> ClusterEvent | None:
    action = node_update_action(old, new)
    if action == ActionType.NONE:
        return None
    return ClusterEvent(Resource.NODE, action, "NodeUpdate")


def resized_down(old: Pod, new: Pod) -> bool:
    """Some resource request of an assigned pod went down (frees room)."""
    before, after = pod_requests(old), pod_requests(new)
    return any(after.get(name, 0) < amount for name, amount in before.items())
