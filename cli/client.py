"""A client of a running stack: objects into the store, views out of the store and the queue."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
from shared.models.kueue import ClusterQueue
from shared.redisconn import connect, ping_or_refuse
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


@dataclass(slots=True)
class PodRow:
    """One pod as `berth get pods` shows it."""

    namespace: str
    name: str
    status: str
    """Bound, Pending, Gated or Skipped."""
    node: str = ""
    queue: str = ""
    attempts: int = 0
    nominated_node: str = ""
    message: str = ""
    priority: int = 0
    tenant: str = ""
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "status": self.status,
            "node": self.node or None,
            "queue": self.queue or None,
            "attempts": self.attempts,
            "nominatedNode": self.nominated_node or None,
            "message": self.message,
            "priority": self.priority,
            "tenant": self.tenant or None,
        }


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
        pods = cast(list[Pod], await self.store.list("Pod"))
        pending = {p.key: p for p in (await self.queue.pending()).pods}
        names = self.settings.scheduler_names()
        rows = []
        for pod in pods:
            meta = pod.metadata
            row = PodRow(meta.namespace, meta.name, "Pending", priority=pod.spec.priority or 0)
            row.labels = dict(meta.labels)
            queued = pending.get(pod.key)
            if pod.spec.node_name:
                row.status, row.node = "Bound", pod.spec.node_name
            elif pod.spec.scheduler_name not in names:
                row.status = "Skipped"
                row.message = f'profile not found for scheduler name "{pod.spec.scheduler_name}"'
            if queued is not None and not pod.spec.node_name:
                row.queue, row.attempts, row.tenant = queued.queue, queued.attempts, queued.tenant
                row.message = queued.message
                if queued.queue == "gated":
                    row.status = "Quota" if "Quota" in queued.unschedulable_plugins else "Gated"
            row.nominated_node = pod.status.nominated_node_name
            rows.append(row)
        rows.sort(key=lambda r: (r.namespace, r.name))
        return rows

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

    async def cluster_queue_rows(self) -> list[dict[str, Any]]:
        """Per ClusterQueue: quota, what admission charged (usage), borrowed, the weighted
        DRF share, and how many pods wait for its quota."""
        from services.queue.quota_report import read_usage
        from shared.models.kueue import QUEUE_NAME_LABEL, LocalQueue
        from shared.quota import cohorts_of

        cohorts = cohorts_of(cast(list[ClusterQueue], await self.store.list("ClusterQueue")))
        usage = await read_usage(self.redis, self.settings.queue_prefix)
        local = {
            lq.key: lq.spec.cluster_queue
            for lq in cast(list[LocalQueue], await self.store.list("LocalQueue"))
        }
        labels = {p.key: p.metadata.labels for p in cast(list[Pod], await self.store.list("Pod"))}
        waiting: dict[str, int] = {}
        for pending in (await self.queue.pending()).pods:
            if "Quota" in pending.unschedulable_plugins and pending.key in labels:
                namespace = pending.key.split("/", 1)[0]
                lq = labels[pending.key].get(QUEUE_NAME_LABEL, "")
                queue = local.get(f"{namespace}/{lq}", "")
                waiting[queue] = waiting.get(queue, 0) + 1
        rows = []
        for cohort in cohorts.values():
            for name in cohort.queues:
                cohort.usage[name] = dict(usage.get(name, {}))
            for name, quota in cohort.queues.items():
                resources = [
                    {
                        "flavor": flavor,
                        "resource": resource,
                        "nominal": limits.nominal,
                        "borrowingLimit": limits.borrowing,
                        "lendingLimit": limits.lending,
                        "usage": cohort.used(name, (flavor, resource)),
                        "borrowed": cohort.borrowed(name, (flavor, resource)),
                    }
                    for (flavor, resource), limits in sorted(quota.limits.items())
                ]
                rows.append(
                    {
                        "name": name,
                        "cohort": quota.cohort,
                        "weight": str(quota.weight),
                        "share": cohort.share(name),
                        "resources": resources,
                        "pendingQuota": waiting.get(name, 0),
                    }
                )
        return sorted(rows, key=lambda row: str(row["name"]))

    async def cluster_queue_of(self, row: PodRow) -> str:
        """The ClusterQueue a pod's LocalQueue names ("" when none)."""
        from shared.models.kueue import QUEUE_NAME_LABEL

        local = row.labels.get(QUEUE_NAME_LABEL, "")
        if not local:
            return ""
        lq = await self.store.get("LocalQueue", row.namespace, local)
        return (
            getattr(getattr(lq, "spec", None), "cluster_queue", "")
            or f"(LocalQueue {local} missing)"
        )

    async def queue_rows(self) -> dict[str, Any]:
        from services.scheduler import read_heartbeats

        counts = await self.queue.counts()
        beats = await read_heartbeats(self.redis, self.settings.store_prefix, self.settings.cluster)
        return {
            "tenants": {
                tenant: {
                    "active": c.active,
                    "backoff": c.backoff,
                    "unschedulable": c.unschedulable,
                    "gated": c.gated,
                    "inflight": c.inflight,
                }
                for tenant, c in sorted(counts.items())
            },
            "workers": beats,
        }
