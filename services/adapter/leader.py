"""Leader election through a coordination.k8s.io/v1 Lease, as client-go's leaderelection.

One adapter replica at a time writes the store from the API; the others wait. The rules are
client-go's, with its defaults (kube-scheduler's `leaderElection` settings):

- A candidate takes the Lease when nobody holds it, or when the holder has not renewed it for
  `lease_duration` *as observed locally*: the time is measured from when this replica last saw
  the Lease's record change, not from the renewTime written by another machine's clock.
- Every write is a compare-and-swap on the Lease's resourceVersion (a 409 means another
  replica wrote first; we read again on the next try).
- The leader renews every `retry_period`; when it cannot renew for `renew_deadline`, it has
  lost the lease and must stop acting as leader (`lost` is set; the adapter exits, as
  kube-scheduler does, and its supervisor starts it again as a candidate). The deadline
  cuts a renewal off (a slow or hung API server does not hold it up past the deadline), and
  it counts from when the last successful renewal *started*: the Lease it wrote cannot be
  older than that, so a candidate (waiting lease_duration > renew_deadline from when it saw
  that write) cannot lead before this replica stopped.
- Taking the Lease from another holder increments leaseTransitions.
- A replica that stops releases the Lease (an empty holder), so the next one need not wait.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.config.types import LeaderElection
from shared.kube.client import KubeApi, KubeApiError, KubeUnavailableError
from shared.observability.metrics import default_metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseSettings:
    namespace: str = "kube-system"
    name: str = "berth-adapter"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    @classmethod
    def from_config(
        cls, config: LeaderElection, *, namespace: str = "", name: str = ""
    ) -> LeaseSettings:
        """The configuration's `leaderElection` (validated by the loader); its Lease name
        and namespace when set, else `name`/`namespace` (the environment's), else berth's
        defaults."""
        return cls(
            namespace=config.resource_namespace or namespace or cls.namespace,
            name=config.resource_name or name or cls.name,
            lease_duration=config.lease_duration,
            renew_deadline=config.renew_deadline,
            retry_period=config.retry_period,
        )


def _micro_time(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        api: KubeApi,
        identity: str,
        settings: LeaseSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.identity = identity
        self.settings = settings if settings is not None else LeaseSettings()
        self.clock = clock
        self.wall = wall
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()
        self._observed: tuple[str, str, float] = ("", "", 0.0)
        """(holderIdentity, renewTime) last seen, and the local time it was first seen."""
        self._renewed_at = clock()
        """When the last successful acquire or renewal started."""

    async def acquire(self) -> None:
        """Return once this replica holds the Lease."""
        while True:
            if await self._attempt(self.settings.renew_deadline):
                break
            await asyncio.sleep(self.settings.retry_period)
        log.info(
            "%s leads (Lease %s/%s)", self.identity, self.settings.namespace, self.settings.name
        )
        self.leading.set()
        default_metrics().leader.labels(lease=self.settings.name).set(1)

    async def hold(self) -> None:
        """Renew until the Lease cannot be renewed for renew_deadline; then set `lost`."""
        s = self.settings
        while True:
            await asyncio.sleep(s.retry_period)
            left = self._renewed_at + s.renew_deadline - self.clock()
            if left > 0 and await self._attempt(left):
                continue
            if self.clock() - self._renewed_at >= s.renew_deadline:
                log.error(
                    "%s lost the Lease (not renewed for %.1fs)",
                    self.identity,
                    self.clock() - self._renewed_at,
                )
                self.leading.clear()
                default_metrics().leader.labels(lease=self.settings.name).set(0)
                self.lost.set()
                return

    async def _attempt(self, limit: float) -> bool:
        """One try, cut off after `limit` seconds; a success records when it started."""
        started = self.clock()
        try:
            ok = await asyncio.wait_for(self.try_acquire_or_renew(), limit)
        except TimeoutError:
            log.warning(
                "Lease %s/%s: no answer within %.1fs",
                self.settings.namespace,
                self.settings.name,
                limit,
            )
            return False
        if ok:
            self._renewed_at = started
        return ok

    async def try_acquire_or_renew(self) -> bool:
        s = self.settings
        try:
            lease = await self.api.get_lease(s.namespace, s.name)
            now = self.wall()
            if lease is None:
                await self.api.create_lease(self._record(None, now))
                return True
            spec = lease.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            renewed = str(spec.get("renewTime") or "")
            if (holder, renewed) != self._observed[:2]:
                self._observed = (holder, renewed, self.clock())
            duration = float(spec.get("leaseDurationSeconds") or s.lease_duration)
            expired = self.clock() - self._observed[2] >= duration
            if holder and holder != self.identity and not expired:
                return False
            await self.api.replace_lease(self._record(lease, now))
        except KubeApiError as e:
            if e.code not in (404, 409):
                log.warning("Lease %s/%s: %s", s.namespace, s.name, e)
            return False
        except KubeUnavailableError as e:
            log.warning("Lease %s/%s: API unreachable (%s)", s.namespace, s.name, e)
            return False
        return True

    async def release(self) -> None:
        """Give the Lease up (client-go's ReleaseOnCancel, which kube-scheduler sets): an
        empty holder lets the next candidate take it at once instead of after
        lease_duration."""
        if not self.leading.is_set():
            return
        self.leading.clear()
        s = self.settings
        try:
            lease = await self.api.get_lease(s.namespace, s.name)
            spec = (lease or {}).get("spec") or {}
            if lease is None or spec.get("holderIdentity") != self.identity:
                return
            released = self._record(lease, self.wall())
            released["spec"]["holderIdentity"] = ""
            released["spec"]["leaseDurationSeconds"] = 1
            await self.api.replace_lease(released)
            log.info("%s released the Lease", self.identity)
        except (KubeApiError, KubeUnavailableError) as e:
            log.warning("could not release Lease %s/%s: %s", s.namespace, s.name, e)

    def _record(self, lease: dict[str, Any] | None, now: float) -> dict[str, Any]:
        s = self.settings
        spec: dict[str, Any] = dict((lease or {}).get("spec") or {})
        taking_over = spec.get("holderIdentity") != self.identity
        if taking_over:
            spec["acquireTime"] = _micro_time(now)
            if lease is not None and spec.get("holderIdentity"):
                spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            spec.setdefault("leaseTransitions", 0)
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = int(s.lease_duration)
        spec["renewTime"] = _micro_time(now)
        meta: dict[str, Any] = {"name": s.name, "namespace": s.namespace}
        if lease is not None:
            meta["resourceVersion"] = (lease.get("metadata") or {}).get("resourceVersion")
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": spec,
        }
