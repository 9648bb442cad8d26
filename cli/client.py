"""A client of a running stack: objects into the store, views out of the store and the queue."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from services.queue.client import PodRow, QueueClient, pod_rows
from shared.models import (
    Manifests,
)
from shared.runtime.env import (
    ENV_KAFKA_BOOTSTRAP,
    ENV_REDIS_URL,
    ENV_STATE,
    StackError,
    StackSettings,
)
from shared.runtime.redisconn import connect, ping_or_refuse
from shared.store import ClusterStore
from shared.store.objects import (
    APPLY_BATCH,
    apply_manifests,
    delete_object,
    node_rows,
    read_heartbeats,
)


def state_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get(ENV_STATE) or Path.home() / ".berth" / "stack.json")


def state_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the running `berth up` wrote to its state file ({} without one)."""
    path = state_path(env)
    if not path.exists():
        return {}
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        return dict(json.loads(path.read_text())["env"])
    return {}


def write_state(
    settings: StackSettings, path: Path, extra: Mapping[str, str] | None = None
) -> None:
    """The running stack's settings (and `extra` variables, e.g. its API front door) for
    the client commands, readable by this user only (its Redis URL may carry a password):
    written to a 0600 file, then moved in place."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        state = {"env": {**settings.env(), **(extra or {})}, "pid": os.getpid()}
        out.write(json.dumps(state, indent=2))
    os.chmod(temporary, 0o600)  # O_CREAT's mode is masked by the umask, never widened
    os.replace(temporary, path)


def read_settings(args: object, env: Mapping[str, str] | None = None) -> StackSettings:
    """A client's settings: --redis-url/--kafka-bootstrap, else the environment, else the
    state file of a running `berth up`."""
    env = os.environ if env is None else env
    path = state_path(env)
    merged = state_env(env)
    merged.update({k: v for k, v in env.items() if k.startswith("BERTH_") and v})
    for flag, name in (("redis_url", ENV_REDIS_URL), ("kafka_bootstrap", ENV_KAFKA_BOOTSTRAP)):
        value = getattr(args, flag, None)
        if value:
            merged[name] = str(value)
    try:
        return StackSettings.from_env(merged)
    except StackError:
        raise StackError(
            f"no running stack: start one with `berth up` (state file {path}), or set "
            f"{ENV_REDIS_URL} and {ENV_KAFKA_BOOTSTRAP}"
        ) from None


class StackClient:
    """Objects in, views out, for a running stack (see the module docstring)."""

    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        self.warnings: list[str] = []
        """What the last apply warned about (pods whose own priority disagrees with their
        class), one line each."""
        self.redis = connect(settings.redis_url, settings.redis_security)
        self.store = ClusterStore(
            self.redis, cluster=settings.cluster, prefix=settings.store_prefix
        )
        self.queue = QueueClient(self.redis, settings.queue_prefix)
        self.published: dict[str, float] = {}
        """pod uid -> when it was first applied (epoch seconds): the start of its
        enqueue-to-bound latency."""

    async def close(self) -> None:
        await self.redis.aclose()

    async def __aenter__(self) -> StackClient:
        """Checks that Redis answers: a refusal no retry fixes (TLS, password) is a
        ConnectError naming the URL; Redis being away is its ConnectionError (the commands
        say so in one line: retry once `berth up` has restarted it)."""
        try:
            await ping_or_refuse(self.redis, self.settings.redis_url, self.settings.redis_security)
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---------------------------------------------------------------------- writes
    async def apply(
        self, manifests: Manifests, *, batch: int = APPLY_BATCH, admission: bool = False
    ) -> list[str]:
        """Store every object (shared.store.objects.apply_manifests; `admission`: a user's write,
        admitted as the API server would); returns "kind/name created|configured" lines, keeps
        the warnings and when each pod was applied."""
        # Here, not at the top: the kubelet's node check loads the scheduling framework (numpy),
        # which `berth get` and `describe` never need.
        from scheduling.kubelet import kubelet_refusal

        report = await apply_manifests(
            self.store, manifests, batch=batch, admission=admission, node_check=kubelet_refusal
        )
        self.warnings = report.warnings
        for uid, at in report.pods.items():
            self.published.setdefault(uid, at)
        return report.lines

    async def delete(self, kind: str, namespace: str, name: str) -> bool:
        """Delete an object from the store (the queue hears of it from the change stream)."""
        return await delete_object(self.store, kind, namespace, name)

    # ----------------------------------------------------------------------- reads
    async def pod_rows(self) -> list[PodRow]:
        snapshot = await self.store.load_snapshot()
        pending = (await self.queue.pending()).pods
        return pod_rows(snapshot, pending, self.settings.scheduler_names())

    async def node_rows(self) -> list[dict[str, Any]]:
        return node_rows(await self.store.load_snapshot())

    async def cluster_queue_rows(self) -> list[dict[str, Any]]:
        """Per ClusterQueue: quota, usage (bound pods), reserved (charged by admission),
        borrowed, lent, the weighted DRF share and pending pods by reason (the dashboard's
        /api/clusterqueues)."""
        from services.dashboard.data import DashboardData

        data = await DashboardData(self.redis, self.settings).cluster_queues()
        return list(data["clusterQueues"])

    async def queue_rows(self) -> dict[str, Any]:
        counts = await self.queue.counts()
        beats = await read_heartbeats(self.redis, self.settings.store_prefix, self.settings.cluster)
        return {
            "tenants": {tenant: c.to_json() for tenant, c in sorted(counts.items())},
            "workers": {name: beat.as_json() for name, beat in beats.items()},
        }
