"""services/dashboard/auth.py: the tokens file, read strictly, and who may touch what."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.dashboard.auth import (
    Identity,
    Tokens,
    TokensError,
    digest,
    namespace_refusal,
    parse_tokens,
    refusal,
)

A = "token-of-team-a-0001"
ADMIN = "token-of-the-admin-01"
GOOD = f"""
{A}: {{tenant: team-a, namespaces: [team-a, team-a-dev]}}
{ADMIN}: {{admin: true}}
"""
TEAM_A = Identity("team-a", namespaces=frozenset({"team-a", "team-a-dev"}))


def test_a_good_file() -> None:
    assert parse_tokens(GOOD) == {digest(A): TEAM_A, digest(ADMIN): Identity("admin", admin=True)}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        pytest.param("", "want a mapping", id="empty"),
        pytest.param("[a, b]", "want a mapping", id="a list"),
        pytest.param("short: {admin: true}", "16+ characters", id="short token"),
        pytest.param(f"{A}: team-a", "want {tenant", id="not a mapping"),
        pytest.param(f"{A}: {{admin: false}}", "admin must be true", id="admin false"),
        pytest.param(f"{A}: {{admin: true, namespaces: [x]}}", "unknown field", id="admin+ns"),
        pytest.param(f"{A}: {{tenant: t}}", "namespaces must be", id="no namespaces"),
        pytest.param(f"{A}: {{tenant: t, namespaces: []}}", "namespaces must be", id="empty ns"),
        pytest.param(f"{A}: {{tenant: t, namespaces: [Bad_NS]}}", "not a namespace", id="bad ns"),
        pytest.param(f"{A}: {{namespaces: [a]}}", "tenant must be", id="no tenant"),
        pytest.param(f"{A}: {{tenant: t, namespaces: [a], role: x}}", "unknown", id="unknown"),
        pytest.param("{a: [}", "not YAML", id="not yaml"),
    ],
)
def test_bad_files_are_refused_without_echoing_the_token(text: str, error: str) -> None:
    with pytest.raises(TokensError, match=error.replace("{", r"\{").replace("+", r"\+")) as info:
        parse_tokens(text)
    assert A not in str(info.value)


@pytest.mark.parametrize(
    ("who", "kind", "namespace", "want"),
    [
        pytest.param(TEAM_A, "Pod", "team-a", None, id="own namespace"),
        pytest.param(TEAM_A, "PodGroup", "team-a-dev", None, id="its second namespace"),
        pytest.param(TEAM_A, "LocalQueue", "team-a", None, id="a LocalQueue of its own"),
        pytest.param(
            TEAM_A,
            "Pod",
            "team-b",
            "tenant team-a may not change Pod team-b/x: namespace team-b is not one of its "
            "namespaces (team-a, team-a-dev)",
            id="another namespace",
        ),
        pytest.param(
            TEAM_A,
            "Node",
            "",
            "Node x is a cluster object: only an admin token may change it",
            id="a node",
        ),
        pytest.param(TEAM_A, "ClusterQueue", "", "cluster object", id="a ClusterQueue"),
        pytest.param(TEAM_A, "ResourceFlavor", "", "cluster object", id="a ResourceFlavor"),
        pytest.param(TEAM_A, "PriorityClass", "", "cluster object", id="a PriorityClass"),
        pytest.param(TEAM_A, "Namespace", "", "cluster object", id="a Namespace"),
        pytest.param(Identity("admin", admin=True), "Node", "", None, id="admin: a node"),
        pytest.param(Identity("admin", admin=True), "Pod", "team-b", None, id="admin: any pod"),
    ],
)
def test_refusal(who: Identity, kind: str, namespace: str, want: str | None) -> None:
    got = refusal(who, kind, namespace, "x", "change")
    if want is None or got is None:
        assert got == want
    else:
        assert want in got


def test_namespace_refusal() -> None:
    assert namespace_refusal(TEAM_A, "team-a") is None
    assert namespace_refusal(TEAM_A, "team-b") == (
        "tenant team-a may not read namespace team-b: its namespaces are team-a, team-a-dev"
    )


def test_tokens_follow_the_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text(GOOD)
    tokens = Tokens(path)
    assert tokens.identify(A) == TEAM_A
    assert tokens.identify("not-a-token-at-all") is None
    path.write_text(f"{ADMIN}: {{admin: true}}\n")
    os.utime(path, ns=(1, 1))  # a different mtime, however fast the machine
    assert tokens.identify(A) is None
    assert tokens.identify(ADMIN) == Identity("admin", admin=True)


def test_a_broken_file_keeps_the_last_good_tokens_and_a_gone_one_revokes_them(
    tmp_path: Path,
) -> None:
    """Issue 19: an unparsable tokens file used to give 500s; a deleted one left its tokens
    valid."""
    path = tmp_path / "tokens.yaml"
    path.write_text(GOOD)
    tokens = Tokens(path)
    assert tokens.identify(A) == TEAM_A
    path.write_text("{not: [yaml")
    os.utime(path, ns=(2, 2))
    assert tokens.identify(A) == TEAM_A  # no exception: the last good tokens hold
    assert "not YAML" in tokens.problem
    assert "keeping the tokens read before" in tokens.problem
    path.write_text(GOOD)
    os.utime(path, ns=(3, 3))
    assert tokens.identify(A) == TEAM_A
    assert tokens.problem == ""
    path.unlink()
    assert tokens.identify(A) is None
    assert "is gone: every token is refused" in tokens.problem
    path.write_text(GOOD)
    assert tokens.identify(A) == TEAM_A
