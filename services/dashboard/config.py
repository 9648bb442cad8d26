"""The dashboard's own settings (the servers and prefixes come from shared.env.StackSettings)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.env import ENV_DASHBOARD_HOST, ENV_DASHBOARD_PORT, ENV_TOKENS_FILE, StackError

ENV_TENANT_NODE_NAME = "BERTH_TENANT_NODE_NAME"
"""`allow`: tenant tokens may write pods with spec.nodeName (bound by name, past the scheduler
and its queues); `forbid` (the default): only admin tokens may."""

DEFAULT_PORT = 8280
DEFAULT_HOST = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class DashboardConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    """0: any free port (the one taken is logged)."""
    tokens_file: str = ""
    """With one, the API is the stack's front door and needs tokens (services/dashboard/auth)."""
    tenant_node_name: bool = False
    """Whether tenant tokens may write pods bound by name (ENV_TENANT_NODE_NAME)."""
    refresh_seconds: float = 1.0
    """The longest a page may show a store snapshot older than the store (one snapshot is
    loaded at most this often while the store changes)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DashboardConfig:
        raw = env.get(ENV_DASHBOARD_PORT) or str(DEFAULT_PORT)
        try:
            port = int(raw)
        except ValueError:
            raise StackError(f"{ENV_DASHBOARD_PORT}={raw!r}: not a port number") from None
        if not 0 <= port <= 65535:
            raise StackError(f"{ENV_DASHBOARD_PORT}={raw!r}: not a port number")
        node_name = (env.get(ENV_TENANT_NODE_NAME) or "forbid").strip().lower()
        if node_name not in ("allow", "forbid"):
            raise StackError(f"{ENV_TENANT_NODE_NAME}={node_name!r}: want allow or forbid")
        return cls(
            host=env.get(ENV_DASHBOARD_HOST) or DEFAULT_HOST,
            port=port,
            tokens_file=env.get(ENV_TOKENS_FILE) or "",
            tenant_node_name=node_name == "allow",
        )
