"""evolve: dataclasses.replace's result, for the classes it copies itself and the ones it
hands to replace."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from shared.messaging.messages import Outcome
from shared.messaging.proposals import Proposal
from shared.models import ObjectMeta, Pod
from shared.models.evolve import evolve
from shared.store import NodeUsage
from tests.builders import make_pod


@dataclass(slots=True)
class Computed:
    a: int
    b: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.b = self.a * 2


@dataclass(frozen=True)
class FrozenNoSlots:
    a: int
    tags: tuple[str, ...] = ()


POD = make_pod("p").req(cpu="1").label("app", "web").obj()
CASES: list[tuple[Any, dict[str, Any]]] = [
    (POD, {}),
    (POD, {"spec": dataclasses.replace(POD.spec, node_name="n1")}),
    (POD.metadata, {"resource_version": 9, "labels": {"x": "y"}}),
    (Proposal("t", "ns/p", "u", 1, "n1"), {"sequence": 3, "cycle_started": 1.5}),
    (Outcome("t", "ns/p", "u", 1, "scheduled"), {"node_name": "n2"}),
    (Computed(2), {"a": 5}),
    (FrozenNoSlots(1, ("a",)), {"tags": ("b",)}),
]


@pytest.mark.parametrize(("obj", "changes"), CASES)
def test_evolve_gives_what_replace_gives(obj: Any, changes: dict[str, Any]) -> None:
    before = dataclasses.replace(obj)
    copied = evolve(obj, **changes)
    assert copied == dataclasses.replace(obj, **changes)
    assert type(copied) is type(obj)
    assert copied is not obj
    assert obj == before  # the original is untouched


def test_the_copy_is_shallow_and_independent() -> None:
    meta = ObjectMeta(name="a", labels={"k": "v"})
    copied = evolve(meta, name="b")
    assert copied.labels is meta.labels  # shallow, as replace
    copied.namespace = "other"
    assert meta.namespace != "other"


@pytest.mark.parametrize("obj", [POD, Proposal("t", "ns/p", "u", 1, "n1"), Computed(1)])
def test_an_unknown_field_is_a_type_error_as_with_replace(obj: Any) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        evolve(obj, nope=1)
    with pytest.raises(TypeError):
        dataclasses.replace(obj, nope=1)


def test_a_frozen_copy_stays_frozen() -> None:
    copied = evolve(NodeUsage(pods=1), pods=2)
    assert copied == NodeUsage(pods=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        copied.pods = 3  # type: ignore[misc]
    assert isinstance(evolve(POD), Pod)
