"""The embedded Redis's configuration file (cli/servers.py starts Redis with it).

One 0600 file holds everything: the port, loopback binding, the AOF settings and the data
directory, and `requirepass` when BERTH_REDIS_PASSWORD is set (a password on the command
line would be readable by every local user). A Redis restarted with the same file listens
on the same port and reloads its AOF from the same directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from shared.runtime.env import ENV_REDIS_FSYNC, REDIS_FSYNC_POLICIES


def redis_config(port: int, data_dir: Path, fsync: str, password: str = "") -> str:
    """The embedded Redis's redis.conf: loopback only, AOF on (`fsync`: its appendfsync
    policy) in `data_dir`, so that a Redis restarted with the same file reloads what it
    acknowledged; no RDB snapshots (the AOF is the only copy, rewritten in the background as
    it grows, with an RDB preamble); `requirepass` when a password is set."""
    if fsync not in REDIS_FSYNC_POLICIES:
        raise ValueError(
            f"{ENV_REDIS_FSYNC}={fsync!r}: must be one of {', '.join(REDIS_FSYNC_POLICIES)}"
        )
    lines = [
        f"port {port}",
        "bind 127.0.0.1",
        "daemonize no",
        f"dir {_redis_config_string(str(data_dir))}",
        'save ""',
        "appendonly yes",
        f"appendfsync {fsync}",
        # A crash while the AOF was being written leaves a torn last command: load what
        # precedes it (the command was never acknowledged) rather than refuse to start.
        "aof-load-truncated yes",
    ]
    if password:
        lines.append(f"requirepass {_redis_config_string(password)}")
    return "\n".join(lines) + "\n"


def redis_fsync_policy(env: Mapping[str, str], override: str | None = None) -> str:
    """`override`, else $BERTH_REDIS_FSYNC, else everysec."""
    return override or env.get(ENV_REDIS_FSYNC) or "everysec"


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path`, readable by this user only (it may hold a password)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)  # an existing file keeps its mode through O_CREAT


def _redis_config_string(value: str) -> str:
    """`value` as a double-quoted redis.conf string."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
