"""The berth queue service: kube-scheduler's PriorityQueue in Redis, driven by Kafka.

- `QueueStore`: the queue itself (Lua scripts over Redis), usable without Kafka.
- `QueueService`: one replica consuming pod/node events and outcomes, dispatching leased
  pods to `berth.schedule`.
- `QueueConfig`, `QueueingHints` and the cluster events, clocks for tests.
"""

from services.queue.clock import Clock, ManualClock, SystemClock
from services.queue.config import QueueConfig
from services.queue.hints import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    NODE_ADD,
    NODE_DELETE,
    UNSCHEDULABLE_TIMEOUT,
    ActionType,
    ClusterEvent,
    QueueingHints,
    Resource,
)
from services.queue.service import QueueService
from services.queue.store import MoveResult, QueueStore
from services.queue.views import NominatedPod, PendingPod, PendingView, QueueCounts

__all__ = [
    "ASSIGNED_POD_ADD",
    "ASSIGNED_POD_DELETE",
    "ASSIGNED_POD_UPDATE",
    "NODE_ADD",
    "NODE_DELETE",
    "UNSCHEDULABLE_TIMEOUT",
    "ActionType",
    "Clock",
    "ClusterEvent",
    "ManualClock",
    "MoveResult",
    "NominatedPod",
    "PendingPod",
    "PendingView",
    "QueueConfig",
    "QueueCounts",
    "QueueService",
    "QueueStore",
    "QueueingHints",
    "Resource",
    "SystemClock",
]
