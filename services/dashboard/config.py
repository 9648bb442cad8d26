"""The dashboard's own settings (the servers and prefixes come from
shared.runtime.env.StackSettings)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from msgspec import Meta

from shared.runtime.env import ENV_DASHBOARD_HOST, ENV_DASHBOARD_PORT, ENV_TOKENS_FILE
from shared.runtime.settings import read, setting

ENV_TENANT_NODE_NAME = "BERTH_TENANT_NODE_NAME"
"""`allow`: tenant tokens may write pods with spec.nodeName (bound by name, past the scheduler
and its queues); `forbid` (the default): only admin tokens may."""

DEFAULT_PORT = 8280
DEFAULT_HOST = "127.0.0.1"


def _node_name(raw: str) -> bool:
    word = raw.strip().lower()
    if word not in ("allow", "forbid"):
        raise ValueError("want allow or forbid")
    return word == "allow"


@dataclass(frozen=True, slots=True)
class DashboardConfig:
    host: Annotated[str, setting(ENV_DASHBOARD_HOST, "the address the dashboard listens on")] = (
        DEFAULT_HOST
    )
    port: Annotated[
        int,
        Meta(ge=0, le=65535),
        setting(ENV_DASHBOARD_PORT, "the dashboard's HTTP port (0: any free port, logged)"),
    ] = DEFAULT_PORT
    """0: any free port (the one taken is logged)."""
    tokens_file: Annotated[
        str,
        setting(
            ENV_TOKENS_FILE,
            "a tokens file: the API is the stack's front door and every /api request needs a token",
        ),
    ] = ""
    """With one, the API is the stack's front door and needs tokens (services/dashboard/auth)."""
    tenant_node_name: Annotated[
        bool,
        setting(
            ENV_TENANT_NODE_NAME,
            "`allow`: tenant tokens may write pods with spec.nodeName; `forbid`: only admin "
            "tokens may",
            parse=_node_name,
            kind="allow | forbid",
            default_text="forbid",
        ),
    ] = False
    """Whether tenant tokens may write pods bound by name (ENV_TENANT_NODE_NAME)."""
    refresh_seconds: float = 1.0
    """The longest a page may show a store snapshot older than the store (one snapshot is
    loaded at most this often while the store changes)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DashboardConfig:
        """The settings in `env` (SettingsError naming a refused one)."""
        return read(cls, env)
