"""The Redis ACL rules file (deploy/helm/berth/files/redis-acl.yaml): the chart's rendered
`ACL SETUSER` lines are exactly the ones the stack test runs under; every rule stays inside
berth's keys, grants nothing of @dangerous, and is accepted by a real Redis."""

from __future__ import annotations

from typing import Any

import helm_python
import kubernetes_validate
import pytest
import redis.asyncio as aioredis

from shared.runtime.redisconn import connect, ping_or_refuse
from shared.runtime.security import ConnectError, RedisSecurity
from tests.deploy.chart import CHART_DIR, KUBE_VERSION, render
from tests.security.redis_acl import (
    RULES_FILE,
    Prefixes,
    Rule,
    command,
    components,
    rules,
    server_major,
    split_line,
)

KUBE: dict[str, Any] = {
    "kubernetes": {"enabled": True},
    "schedulerConfig": {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "berth"}],
    },
}
USERS = {
    "redis": {"existingSecret": "redis-users", "existingSecretKey": "", "users": {"enabled": True}}
}
DASHBOARD = {"dashboard": {"enabled": True}}
README = RULES_FILE.parents[1] / "README.md"


def _merge(*parts: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = _merge(out[key], value)
            else:
                out[key] = value
    return out


CASES = [
    pytest.param(
        _merge(USERS, DASHBOARD),
        Prefixes(),
        "berth-",
        [
            ("queue", "queue"),
            ("scheduler", "scheduler"),
            ("binder", "binder"),
            ("agent", "agent"),
            ("dashboard", "dashboard"),
        ],
        id="standalone",
    ),
    pytest.param(
        _merge(USERS, DASHBOARD, {"dashboard": {"tokensSecret": "tokens"}}),
        Prefixes(),
        "berth-",
        [
            ("queue", "queue"),
            ("scheduler", "scheduler"),
            ("binder", "binder"),
            ("agent", "agent"),
            ("dashboard", "dashboard-front-door"),
        ],
        id="standalone-front-door",
    ),
    pytest.param(
        _merge(KUBE, USERS, DASHBOARD, {"dashboard": {"tokensSecret": "tokens"}}),
        Prefixes(),
        "berth-",
        [
            ("queue", "queue"),
            ("scheduler", "scheduler"),
            ("binder", "binder"),
            ("adapter", "adapter"),
            ("dashboard", "dashboard"),
        ],
        id="kubernetes",
    ),
    pytest.param(
        _merge(
            USERS,
            {
                "redis": {"users": {"usernamePrefix": "team1-"}},
                "store": {"keyPrefix": "b*[x]:", "cluster": "c1", "queueKeyPrefix": "q?:"},
                "dashboard": {"enabled": False},
                "agent": {"enabled": False},
            },
        ),
        Prefixes("b*[x]:", "c1", "q?:"),
        "team1-",
        [("queue", "queue"), ("scheduler", "scheduler"), ("binder", "binder")],
        id="own-prefixes-escaped",
    ),
]


@pytest.mark.parametrize(("values", "prefixes", "user_prefix", "expected"), CASES)
def test_the_chart_renders_exactly_the_lines_the_stack_test_runs_under(
    values: dict[str, Any], prefixes: Prefixes, user_prefix: str, expected: list[tuple[str, str]]
) -> None:
    rendered = render(values)
    (configmap,) = [m for m in rendered.kinds("ConfigMap") if m.name.endswith("-redis-acl")]
    for version, redis7 in (("redis7", True), ("redis6", False)):
        lines = [line.strip() for line in configmap.doc["data"][f"{version}.acl"].splitlines()]
        lines = [line for line in lines if line]
        assert lines == [
            Rule.of(rule, prefixes).line(f"{user_prefix}{component}", redis7=redis7)
            for component, rule in expected
        ]


def test_no_acl_configmap_without_per_component_users() -> None:
    assert not [m for m in render().kinds("ConfigMap") if m.name.endswith("-redis-acl")]


def test_escaped_prefixes_match_only_their_own_keys() -> None:
    rule = Rule.of("scheduler", Prefixes("b*[x]:", "c1", "q?:"))
    assert rule.write == (r"b\*\[x\]:{c1}:workers",)


def test_every_rule_stays_inside_berths_keys() -> None:
    for component in components():
        spec = rules()["components"][component]
        rule = Rule.of(component, Prefixes("S:", "c", "Q:"))
        for pattern in (*rule.read, *rule.write, *rule.scripts):
            assert pattern.startswith(("S:{c}:", "Q:")), (component, pattern)
        assert rule.commands, component
        assert set(spec) <= {"commands", "read", "write", "scripts"}, component


def test_the_dashboard_rule_has_only_read_commands() -> None:
    assert not Rule.of("dashboard").write
    assert set(Rule.of("dashboard").commands) <= set(Rule.of("dashboard-front-door").commands)


async def test_no_rule_grants_a_dangerous_command_and_redis_accepts_every_rule(
    redis_client: aioredis.Redis, test_id: str
) -> None:
    dangerous = {
        c.decode() if isinstance(c, bytes) else c for c in await redis_client.acl_cat("dangerous")
    }
    redis7 = await server_major(redis_client) >= 7
    for component in components():
        rule = Rule.of(component)
        granted = {command.partition("|")[0] for command in rule.commands}
        assert not granted & dangerous, (component, granted & dangerous)
        user = f"berth-check-{component}-{test_id}"
        for version in {False, redis7}:
            try:
                words = split_line(rule.line(user, redis7=version))
                assert await command(redis_client, *words) in (b"OK", "OK", True)
            finally:
                await redis_client.acl_deluser(user)


def test_the_chart_readme_points_at_the_rules_file() -> None:
    text = README.read_text()
    assert "files/redis-acl.yaml" in text
    assert "tests/security/test_redis_acl.py" in text


async def test_a_component_refused_by_its_acl_says_so_in_one_line(
    redis_client: aioredis.Redis, redis_url: str, test_id: str
) -> None:
    """A user whose rule lacks PING (the services' first command) is refused at start with
    one line naming the user and the rules file, not a traceback."""
    user = f"berth-noping-{test_id}"
    await command(redis_client, "ACL", "SETUSER", user, "on", ">pw", "resetkeys", "-@all")
    security = RedisSecurity(username=user, password="pw")
    confined = connect(redis_url, security)
    try:
        with pytest.raises(ConnectError) as caught:
            await ping_or_refuse(confined, redis_url, security)
        assert "no permissions to run the 'ping' command" in str(caught.value)
        assert f"Redis user '{user}' is not allowed this" in str(caught.value)
        assert "files/redis-acl.yaml" in str(caught.value)
    finally:
        await confined.aclose()
        await redis_client.acl_deluser(user)


def test_the_chart_with_per_component_users_lints_and_validates_strictly() -> None:
    values = _merge(USERS, DASHBOARD)
    report = helm_python.lint(CHART_DIR, values, strict=True, kube_version=f"v{KUBE_VERSION}")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
    (configmap,) = [m for m in render(values).kinds("ConfigMap") if m.name.endswith("-redis-acl")]
    kubernetes_validate.validate(configmap.doc, KUBE_VERSION, strict=True)
