"""Pods berth holds for quota admission say why in the API, as the pods Kueue holds do.

Every `period` seconds the leading adapter reads, through the queue's client, the pods the queue
holds gated for quota and why (services.queue.quota.admission), and writes each reason to its
pod: PodScheduled=False with reason `SchedulingGated` (what kube-scheduler writes for a pod a
scheduling gate holds, so `kubectl get pods` shows SchedulingGated, as for a pod Kueue holds)
and the reason as message, e.g. "Waiting for quota in ClusterQueue team-a: insufficient unused
quota for cpu in flavor default-flavor, 1 more needed". The position in the queue and the
admission estimate, which change at every admission ahead, are left out of the status (it is
patched when the reason changes, not at each admission; `berth get pods` and `berth describe`
show them). No Event: kube-scheduler writes none for a gated pod.

Written only for pods the store holds as berth's, pending, and with the uid the status patch
carries as precondition (services.adapter.status.Reporter). An admitted pod's condition is
replaced by the binding (PodScheduled=True) or by its scheduling outcome.
"""

from __future__ import annotations

import asyncio
import logging
import re

from redis.exceptions import RedisError

from services.adapter.status import Report, Reporter
from services.queue.client import QueueClient
from shared.kube.events import rfc3339
from shared.runtime.retry import Backoff, Retry
from shared.store import ClusterStore

log = logging.getLogger(__name__)

REASON_GATED = "SchedulingGated"
IN_FLIGHT = 32

_WHERE = re.compile(r"^(Waiting for quota in ClusterQueue \S+) \([^()]*\): ")
_ESTIMATE = re.compile(r"; admission estimated in ~\d+s$")


def status_message(message: str) -> str:
    """The queue's reason without what changes at every admission ahead (the position in
    the queue, the admission estimate)."""
    return _ESTIMATE.sub("", _WHERE.sub(r"\1: ", message))


def quota_report(message: str) -> Report:
    """PodScheduled=False, SchedulingGated, with `message`; no Event."""
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": REASON_GATED,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": rfc3339(),
    }
    return Report({"status": {"conditions": [condition]}})


class QuotaReports:
    """Writes the quota reasons of the pods the queue holds (see the module docstring)."""

    def __init__(
        self,
        queue: QueueClient,
        store: ClusterStore,
        reporter: Reporter,
        scheduler_names: frozenset[str],
        period: float = 2.0,
    ) -> None:
        self.queue = queue
        self.store = store
        self.reporter = reporter
        self.scheduler_names = scheduler_names
        self.period = period
        self.reported: dict[str, str] = {}
        """Pod key -> the message last written to it (written again only when it changes)."""
        self._in_flight = asyncio.Semaphore(IN_FLIGHT)

    async def run(self) -> None:
        retry = Retry("adapter: reporting quota waits", log, Backoff(0.5, 30.0))
        while True:
            try:
                await self.once()
                retry.succeeded()
            except RedisError as e:
                await retry.pause(e)
                continue
            except Exception:  # a bug here must not end the adapter's leadership
                log.exception("adapter: reporting quota waits failed")
            await asyncio.sleep(self.period)

    async def once(self) -> int:
        """One pass: the reasons that changed are written; returns how many."""
        waits = {
            key: status_message(message)
            for key, message in (await self.queue.quota_waits()).items()
        }
        for key in [k for k in self.reported if k not in waits]:
            del self.reported[key]  # admitted, or gone
        changed = [(key, text) for key, text in waits.items() if self.reported.get(key) != text]
        written = await asyncio.gather(*(self._write(key, text) for key, text in changed))
        return sum(written)

    async def _write(self, key: str, message: str) -> bool:
        namespace, _, name = key.partition("/")
        async with self._in_flight:
            pod = await self.store.get_pod(namespace, name)
            if (
                pod is None
                or pod.spec.node_name
                or pod.spec.scheduler_name not in self.scheduler_names
            ):
                return False
            await self.reporter.deliver(
                namespace, name, pod.metadata.uid, quota_report(message), pod.spec.scheduler_name
            )
        self.reported[key] = message
        return True
