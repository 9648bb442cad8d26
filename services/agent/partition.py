"""Which agent replica looks after which node: rendezvous hashing over the live replicas.

Each replica refreshes its entry in the `lifecycle:agents` hash every heartbeat; the live
replicas are those heard from within `ttl`. A node belongs to the live replica with the highest
hash of (replica, node), so a replica joining or leaving moves only its own share of nodes
(the binder's partitions move the same way when its consumer group rebalances). During a
change two replicas may briefly both act on a node: every action on a pod is a delete by
uid, which only one of them wins.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def weight(member: str, node: str) -> int:
    digest = hashlib.blake2b(f"{member}\0{node}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(members: Iterable[str], node: str) -> str:
    return max(members, key=lambda m: (weight(m, node), m))


def live_members(seen: dict[str, float], now: float, ttl: float, me: str) -> list[str]:
    live = {m for m, at in seen.items() if now - at <= ttl}
    live.add(me)
    return sorted(live)
