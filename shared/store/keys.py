"""Redis key names of the cluster store, all in one place.

Every key of one cluster carries the hash tag ``{<cluster>}`` so that every script touches one
slot (Redis Cluster). Scripts receive the resourceVersion counter as KEYS[1] (it routes the call
to the right slot) and derive the other names from its prefix, because several of them depend
on data only the script reads (the node a pod is bound to, the nodes with usage).

    <base> = <prefix>{<cluster>}:
    <base>rv                   counter: the last resourceVersion (= the last stream entry id)
    <base>stream               change stream, entry id "<rv>-0"
    <base>obj:<Kind>           hash  object key -> msgpack object (shared.models.codec)
    <base>meta:<Kind>          hash  object key -> "<rv> <uid>" (authoritative rv and uid)
    <base>nf                   hash  node name -> msgpack node facts (allocatable, taints...)
    <base>usage:<node>         hash  "pods", "r:<resource>", "hp:<proto>:<port>:<ip>" -> count
    <base>usage-nodes          set   nodes that have a usage hash
    <base>podnode              hash  pod key -> node (bound pods)
    <base>charge               hash  pod key -> msgpack charge (what a reserved/bound pod uses)
    <base>resv                 zset  pod key -> reservation expiry (epoch seconds)
    <base>att                  hash  pod uid -> "<attempt> <state>" (binder idempotency)
    <base>nom:<node>           hash  pod key -> msgpack {prio, r, p} (nominated pods)
    <base>nomof                hash  pod key -> nominated node
    <base>gang:<ns/group>      hash  gen, state ("w" waiting / "p" permitted), since
    <base>gangm:<ns/group>     set   pod keys holding a reservation in the current generation
    <base>gangbound            hash  ns/group -> bound members
    <base>antiaff:<namespace>  counter: reserved or bound pods whose required anti-affinity
                                     terms can match pods of that namespace ("*": any)
    <base>workers              hash  worker id -> heartbeat (written by the scheduler workers;
                                     no script touches it)

tests/store/test_lua_keys.py checks the Lua prelude, this layout and `StoreKeys` against each
other, and the usage-hash fields against shared.models.HostPort.field and NodeUsage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.models.schema import KIND_BY_NAME

_BAD_CLUSTER = re.compile(r"[{}\s*?\[\]]")

KINDS: tuple[str, ...] = tuple(KIND_BY_NAME)
"""Every kind the store keeps: Node, Pod, Namespace, PriorityClass, PodDisruptionBudget,
PodGroup."""


class InvalidNameError(ValueError):
    """A cluster name or kind that cannot be part of a store key."""


def check_cluster(cluster: str) -> str:
    if not cluster or _BAD_CLUSTER.search(cluster):
        raise InvalidNameError(f"invalid cluster name {cluster!r}")
    return cluster


def check_kind(kind: str) -> str:
    if kind not in KIND_BY_NAME:
        raise InvalidNameError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
    return kind


def is_namespaced(kind: str) -> bool:
    return KIND_BY_NAME[check_kind(kind)].namespaced


def object_key(kind: str, namespace: str, name: str) -> str:
    """ "namespace/name" for namespaced kinds, "name" for cluster-scoped ones."""
    return f"{namespace}/{name}" if is_namespaced(kind) else name


@dataclass(frozen=True, slots=True)
class StoreKeys:
    prefix: str = "berth:"
    cluster: str = "default"

    def __post_init__(self) -> None:
        check_cluster(self.cluster)

    @property
    def base(self) -> str:
        return f"{self.prefix}{{{self.cluster}}}:"

    @property
    def rv(self) -> str:
        return self.base + "rv"

    @property
    def stream(self) -> str:
        return self.base + "stream"

    def objects(self, kind: str) -> str:
        return f"{self.base}obj:{check_kind(kind)}"

    def meta(self, kind: str) -> str:
        return f"{self.base}meta:{check_kind(kind)}"

    @property
    def node_facts(self) -> str:
        return self.base + "nf"

    def usage(self, node: str) -> str:
        return f"{self.base}usage:{node}"

    @property
    def usage_nodes(self) -> str:
        return self.base + "usage-nodes"

    @property
    def pod_node(self) -> str:
        return self.base + "podnode"

    @property
    def charges(self) -> str:
        return self.base + "charge"

    @property
    def reservations(self) -> str:
        return self.base + "resv"

    @property
    def attempts(self) -> str:
        return self.base + "att"

    def nominated(self, node: str) -> str:
        return f"{self.base}nom:{node}"

    @property
    def nominated_of(self) -> str:
        return self.base + "nomof"

    def gang(self, group: str) -> str:
        return f"{self.base}gang:{group}"

    def gang_members(self, group: str) -> str:
        return f"{self.base}gangm:{group}"

    @property
    def gang_bound(self) -> str:
        return self.base + "gangbound"

    def anti_affinity(self, scope: str) -> str:
        return f"{self.base}antiaff:{scope}"

    @property
    def workers(self) -> str:
        """The scheduler workers' heartbeats (one field per worker, written by each worker,
        read by `berth get queues` and `berth run`)."""
        return self.base + "workers"
