"""The chart's message keys (issue 19): every Deployment that uses Kafka authenticates its
messages, holding only the keys it needs, from a Secret the chart makes once or the operator
names."""

from __future__ import annotations

import base64
from pathlib import Path

from shared.messaging.message_auth import MessageKeys
from tests.deploy.chart import render

NEEDS = {
    "queue": ["queue", "scheduler", "binder"],  # signs dispatches, reads outcomes
    "scheduler": ["queue", "scheduler"],  # reads dispatches, signs proposals and outcomes
    "binder": ["scheduler", "binder"],  # reads proposals, signs outcomes
}


def _secret_items(rendered: object, component: str) -> tuple[str, list[str]] | None:
    deployment = rendered.get("Deployment", component)  # type: ignore[attr-defined]
    volumes = deployment.doc["spec"]["template"]["spec"]["volumes"]
    found = [v for v in volumes if v["name"] == "message-keys"]
    if not found:
        return None
    secret = found[0]["secret"]
    return secret["secretName"], [item["key"] for item in secret["items"]]


def test_each_component_mounts_only_the_keys_it_needs(tmp_path: Path) -> None:
    rendered = render()
    secrets = [m for m in rendered.kinds("Secret") if m.name.endswith("-message-keys")]
    assert len(secrets) == 1
    secret = secrets[0]
    assert secret.doc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    data = secret.doc["data"]
    assert sorted(data) == ["binder", "queue", "scheduler"]
    for component, needed in NEEDS.items():
        assert rendered.env(component)["BERTH_MESSAGE_KEYS"] == "/etc/berth-message-keys"
        assert _secret_items(rendered, component) == (secret.name, needed)
    assert _secret_items(rendered, "agent") is None  # no Kafka
    assert "BERTH_MESSAGE_KEYS" not in rendered.env("agent")
    # What a pod sees at the mount loads as its keys: the scheduler's own and the queue's.
    for key in NEEDS["scheduler"]:
        (tmp_path / key).write_bytes(base64.b64decode(data[key]))
    keys = MessageKeys.load(tmp_path)
    assert sorted(keys.keys) == ["queue", "scheduler"]
    assert all(len(k[0]) == 32 for k in keys.keys.values())
    assert keys.keys["queue"] != keys.keys["scheduler"]


def test_an_operators_secret_is_used_and_none_is_made() -> None:
    rendered = render({"messageKeys": {"existingSecret": "team-keys"}})
    assert not [m for m in rendered.kinds("Secret") if m.name.endswith("-message-keys")]
    assert _secret_items(rendered, "binder") == ("team-keys", NEEDS["binder"])


def test_the_dashboard_reads_the_topics_and_verifies() -> None:
    rendered = render({"dashboard": {"enabled": True}})
    name, keys = _secret_items(rendered, "dashboard") or ("", [])
    assert name.endswith("-message-keys")
    assert keys == ["queue", "scheduler", "binder"]
