"""The short field names the store's Python and its Lua scripts share, defined once.

The scripts read them as `facts.u`, `charge.r`, `runs("f")`... (cmsgpack maps and letters keep
the scripts cheap); Python writes and reads them through these names.
tests/store/test_lua_fields.py checks every field a script reads or writes against these
classes, and that each one here is used by a script.
"""

from __future__ import annotations

from typing import Final


class NodeFacts:
    """What a node's write passes for check-and-reserve (reserve.lua `facts`)."""

    UNSCHEDULABLE: Final = "u"
    ALLOCATABLE: Final = "a"
    TAINTS: Final = "t"


class PodFacts:
    """What a pod's write passes (apply.lua `facts`)."""

    NODE: Final = "node"
    CHARGE: Final = "c"
    GROUP: Final = "g"
    PRIORITY: Final = "prio"
    KUBELET: Final = "k"
    """Bind at once only if it fits what the node has left (as the kubelet admits it)."""


class Charge:
    """What a pod takes from its node (PodCharge.wire; inside a charge record)."""

    REQUESTS: Final = "r"
    PORTS: Final = "p"
    ANTI_AFFINITY: Final = "x"


class ChargeRecord:
    """A reservation or binding as the `charge` hash keeps it (Lua writes it; Python reads
    it), with the Charge fields beside these."""

    STATE: Final = "s"
    """RESERVED or BOUND."""
    RESERVED: Final = "r"
    BOUND: Final = "b"
    NODE: Final = "node"
    UID: Final = "uid"
    ATTEMPT: Final = "att"
    GROUP: Final = "g"
    GENERATION: Final = "gen"
    PRIORITY: Final = "prio"
    HOLDER: Final = "h"


class NodeChecks:
    """The Filters check-and-reserve runs, one letter each (ReserveRequest.node_checks;
    reserve.lua `runs(letter)`)."""

    UNSCHEDULABLE: Final = "u"
    TAINTS: Final = "t"
    PORTS: Final = "p"
    FIT: Final = "f"
    ALL: Final = "utpf"


def names(fields: type) -> dict[str, str]:
    """A fields class as {python name: wire name} (its Final string constants)."""
    return {
        name: value
        for name, value in vars(fields).items()
        if name.isupper() and isinstance(value, str)
    }
