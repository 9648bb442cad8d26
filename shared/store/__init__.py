"""The cluster store: objects, per-node usage, bindings and a change stream in Redis.

See `shared.store.store` (objects, snapshot, follow) and `shared.store.bindings` (the binder's
reservations, bindings, nominations and gangs); key layout in `shared.store.keys`.
`HostPort` (defined in shared.models.resources) is re-exported here as the key type of
`NodeUsage.host_ports`.
"""

from shared.models.resources import HostPort
from shared.store.bindings import (
    DEFAULT_RESERVATION_TTL,
    Bindings,
    BindResult,
    GangRejectResult,
    GangState,
    HeldReservation,
    ReleasedReservation,
    ReserveRequest,
    ReserveResult,
    ReserveStatus,
)
from shared.store.errors import (
    ApplyRejectedError,
    CorruptObjectError,
    StoreError,
    StreamGapError,
)
from shared.store.keys import KINDS, InvalidNameError, StoreKeys, object_key
from shared.store.records import NodeUsage, PodCharge
from shared.store.store import (
    RESERVATION,
    Applied,
    BodiesSkipped,
    Change,
    ClusterStore,
    PreviousLookup,
    Snapshot,
    decorate,
    restamp,
)

__all__ = [
    "DEFAULT_RESERVATION_TTL",
    "KINDS",
    "RESERVATION",
    "Applied",
    "ApplyRejectedError",
    "BindResult",
    "Bindings",
    "BodiesSkipped",
    "Change",
    "ClusterStore",
    "CorruptObjectError",
    "GangRejectResult",
    "GangState",
    "HeldReservation",
    "HostPort",
    "InvalidNameError",
    "NodeUsage",
    "PodCharge",
    "PreviousLookup",
    "ReleasedReservation",
    "ReserveRequest",
    "ReserveResult",
    "ReserveStatus",
    "Snapshot",
    "StoreError",
    "StoreKeys",
    "StreamGapError",
    "decorate",
    "object_key",
    "restamp",
]
