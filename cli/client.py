"""A client of a running stack: objects into the store, views out of the store and the queue."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from shared.env import ENV_KAFKA_BOOTSTRAP, ENV_REDIS_URL, ENV_STATE, StackError, StackSettings
from shared.models import (
    KubeObject,
    Manifests,
    Pod,
    PriorityClass,
    resolve_priorities,
)
from shared.pod_status import PodRow, pod_rows
from shared.redisconn import check_redis, connect
from shared.store import ClusterStore, object_key


def state_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get(ENV_STATE) or Path.home() / ".berth" / "stack.json")


def write_state(settings: StackSettings, path: Path) -> None:
    """The running stack's settings for the client commands, readable by this user only
    (its Redis URL may carry a password): written to a 0600 file, then moved in place."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps({"env": settings.env(), "pid": os.getpid()}, indent=2))
    os.chmod(temporary, 0o600)  # O_CREAT's mode is masked by the umask, never widened
    os.replace(temporary, path)


def read_settings(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> StackSettings:
    """A client's settings: --redis-url/--kafka-bootstrap, else the environment, else the
    state file of a running `berth up`."""
    env = os.environ if env is None else env
    merged: dict[str, str] = {}
    path = state_path(env)
    if path.exists():
        with contextlib.suppress(OSError, ValueError):
            merged.update(json.loads(path.read_text())["env"])
    merged.update({k: v for k, v in env.items() if k.startswith("BERTH_") and v})
    if getattr(args, "redis_url", None):
        merged[ENV_REDIS_URL] = args.redis_url
    if getattr(args, "kafka_bootstrap", None):
        merged[ENV_KAFKA_BOOTSTRAP] = args.kafka_bootstrap
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
        from services.queue.config import QueueConfig
        from services.queue.store import QueueStore

        self.settings = settings
        self.warnings: list[str] = []
        """What the last apply warned about (pods whose own priority disagrees with their
        class), one line each."""
        self.redis = connect(settings.redis_url, settings.redis_security)
        self.store = ClusterStore(
            self.redis, cluster=settings.cluster, prefix=settings.store_prefix
        )
        self.queue = QueueStore(
            self.redis,
            QueueConfig(
                key_prefix=settings.queue_prefix,
                topics=settings.topics,
                single_tenant=settings.single_tenant,
            ),
        )
        self.published: dict[str, float] = {}
        """pod uid -> when it was first applied (epoch seconds): the start of its
        enqueue-to-bound latency."""

    async def close(self) -> None:
        await self.redis.aclose()

    async def __aenter__(self) -> StackClient:
        """Checks that Redis answers (ConnectError, one line naming the URL, if not)."""
        try:
            await check_redis(self.redis, self.settings.redis_url, self.settings.redis_security)
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---------------------------------------------------------------------- writes
    async def apply(self, manifests: Manifests, *, batch: int = 2000) -> list[str]:
        """Store every object (dependencies first; the queue hears of them from the store's
        change stream); returns
        "kind/name created|configured" lines. Pod priorities are resolved against the stored
        PriorityClasses and the manifests' own (as admission would)."""
        stored_classes = cast(list[PriorityClass], await self.store.list("PriorityClass"))
        new_names = {pc.metadata.name for pc in manifests.priority_classes}
        self.warnings = resolve_priorities(
            manifests,
            [
                *manifests.priority_classes,
                *(c for c in stored_classes if c.metadata.name not in new_names),
            ],
        )
        lines: list[str] = []
        objects = list(manifests.objects())
        if len(objects) > batch:
            await self.store.check_apply(objects)  # all or nothing across the batches
        for start in range(0, len(objects), batch):
            lines += await self._apply_batch(objects[start : start + batch])
        return lines

    async def _apply_batch(self, objects: list[KubeObject]) -> list[str]:
        existed = await self._present(objects)
        applied = await self.store.apply(objects)
        lines = []
        now = time.time()
        for obj, done in zip(objects, applied, strict=True):
            obj.metadata.resource_version = done.resource_version
            obj.metadata.uid = done.uid
            verb = "configured" if (done.kind, done.key) in existed else "created"
            lines.append(f"{done.kind.lower()}/{done.key} {verb}")
            if isinstance(obj, Pod):
                self.published.setdefault(done.uid, now)
        return lines

    async def _present(self, objects: Sequence[KubeObject]) -> set[tuple[str, str]]:
        """(kind, key) of the objects about to be applied that the store already has."""
        wanted: dict[str, list[str]] = {}
        for obj in objects:
            kind = type(obj).__name__
            key = object_key(kind, obj.metadata.namespace, obj.metadata.name)
            wanted.setdefault(kind, []).append(key)
        out: set[tuple[str, str]] = set()
        for kind, keys in wanted.items():
            present = await self.redis.hmget(self.store.keys.meta(kind), keys)
            out.update((kind, key) for key, meta in zip(keys, present, strict=True) if meta)
        return out

    async def delete(self, kind: str, namespace: str, name: str) -> bool:
        """Delete an object from the store (the queue hears of it from the change stream)."""
        found = await self.store.get(kind, namespace, name)
        if found is None:
            return False
        await self.store.delete(kind, namespace, name, uid=found.metadata.uid)
        return True

    # ----------------------------------------------------------------------- reads
    async def pod_rows(self) -> list[PodRow]:
        snapshot = await self.store.load_snapshot()
        pending = (await self.queue.pending()).pods
        return pod_rows(snapshot, pending, self.settings.scheduler_names())

    async def node_rows(self) -> list[dict[str, Any]]:
        snapshot = await self.store.load_snapshot()
        rows = []
        for node in sorted(snapshot.nodes, key=lambda n: n.metadata.name):
            name = node.metadata.name
            usage = snapshot.usage.get(name)
            alloc = node.status.allocatable
            requested = dict(usage.requested) if usage is not None else {}
            rows.append(
                {
                    "name": name,
                    "status": "SchedulingDisabled" if node.spec.unschedulable else "Ready",
                    "zone": node.metadata.labels.get("topology.kubernetes.io/zone", ""),
                    "pods": usage.pods if usage is not None else 0,
                    "allocatable": dict(alloc),
                    "requested": requested,
                    "taints": [f"{t.key}={t.value}:{t.effect}" for t in node.spec.taints],
                }
            )
        return rows

    async def queue_rows(self) -> dict[str, Any]:
        from services.scheduler import read_heartbeats

        counts = await self.queue.counts()
        beats = await read_heartbeats(self.redis, self.settings.store_prefix, self.settings.cluster)
        return {
            "tenants": {tenant: c.to_json() for tenant, c in sorted(counts.items())},
            "workers": beats,
        }
