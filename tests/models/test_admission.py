"""Admission of a user's write (shared.models.admission), table-driven from upstream's Priority
and DefaultTolerationSeconds admission plugins and the API server's size limits."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from shared.models import ManifestError, Manifests, Pod, PriorityClass, Toleration
from shared.models.admission import (
    MAX_ANNOTATIONS_BYTES,
    MAX_OBJECT_BYTES,
    NOT_READY,
    UNREACHABLE,
    admit,
)
from shared.models.meta import cluster_meta
from tests.builders import make_pod


def klass(name: str, value: int, *, default: bool = False) -> PriorityClass:
    return PriorityClass(metadata=cluster_meta(name), value=value, global_default=default)


@dataclass(frozen=True)
class PriorityCase:
    name: str
    class_name: str
    given: int | None
    classes: tuple[PriorityClass, ...] = ()
    want: int | None = None
    refusal: str = ""


PRIORITY_CASES = [
    PriorityCase("no-class-no-priority", "", None, want=0),
    PriorityCase("from-the-class", "high", None, (klass("high", 1000),), want=1000),
    PriorityCase("global-default", "", None, (klass("dflt", 7, default=True),), want=7),
    PriorityCase("the-class-value-given", "high", 1000, (klass("high", 1000),), want=1000),
    PriorityCase(
        "max-priority-without-class",
        "",
        2147483647,
        refusal="the integer value of priority (2147483647) must not be provided in pod spec; "
        "priority admission controller computed 0",
    ),
    PriorityCase(
        "more-than-the-class",
        "low",
        5000,
        (klass("low", 10),),
        refusal="priority admission controller computed 10",
    ),
    PriorityCase(
        "unknown-class", "nope", None, refusal='no PriorityClass with name "nope" was found'
    ),
]


@pytest.mark.parametrize("case", PRIORITY_CASES, ids=[c.name for c in PRIORITY_CASES])
def test_priority_is_computed_never_taken(case: PriorityCase) -> None:
    builder = make_pod("p")
    if case.class_name:
        builder = builder.priority_class(case.class_name)
    pod = builder.obj()
    pod.spec.priority = case.given
    manifests = Manifests(pods=[pod])
    if case.refusal:
        with pytest.raises(ManifestError) as caught:
            admit(manifests, case.classes)
        assert case.refusal in str(caught.value)
        assert "Pod default/p: spec.priority" in str(caught.value) or case.given is None
    else:
        admit(manifests, case.classes)
        assert pod.spec.priority == case.want


@dataclass(frozen=True)
class TolerationCase:
    name: str
    own: tuple[Toleration, ...]
    added: tuple[str, ...]
    """Keys of the 300 s tolerations admission adds."""


TOLERATION_CASES = [
    TolerationCase("none", (), (NOT_READY, UNREACHABLE)),
    TolerationCase(
        "tolerates-not-ready-for-a-minute",
        (Toleration(key=NOT_READY, operator="Exists", effect="NoExecute", toleration_seconds=60),),
        (UNREACHABLE,),
    ),
    TolerationCase("tolerates-everything", (Toleration(key="", operator="Exists"),), ()),
    TolerationCase(
        "no-schedule-only-is-not-enough",
        (Toleration(key=NOT_READY, operator="Exists", effect="NoSchedule"),),
        (NOT_READY, UNREACHABLE),
    ),
    TolerationCase(
        "any-effect-of-unreachable",
        (Toleration(key=UNREACHABLE, operator="Exists"),),
        (NOT_READY,),
    ),
]


@pytest.mark.parametrize("case", TOLERATION_CASES, ids=[c.name for c in TOLERATION_CASES])
def test_default_toleration_seconds(case: TolerationCase) -> None:
    pod = make_pod("p").obj()
    pod.spec.tolerations = list(case.own)
    admit(Manifests(pods=[pod]), [])
    added = pod.spec.tolerations[len(case.own) :]
    assert [t.key for t in added] == list(case.added)
    assert all(
        (t.operator, t.effect, t.toleration_seconds) == ("Exists", "NoExecute", 300) for t in added
    )


@dataclass(frozen=True)
class SizeCase:
    name: str
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    refusal: str = ""


SIZE_CASES = [
    SizeCase("at-the-annotation-limit", {"a": "x" * (MAX_ANNOTATIONS_BYTES - 1)}),
    SizeCase(
        "over-the-annotation-limit",
        {"a": "x" * MAX_ANNOTATIONS_BYTES},
        refusal="metadata.annotations: Too long: must have at most 262144 bytes",
    ),
    SizeCase(
        "over-the-object-limit",
        {f"k{i}": "x" * 200_000 for i in range(1)},
        {f"l{i}": "y" * 60 for i in range(MAX_OBJECT_BYTES // 60)},
        refusal="Request entity too large",
    ),
]


@pytest.mark.parametrize("case", SIZE_CASES, ids=[c.name for c in SIZE_CASES])
def test_size_limits(case: SizeCase) -> None:
    pod = make_pod("p").obj()
    pod.metadata.annotations = dict(case.annotations)
    pod.metadata.labels = dict(case.labels)
    if case.refusal:
        with pytest.raises(ManifestError, match=case.refusal):
            admit(Manifests(pods=[pod]), [])
    else:
        admit(Manifests(pods=[pod]), [])


def test_the_uid_is_the_servers() -> None:
    pod: Pod = make_pod("p").uid("chosen-by-me").obj()
    admit(Manifests(pods=[pod]), [])
    assert pod.metadata.uid != "chosen-by-me"
