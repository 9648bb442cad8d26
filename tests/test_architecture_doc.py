"""docs/architecture.md's topic table and diagram say what the code does: for each Kafka topic,
the services that produce it and the services that consume it, read from the services' own
calls (`make_consumer`/`subscribe`/`assign_all` for reads, `send`/`send_and_wait`/`_send` and
`BatchSender(producer, topic, ...)` for writes). A service that starts or stops reading or
writing a topic fails here until the doc says so."""

from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path

import pytest

from shared.messaging.kafka import Topics

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text()
TOPIC_FIELDS: dict[str, str] = {f.name: getattr(Topics(), f.name) for f in fields(Topics)}
CONSUME = {"make_consumer", "subscribe", "assign_all"}
PRODUCE = {"send", "send_and_wait", "_send"}


def _name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _topics_in(nodes: list[ast.expr]) -> set[str]:
    """Topic fields named in these expressions (`topics.outcomes`, `self._topics.dlq`...)."""
    return {
        node.attr
        for expr in nodes
        for node in ast.walk(expr)
        if isinstance(node, ast.Attribute)
        and node.attr in TOPIC_FIELDS
        and "topics" in ast.unparse(node.value).lower()
    }


def uses() -> dict[str, tuple[set[str], set[str]]]:
    """service -> (topics it produces, topics it consumes), topic names as Topics' defaults."""
    out: dict[str, tuple[set[str], set[str]]] = {}
    for service in sorted(p for p in (ROOT / "services").iterdir() if (p / "main.py").exists()):
        produced: set[str] = set()
        consumed: set[str] = set()
        for path in service.rglob("*.py"):
            for call in ast.walk(ast.parse(path.read_text())):
                if not isinstance(call, ast.Call):
                    continue
                if _name(call) in CONSUME:
                    consumed |= _topics_in([*call.args, *(k.value for k in call.keywords)])
                elif _name(call) in PRODUCE and call.args:
                    produced |= _topics_in(call.args[:1])
                elif _name(call) == "BatchSender":
                    produced |= _topics_in(call.args[1:2])
        out[service.name] = (
            {TOPIC_FIELDS[t] for t in produced},
            {TOPIC_FIELDS[t] for t in consumed},
        )
    return out


ROW = re.compile(r"^\| `(berth\.\w+)` \| .*? \| (.*?) \| (.*?) \|$", re.M)


def table() -> dict[str, tuple[set[str], set[str]]]:
    """topic -> (producers, consumers) as the doc's table names them."""

    def names(cell: str) -> set[str]:
        if cell.startswith("none"):
            return set()
        return {n.strip(" `") for n in cell.split(",")}

    return {topic: (names(frm), names(to)) for topic, frm, to in ROW.findall(DOC)}


def test_the_table_lists_every_topic() -> None:
    assert set(table()) == set(TOPIC_FIELDS.values())


@pytest.mark.parametrize("topic", sorted(TOPIC_FIELDS.values()))
def test_the_table_says_who_produces_and_consumes(topic: str) -> None:
    code = uses()
    producers = {s for s, (produced, _) in code.items() if topic in produced}
    consumers = {s for s, (_, consumed) in code.items() if topic in consumed}
    assert table()[topic] == (producers, consumers)


def test_the_diagram_draws_every_edge() -> None:
    diagram = DOC.split("```")[1]
    drawn = {
        (left.split()[-1], right.split()[0])
        for line in diagram.splitlines()
        for left, right in zip(line.split("──▶")[:-1], line.split("──▶")[1:], strict=True)
        if left.split() and right.split()
    }
    for service, (produced, consumed) in uses().items():
        for topic in produced:
            assert (service, topic) in drawn, f"{service} ──▶ {topic} missing from the diagram"
        for topic in consumed:
            assert (topic, service) in drawn, f"{topic} ──▶ {service} missing from the diagram"


def test_the_code_reading_finds_the_pipeline() -> None:
    """The reading of the code itself: the queue sends schedule requests, workers read them."""
    code = uses()
    assert "berth.schedule" in code["queue"][0]
    assert "berth.schedule" in code["scheduler"][1]
