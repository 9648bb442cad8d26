"""What the store's Lua scripts read about objects, computed in Python.

The scripts never decode a whole object: a write passes, next to the encoded object, the few
facts a later check needs (a node's allocatable, taints and unschedulable flag; a pod's charge:
the resources and host ports it uses once reserved or bound). They travel as msgpack, which
Redis' Lua reads with cmsgpack (integers stay exact up to 2**53).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import msgpack

from shared.models import (
    HostPort,
    Node,
    Pod,
    Toleration,
    host_ports,
    pod_group_key,
    pod_requests,
    priority_of,
)
from shared.models.affinity import anti_affinity_scopes
from shared.models.quantity import bounded_amount
from shared.store.fields import Charge, NodeFacts, PodFacts

# TaintToleration's Filter only looks at these effects (PreferNoSchedule only scores).
FILTERED_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def pack(value: Any) -> bytes:
    return cast(bytes, msgpack.packb(value, use_bin_type=True))


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


@dataclass(frozen=True, slots=True)
class PodCharge:
    """What a pod takes from its node while reserved or bound (besides one pod slot)."""

    requests: Mapping[str, int] = field(default_factory=dict)
    """Effective requests (upstream PodRequests), positive values only."""
    ports: tuple[HostPort, ...] = ()
    anti_affinity: tuple[str, ...] = ()
    """The namespaces the pod's required anti-affinity terms can match ("*": any;
    shared.models.affinity.anti_affinity_scopes). The store counts reserved or bound such pods per
    namespace: a pod may bind without a cross-node check only while none can match it (see
    reserve.lua)."""

    @classmethod
    def of(cls, pod: Pod) -> PodCharge:
        # Clamped like NodeColumns counts them, so the reserve script and every view agree
        # even on an amount stored out of range.
        requests = {
            name: bounded_amount(value) for name, value in pod_requests(pod).items() if value > 0
        }
        return cls(requests, host_ports(pod), anti_affinity_scopes(pod))

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            Charge.REQUESTS: dict(self.requests),
            Charge.PORTS: [[p.protocol, p.port, p.host_ip] for p in self.ports],
        }
        if self.anti_affinity:
            out[Charge.ANTI_AFFINITY] = list(self.anti_affinity)
        return out


def tolerations_wire(tolerations: Sequence[Toleration]) -> list[list[str]]:
    return [[t.key, t.operator, t.value, t.effect] for t in tolerations]


def node_facts(node: Node) -> dict[str, Any]:
    """What check-and-reserve reads about a node: allocatable, filtered taints, unschedulable."""
    return {
        NodeFacts.UNSCHEDULABLE: bool(node.spec.unschedulable),
        NodeFacts.ALLOCATABLE: {
            name: bounded_amount(value) for name, value in node.status.allocatable.items()
        },
        NodeFacts.TAINTS: [
            [taint.key, taint.value, taint.effect]
            for taint in node.spec.taints
            if taint.effect in FILTERED_TAINT_EFFECTS
        ],
    }


def pod_facts(pod: Pod, *, kubelet: bool = False) -> dict[str, Any]:
    """What an apply of a pod passes: a pod created with spec.nodeName is bound at once
    (`kubelet`: only if it fits what its node has left, as the kubelet admits it)."""
    facts: dict[str, Any] = {
        PodFacts.NODE: pod.spec.node_name,
        PodFacts.CHARGE: PodCharge.of(pod).wire(),
        PodFacts.GROUP: pod_group_key(pod),
        PodFacts.PRIORITY: priority_of(pod),
    }
    if kubelet:
        facts[PodFacts.KUBELET] = 1
    return facts


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """Requested resources of the pods reserved or bound on a node, as the store counts them."""

    pods: int = 0
    requested: Mapping[str, int] = field(default_factory=dict)
    host_ports: Mapping[HostPort, int] = field(default_factory=dict)

    @classmethod
    def from_packed(cls, data: bytes) -> NodeUsage:
        """From the usage hash as check-and-reserve packs it (flat [field, count, ...])."""
        flat = unpack(data)
        return cls.from_hash(dict(zip(flat[::2], flat[1::2], strict=True)))

    @classmethod
    def from_hash(cls, raw: Mapping[Any, Any]) -> NodeUsage:
        pods = 0
        requested: dict[str, int] = {}
        ports: dict[HostPort, int] = {}
        for key, value in raw.items():
            name = key.decode() if isinstance(key, bytes) else key
            count = int(value)
            if name == "pods":
                pods = count
            elif name.startswith("r:"):
                if count:
                    requested[name[2:]] = count
            else:
                port = HostPort.parse_field(name)
                if port is not None and count > 0:
                    ports[port] = count
        return cls(pods, requested, ports)
