"""Message authenticators (shared.messaging.message_auth): who may send what, tampering, replay
windows,
key rotation, and the keys file's errors. Pure logic; the stack-level tests are in
tests/fuzz/test_signed_forgeries.py."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from shared.messaging.kafka import Topics
from shared.messaging.message_auth import (
    AUTH_HEADER,
    MessageKeys,
    MessageKeysError,
    Signer,
    Verifier,
    topic_roles,
)
from shared.runtime.security import KafkaSecurity, SecurityConfigError

TOPICS = Topics().suffixed("t1")
ROLES = topic_roles(TOPICS)
KEYS = MessageKeys.generate()
NOW = 1_800_000_000.0

Headers = list[tuple[str, bytes]]


def signed(component: str, topic: str, value: bytes, *, at: float = NOW, keys=KEYS) -> Headers:
    signer = Signer(keys, component, ROLES, clock=lambda: at)
    return [("traceparent", b"x"), signer.header(topic, b"key", value)]


def verify(topic: str, value: bytes, headers: Headers, *, key: bytes = b"key", keys=KEYS) -> str:
    return Verifier(keys, ROLES, clock=lambda: NOW).refusal(topic, key, value, headers)


@dataclass(frozen=True)
class Case:
    name: str
    sender: str
    topic: str
    tamper: Callable[[Headers], Headers] = lambda h: h
    at: float = NOW
    refusal: str = ""


def _replace_auth(value: bytes) -> Callable[[Headers], Headers]:
    return lambda h: [(k, value if k == AUTH_HEADER else v) for k, v in h]


CASES = [
    Case("queue-dispatches", "queue", TOPICS.schedule),
    Case("worker-proposes", "scheduler", TOPICS.proposals),
    Case("worker-reports", "scheduler", TOPICS.outcomes),
    Case("binder-reports", "binder", TOPICS.outcomes),
    Case("binder-dead-letters", "binder", TOPICS.dlq),
    Case("worker-may-not-dispatch", "scheduler", TOPICS.schedule, refusal="may not send"),
    Case("binder-may-not-propose", "binder", TOPICS.proposals, refusal="may not send"),
    Case("queue-may-not-report", "queue", TOPICS.outcomes, refusal="may not send"),
    Case("no-header", "queue", TOPICS.schedule, lambda h: h[:1], refusal="no berth-auth"),
    Case("two-headers", "queue", TOPICS.schedule, lambda h: h + h[1:], refusal="more than one"),
    Case(
        "garbage-header",
        "queue",
        TOPICS.schedule,
        _replace_auth(b"nonsense"),
        refusal="malformed",
    ),
    Case(
        "claims-another-sender",
        "scheduler",
        TOPICS.outcomes,
        lambda h: [(k, v.replace(b"scheduler:", b"binder:", 1)) for k, v in h],
        refusal="unknown key",
    ),
    Case("too-old", "queue", TOPICS.schedule, at=NOW - 601, refusal="s ago"),
    Case("from-the-future", "queue", TOPICS.schedule, at=NOW + 120, refusal="ahead"),
    Case("slightly-ahead-is-clock-skew", "queue", TOPICS.schedule, at=NOW + 30),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_who_may_send_what(case: Case) -> None:
    headers = case.tamper(signed(case.sender, case.topic, b"value", at=case.at))
    refusal = verify(case.topic, b"value", headers)
    if case.refusal:
        assert case.refusal in refusal
    else:
        assert refusal == ""


def test_the_authenticator_covers_value_key_and_topic() -> None:
    headers = signed("scheduler", TOPICS.proposals, b"node-a")
    assert verify(TOPICS.proposals, b"node-a", headers) == ""
    assert "does not match" in verify(TOPICS.proposals, b"node-b", headers)
    assert "does not match" in verify(TOPICS.proposals, b"node-a", headers, key=b"other")
    # the same message replayed on another topic the sender may use
    outcome = signed("scheduler", TOPICS.outcomes, b"x")
    assert "does not match" in verify(TOPICS.proposals, b"x", outcome)


def test_another_stacks_keys_are_not_accepted() -> None:
    other = MessageKeys.generate()
    headers = signed("queue", TOPICS.schedule, b"v", keys=other)
    assert "unknown key" in verify(TOPICS.schedule, b"v", headers)


def test_rotation_old_and_new_keys_verify_while_both_are_listed() -> None:
    old, new = KEYS.keys["queue"][0], b"n" * 32
    during = MessageKeys({**KEYS.keys, "queue": (new, old)})  # new signs, old still accepted
    after = MessageKeys({**KEYS.keys, "queue": (new,)})
    by_old = signed("queue", TOPICS.schedule, b"v", keys=KEYS)
    by_new = signed("queue", TOPICS.schedule, b"v", keys=during)
    assert verify(TOPICS.schedule, b"v", by_old, keys=during) == ""
    assert verify(TOPICS.schedule, b"v", by_new, keys=during) == ""
    assert verify(TOPICS.schedule, b"v", by_new, keys=KEYS) != ""  # not rolled out yet
    assert "unknown key" in verify(TOPICS.schedule, b"v", by_old, keys=after)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("[]", "want a mapping"),
        ("{}", "want a mapping"),
        (json.dumps({"kubelet": [_b64(b"k" * 32)]}), "unknown component 'kubelet'"),
        (json.dumps({"queue": []}), "queue: want a non-empty list"),
        (json.dumps({"queue": ["%%%"]}), "queue[0]: not base64"),
        (json.dumps({"queue": [_b64(b"short")]}), "queue[0]: 5 bytes, want at least 32"),
        ("queue: [unclosed", "not YAML or JSON"),
    ],
)
def test_a_bad_keys_file_names_what_is_wrong(tmp_path: Path, content: str, error: str) -> None:
    path = tmp_path / "keys"
    path.write_text(content)
    with pytest.raises(MessageKeysError, match=None) as caught:
        MessageKeys.load(path)
    assert error in str(caught.value)
    assert str(path) in str(caught.value)
    # services refuse such a file before they connect
    with pytest.raises(SecurityConfigError):
        KafkaSecurity.from_env({"BERTH_MESSAGE_KEYS": str(path)})


def test_keys_file_round_trip_is_private(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    KEYS.write(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert MessageKeys.load(path) == KEYS
    assert KafkaSecurity.from_env({"BERTH_MESSAGE_KEYS": str(path)}).keys() == KEYS
    assert set(KEYS.only("binder").keys) == {"binder"}


def test_a_signer_needs_its_own_key() -> None:
    with pytest.raises(MessageKeysError, match="no message key for binder"):
        Signer(KEYS.only("queue"), "binder", ROLES)


def test_a_directory_of_one_file_per_component(tmp_path: Path) -> None:
    """The chart mounts a Secret with only the keys a process needs: one file per component,
    its keys one per line (the signing one first)."""
    (tmp_path / "queue").write_text(_b64(b"q" * 32) + "\n" + _b64(b"o" * 32) + "\n")
    (tmp_path / "binder").write_text(_b64(b"b" * 40))
    keys = MessageKeys.load(tmp_path)
    assert keys.keys == {"queue": (b"q" * 32, b"o" * 32), "binder": (b"b" * 40,)}
    (tmp_path / "scheduler").write_text("not base64!")
    with pytest.raises(MessageKeysError, match=r"scheduler\[0\]: not base64"):
        MessageKeys.load(tmp_path)
