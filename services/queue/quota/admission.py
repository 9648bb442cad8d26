"""Quota admission (Kueue's ClusterQueues, LocalQueues and cohorts) in front of the queue.

A pending pod with the label `kueue.x-k8s.io/queue-name` is a *workload* of the ClusterQueue
its LocalQueue names (a coscheduling PodGroup's pods are one workload). It waits *gated* in its
tenant's queue, with the reason (`Quota` in `berth get pods`), until admitted; admission ungates
it (the queue's own update path: it goes to active and is scheduled as usual).

- **Exact.** Admissions and releases are the leader's (the informer's lease holder: one
  writer), each a Lua script over the quota keys (`<prefix>{quota}:admitted`, `:usage`), so
  usage in Redis is always the sum of the admitted workloads, and a restarted or new leader
  starts from it. Usage counts a workload from admission until its pods are deleted (bound
  pods included; a pod bound outside admission, e.g. applied with a nodeName, is charged when
  seen).
- **Quota.** `cohorts.py`: nominal quota, borrowing from the cohort within borrowingLimit,
  lendingLimit keeping a guaranteed part. **Flavors** as Kueue assigns them
  (`flavor_assign.py`, via `assign.py`): one flavor per resource group, skipping flavors
  whose nodeLabels contradict the pod's nodeSelector / required node affinity or whose taints
  it does not tolerate, flavorFungibility deciding when to try the next.
- **Order.** Within a ClusterQueue, priority then creation time; BestEffortFIFO lets a later
  workload that fits go before an earlier one that does not, StrictFIFO does not. A round
  (rounds.py) looks at each queue's heads only (Kueue's queue manager, heads.py/backlog.py):
  a head that does not fit is parked until quota is released in its cohort tree. Across the
  queues of a cohort, the workload whose queue would have the lowest weighted dominant
  resource share after admitting it goes first (Kueue's fair sharing, DRF).
- **Reasons.** LocalQueue or ClusterQueue missing, namespace not selected, or Kueue's flavor
  reasons, one per rejected flavor ("flavor F doesn't match node affinity", "insufficient
  unused quota for cpu in flavor F, N more needed", ...), or a gang waiting for N more pods,
  each with the pod's position in its ClusterQueue. Only a workload whose flavors need
  preemption (not one that fits no flavor at all) preempts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any, cast

import msgpack
from redis.asyncio import Redis
from redis.exceptions import RedisError

from services.queue.config import KUEUE_MODE_BERTH, QueueConfig, WaitForPodsReady
from services.queue.keys import QueueKeys
from services.queue.pod_status import cluster_queue_of
from services.queue.quota import backlog as quota_backlog
from services.queue.quota import fair as quota_fair
from services.queue.quota import ready as quota_ready
from services.queue.quota.admission_fair import LocalQueueUsage
from services.queue.quota.assign import Placement
from services.queue.quota.cohorts import Cohort, cohorts_of
from services.queue.quota.effects import requeue
from services.queue.quota.eta import Flow
from services.queue.quota.evict import drain
from services.queue.quota.heads import Backlog
from services.queue.quota.ready import Readiness
from services.queue.quota.report import report, report_gauges
from services.queue.quota.rounds import cohort_round
from services.queue.quota.scripts import QUOTA_LUA, QuotaWrites
from services.queue.quota.status import read_reserved
from services.queue.quota.workload import (
    Verdict,
    pod_signature,
    usage_field,
)
from services.queue.records import PodRecord
from shared.messaging.messages import decode_pod
from shared.models import (
    DEFAULT_SCHEDULER_NAME,
    Namespace,
    Pod,
    PodGroup,
    pod_requests,
)
from shared.models.kueue import (
    QUEUE_NAME_LABEL,
    ClusterQueue,
    LocalQueue,
    ResourceFlavor,
    kueue_mark,
)
from shared.models.kueue import (
    Cohort as KueueCohort,
)
from shared.models.quantity import parse_quantity
from shared.models.selectors import selector_matches
from shared.observability.metrics import default_metrics
from shared.store import ClusterStore

log = logging.getLogger(__name__)

Decoded = tuple[dict[str, int], float, Placement, str]
"""A pod's request, creation time, placement and signature."""


REASONS_BUDGET = 0.05
"""The share of the queue's time that working out and writing the waiting pods' reasons may
take (`Admission.reasons_took`)."""


class Admission:
    def __init__(
        self,
        redis: Redis,
        store: ClusterStore,
        prefix: str,
        *,
        reclaim: bool = True,
        scheduler_names: Collection[str] = (DEFAULT_SCHEDULER_NAME,),
        fair_sharing: Sequence[str] = (),
        lq_usage: LocalQueueUsage | None = None,
        wait_for_pods_ready: WaitForPodsReady | None = None,
        kueue_mode: str = KUEUE_MODE_BERTH,
        reasons_every: float = 0.0,
    ) -> None:
        self.reasons_every = reasons_every
        """Every waiting pod's reason (and the O(backlog) gauges) at most this often, in
        seconds; rounds in between decide and report admissions only (0: every round)."""
        self._reasons_at = float("-inf")
        self._reasons_cost = 0.0
        """What the last pass of the reasons took, in seconds (`reasons_took`)."""
        self.stale = False
        """A round ran since the reasons were last written (a later round writes them)."""
        self.backlog = Backlog()
        """The waiting workloads, per ClusterQueue, kept per pod change (heads.py)."""
        self.quota_version = 0
        """Bumped whenever usage or quota changes (a memo of unfit shapes is that old)."""
        self.round_no = 0
        """Rounds run (a reason found by a later round is fresher)."""
        self.changes = 0
        """Bumped by every pod change and reload (they may run during a round's awaits: a
        round's kept candidates are that old)."""
        self.written: dict[str, str] = {}
        """Pending pod key -> the reason last written to its `why` (not written again)."""
        self.since: dict[str, float] = {}
        """Pending pod key -> when this replica first saw it wait (monotonic)."""
        self.kueue_mode = kueue_mode
        """"berth": berth admits its pods; "kueue": Kueue does, berth admits none."""
        self.readiness = Readiness(wait_for_pods_ready or WaitForPodsReady())
        self.lq_usage = lq_usage
        """Admission fair sharing's LocalQueue usage (None: off)."""
        self.lq_weights: dict[str, float] = {}
        self.reclaim = reclaim
        self.fair_sharing = tuple(fair_sharing)
        """Fair sharing's preemption strategies (none: classical preemption)."""
        self.scheduler_names = frozenset(scheduler_names)
        """Only pods these profiles schedule are admitted (the others are not ours)."""
        self.metrics = default_metrics()
        """Evict borrowers to give a queue its nominal quota back (reclaimWithinCohort)."""
        self.redis = redis
        self.store = store
        self.keys = QueueKeys(prefix)
        self.admitted_key = self.keys.quota_admitted
        self.usage_key = self.keys.quota_usage
        self._commit = QUOTA_LUA.register(redis, "commit")
        self._unflushed: list[QuotaWrites] = []
        """Admissions and releases not yet in Redis, as runs of alike writes in the order
        they were made (`flush` writes each run with one script call)."""
        self._unsettled: list[PodRecord] = []
        """Pods a round admitted that Redis trouble kept from its verdict: the next one's."""
        self._release = QUOTA_LUA.register(redis, "release")
        self.loaded = False
        self.queues: dict[str, ClusterQueue] = {}
        self.local: dict[str, str] = {}
        """LocalQueue "ns/name" -> its ClusterQueue."""
        self.namespaces: dict[str, dict[str, str]] = {}
        self.groups: dict[str, int] = {}
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cohorts: dict[str, Cohort] = {}
        self.cohort_of: dict[str, str] = {}
        self.admitted: dict[str, dict[str, Any]] = {}
        self.pending: dict[str, PodRecord] = {}
        """Quota-managed pending pods not admitted, by pod key."""
        self.dirty = False
        """Something changed since the last round (a pod waits, quota was freed or changed)."""
        self.decoded: dict[str, tuple[int, Decoded]] = {}
        """Pod key -> (resourceVersion, its request, creation time, placement, signature)."""
        self._queue_of: dict[tuple[str, str], tuple[str | None, str]] = {}
        """(namespace, LocalQueue name) -> queue_of's answer, until the next load()."""
        self.evicting: dict[str, set[str]] = {}
        """Workload key -> the pods evicted for it and not yet released (evict once)."""
        self.evicted = 0
        self.releases = Flow()
        """Quota given back, per ClusterQueue (the estimates' throughput)."""
        self.arrivals = Flow()
        """Quota asked for by new workloads, per ClusterQueue and priority (the estimates'
        overtaking work)."""
        """What each ClusterQueue gave back lately (its throughput, for the estimates)."""
        self.requeued: dict[str, str] = {}
        """Pods admission put back to waiting (key -> uid), until admitted again."""
        self.draining: set[str] = set()
        """Pods evicted because their ClusterQueue drains (HoldAndDrain), not yet released."""
        self.evictions: Counter[tuple[str, str, str]] = Counter()
        """Evictions per (ClusterQueue, LocalQueue, reason) not yet counted by `report`."""
        self.preemptions: Counter[tuple[str, str]] = Counter()
        """Pods preempted per (preempting ClusterQueue, reason) not yet counted."""

    @classmethod
    def for_queue(cls, redis: Redis, store: ClusterStore, config: QueueConfig) -> Admission:
        return cls(
            redis,
            store,
            config.key_prefix,
            reclaim=config.reclaim_by_requeue,
            scheduler_names=config.scheduler_names,
            fair_sharing=config.fair_sharing_strategies,
            lq_usage=LocalQueueUsage(config.admission_fair_sharing_half_life_s)
            if config.admission_fair_sharing_half_life_s > 0
            else None,
            wait_for_pods_ready=config.wait_for_pods_ready,
            kueue_mode=config.kueue_mode,
            reasons_every=config.quota_reasons_interval,
        )

    # ------------------------------------------------------------------ state
    async def load(self) -> None:
        """The quota objects from the store, usage and admissions from Redis, and every
        pending managed pod (a new leader starts from what is stored)."""
        self.changes += 1
        await self.flush()  # what is admitted here is in Redis before it is read back
        self.queues = {
            q.metadata.name: q
            for q in cast(list[ClusterQueue], await self.store.list("ClusterQueue"))
        }
        local_queues = cast(list[LocalQueue], await self.store.list("LocalQueue"))
        self.local = cluster_queue_of(local_queues)
        self.lq_weights = {
            lq.key: float(parse_quantity(lq.spec.fair_sharing.weight)) for lq in local_queues
        }
        self.namespaces = {
            ns.metadata.name: dict(ns.metadata.labels)
            for ns in cast(list[Namespace], await self.store.list("Namespace"))
        }
        self.flavors = {
            f.metadata.name: f
            for f in cast(list[ResourceFlavor], await self.store.list("ResourceFlavor"))
        }
        self.groups = {
            g.key: g.spec.min_member
            for g in cast(list[PodGroup], await self.store.list("PodGroup"))
        }
        cohort_objects = cast(list[KueueCohort], await self.store.list("Cohort"))
        self.cohorts = cohorts_of(self.queues.values(), cohort_objects)
        self.cohort_of = {
            name: key for key, cohort in self.cohorts.items() for name in cohort.queues
        }
        raw = await self.redis.hgetall(self.admitted_key)
        self.admitted = {
            (k.decode() if isinstance(k, bytes) else k): msgpack.unpackb(v, raw=False)
            for k, v in raw.items()
        }
        for queue, usage in (await read_reserved(self.redis, self.keys)).items():
            cohort_key = self.cohort_of.get(queue)
            if cohort_key is not None:
                self.cohorts[cohort_key].usage[queue] = usage
        self.decoded.clear()
        self._queue_of.clear()
        first = not self.loaded
        self.loaded = True
        self.dirty = True
        if first:
            # A new leader: the pods that wait were gated by an earlier one, and the informer
            # resumes after their events. Take them from the store.
            for pod in cast(list[Pod], await self.store.list("Pod")):
                record = PodRecord.from_pod(pod)
                if self.managed(record) and not record.node_name and not self.is_admitted(record):
                    self.pending[record.key] = record
                    self.since.setdefault(record.key, time.monotonic())
        self.quota_version += 1
        quota_backlog.rebuild(self)

    def managed(self, pod: PodRecord) -> bool:
        """Whether berth admits this pod: a pod of berth's profiles in a LocalQueue, unless
        Kueue admits the cluster's pods (kueue_mode "kueue") or this one (kueue_mark)."""
        return (
            bool(pod.labels.get(QUEUE_NAME_LABEL))
            and pod.scheduler_name in self.scheduler_names
            and self.kueue_mode == KUEUE_MODE_BERTH
            and not kueue_mark(pod.labels, pod.scheduling_gates)
        )

    def is_admitted(self, pod: PodRecord) -> bool:
        record = self.admitted.get(pod.key)
        return record is not None and record.get("uid") == pod.uid

    # ------------------------------------------------------------------ events
    async def gate(self, pod: PodRecord, op: str) -> PodRecord:
        """The record the queue should take for this pod change (gated while it waits)."""
        self.changes += 1
        if not self.loaded:
            await self.load()
        if op == "delete":
            self._forget(pod.key)
            if pod.key in self.admitted:
                self.release(pod.key, pod.uid)
            return pod
        if pod.node_name:
            self._forget(pod.key)
            if self.managed(pod) and not self.is_admitted(pod):
                await self._charge_bound(pod)
            elif self.is_admitted(pod):
                self.readiness.bound.add(pod.key)
            return pod
        if not self.managed(pod):
            self._forget(pod.key)  # e.g. Kueue's gate or label came with this change
            return pod
        if self.is_admitted(pod):
            return pod
        self.pending[pod.key] = pod
        self.written.pop(pod.key, None)  # the queue writes the gate's reason with the record
        self.since.setdefault(pod.key, time.monotonic())
        quota_backlog.add(self, pod)
        self.dirty = True
        return self.waiting(pod, "waiting for quota")

    def _forget(self, key: str) -> None:
        if self.pending.pop(key, None) is not None:
            self.dirty = True
            self.decoded.pop(key, None)
            self.since.pop(key, None)
            self.written.pop(key, None)
            quota_backlog.remove(self, key)

    @staticmethod
    def waiting(pod: PodRecord, reason: str) -> PodRecord:
        # Another fingerprint while it waits: admission (the original record) is then an
        # update that ungates it (the queue's "gates removed" path).
        return replace(pod, quota_wait=reason, fingerprint=pod.fingerprint + "|quota")

    def release(self, key: str, uid: str) -> None:
        """Give back what the pod `key` (this life of it: `uid`) was charged: here at once,
        in Redis at the next `flush` (the informer's batch ends with one: hundreds of pods
        finishing per second cost one script call per batch, not one await each, which
        kept the informer behind and their quota idle)."""
        record = self.admitted.get(key)
        if record is None or (uid and record.get("uid") != uid):
            return  # not admitted, or an older life of the name (its charge is gone already)
        del self.admitted[key]
        self.dirty = True
        amounts = {f.split("|", 2)[2]: a for f, a in record["charge"].items()}
        self.releases.record(record["cq"], time.time(), amounts)
        self._writes(admit=False).args += [key, uid]
        queue = record["cq"]
        cohort = self.cohorts.get(self.cohort_of.get(queue, ""))
        if cohort is not None:
            charged = {}
            for fld, amount in record["charge"].items():
                _, flavor, resource = fld.split("|", 2)
                charged[(flavor, resource)] = amount
            cohort.add_usage(queue, charged, -1)
        self.quota_version += 1
        quota_backlog.unpark_tree(self, queue)  # room in the tree: its parked look again

    async def _charge_bound(self, pod: PodRecord) -> None:
        if self.requeued.get(pod.key) == pod.uid:  # evicted, then bound by a stale proposal
            log.info("quota: %s was bound after its eviction; evicting it again", pod.key)
            return await requeue(self.store, pod.key, pod.uid)
        queue, _ = self.queue_of(pod)
        if queue is None:
            return
        request = self._request_of(pod, queue)
        cohort = self.cohorts[self.cohort_of[queue]]
        flavors_of = cohort.queues[queue].flavors_of
        flavors = {r: flavors_of[r][0] for r in request if r in flavors_of}
        await self.write([(pod, queue, request, flavors)])

    # ------------------------------------------------------------------ rounds
    async def admit(self) -> Verdict:
        """One whole round: `admit_pods`, then `explain`."""
        verdict = await self.admit_pods()
        await self.explain(verdict)
        return verdict

    async def admit_pods(self) -> Verdict:
        """Admit what fits, cohort by cohort in DRF order, looking at the heads of each
        ClusterQueue only (heads.py). A bug in a round is logged and the round given up (the
        next change runs another): admission must never stop the queue from taking the
        informer's events."""
        self.dirty = False
        self.round_no += 1
        verdict = Verdict(admitted=self._unsettled)
        self._unsettled = []
        started = time.perf_counter()
        try:
            try:
                await self._admit_all(verdict)
            except (RedisError, OSError):
                raise
            except Exception:
                log.exception("quota admission round failed")
                self.metrics.cq_round_errors.inc()
            await self.flush()  # what the round admitted, also after a bug
        except (RedisError, OSError):
            # Redis trouble: the informer retries the batch. What this round admitted is
            # admitted here (and written by the next flush): its pods go with the next
            # round's verdict.
            self._unsettled = verdict.admitted
            self.dirty = True
            raise
        report(self, verdict, self.metrics, seconds=time.perf_counter() - started)
        return verdict

    async def explain(self, verdict: Verdict) -> float:
        """Every waiting pod's reason into `verdict` (and Kueue's gauges), when they are due:
        at most every reasons_every, as this pass costs O(backlog); a round that skips it
        leaves them `stale`. Callers ungate the admitted pods first, and the pass lets other
        tasks run after each cohort (the dispatcher, the outcomes), so that they do not wait
        for it. Returns the seconds the pass took (0 when it was not due): callers add what
        writing the reasons took and tell `reasons_took`."""
        now = time.monotonic()
        if now - self._reasons_at < self._reasons_pause():
            self.stale = True
            return 0.0
        started = time.perf_counter()
        quota_backlog.unqueued_reasons(self, verdict)
        spent = time.perf_counter() - started
        for cohort in list(self.cohorts.values()):
            started = time.perf_counter()
            quota_backlog.reasons(self, cohort, verdict)
            spent += time.perf_counter() - started
            await asyncio.sleep(0)
        self._reasons_at, self.stale = now, False
        started = time.perf_counter()
        report_gauges(self, self.metrics)
        return spent + time.perf_counter() - started

    def reasons_took(self, seconds: float) -> None:
        """The last pass of the reasons (working them out and writing them) took `seconds`:
        the next waits long enough for the reasons to take at most REASONS_BUDGET of the
        queue's time (with 10,000 pods waiting a pass takes ~0.1 s, which once a second was
        a sixth of the queue's CPU in Kueue's baseline, admissions waiting behind it)."""
        self._reasons_cost = seconds

    def _reasons_pause(self) -> float:
        return max(self.reasons_every, self._reasons_cost / REASONS_BUDGET)

    def reasons_due(self) -> float | None:
        """When the reasons written last are to be written again (monotonic), or None."""
        return self._reasons_at + self._reasons_pause() if self.stale else None

    async def _admit_all(self, verdict: Verdict) -> None:
        await drain(self)
        await quota_ready.check(self)
        quota_fair.refresh(self)
        if self.readiness.policy.timeout_s > 0:
            quota_backlog.wake_held(self)
        backlog = self.backlog
        for cohort in list(self.cohorts.values()):
            heads = [backlog.queues[q] for q in cohort.queues if q in backlog.queues]
            if any(h.live for h in heads):
                await cohort_round(self, backlog, cohort, verdict)

    async def write(
        self,
        pods: Sequence[tuple[PodRecord, str, dict[str, int], dict[str, str]]],
        group: str = "",
        created: float = 0.0,
        *,
        defer: bool = False,
    ) -> None:
        """Admit `pods` (one workload): charged here at once, and in Redis now or, with
        `defer`, at the next `flush` (a round flushes its admissions together before their
        pods are ungated: one script call instead of one await per workload, during which
        the round's earlier admissions held their quota with their pods still gated)."""
        writes = self._writes(admit=True)
        records, deltas = writes.args, writes.deltas
        for pod, queue, request, flavors in pods:
            charge = {
                usage_field(queue, flavors[r], r): a for r, a in request.items() if r in flavors
            }
            record = {
                "uid": pod.uid,
                "cq": queue,
                "charge": charge,
                "group": group,
                "prio": pod.priority,
                "at": time.time(),
                "created": created,
                "lq": f"{pod.namespace}/{pod.labels.get(QUEUE_NAME_LABEL, '')}",
            }
            records += [pod.key, msgpack.packb(record)]
            self.requeued.pop(pod.key, None)
            self.admitted[pod.key] = record
            for fld, amount in charge.items():
                deltas[fld] += amount
            cohort = self.cohorts[self.cohort_of[queue]]
            cohort.charge(queue, request, flavors)
        self.quota_version += 1
        if not defer:
            await self.flush()

    def _writes(self, *, admit: bool) -> QuotaWrites:
        """The run the next admission (`admit`) or release joins: the last one if alike."""
        if not self._unflushed or self._unflushed[-1].admit != admit:
            self._unflushed.append(QuotaWrites(admit))
        return self._unflushed[-1]

    async def flush(self) -> None:
        """Write the admissions and releases not yet in Redis, one script call per run, in
        the order they were made (a name released and admitted again, or admitted and
        released, within one flush). Taken off the queue before the calls: a flush that runs
        meanwhile (gate() charges outside the round's lock) must not write them a second
        time (usage is counted up, not set). A failed call puts the runs it did not write
        back for the next flush."""
        runs, self._unflushed = self._unflushed, []
        keys = [self.admitted_key, self.usage_key]
        for i, run in enumerate(runs):
            try:
                if run.admit:
                    args: list[Any] = [len(run.args) // 2, *run.args, len(run.deltas)]
                    for fld, amount in run.deltas.items():
                        args += [fld, amount]
                    await self._commit(keys=keys, args=args)
                else:
                    await self._release(keys=keys, args=run.args)
            except BaseException:
                self._unflushed = runs[i:] + self._unflushed
                raise

    # ------------------------------------------------------------------ helpers
    def queue_of(self, pod: PodRecord) -> tuple[str | None, str]:
        """The pod's ClusterQueue, or None and why (read per round for every waiting pod:
        kept by namespace and LocalQueue until the quota objects are loaded again)."""
        name = pod.labels.get(QUEUE_NAME_LABEL, "")
        found = self._queue_of.get((pod.namespace, name))
        if found is None:
            found = self._queue_of[(pod.namespace, name)] = self._find_queue(pod.namespace, name)
        return found

    def _find_queue(self, namespace: str, name: str) -> tuple[str | None, str]:
        queue = self.local.get(f"{namespace}/{name}")
        if queue is None:
            return None, f"LocalQueue {name} doesn't exist in namespace {namespace}"
        cq = self.queues.get(queue)
        if cq is None:
            return None, f"ClusterQueue {queue} doesn't exist"
        selector = cq.spec.namespace_selector
        labels = self.namespaces.get(namespace, {})
        if selector is None or not selector_matches(selector, labels):
            return None, f"namespace {namespace} is not selected by ClusterQueue {queue}"
        return queue, ""

    def _decode(self, pod: PodRecord, queue: str) -> Decoded:
        found = self.decoded.get(pod.key)
        cached = found[1] if found is not None and found[0] == pod.resource_version else None
        if cached is None:
            body = decode_pod(pod.body, "queued pod")
            request, placement = self._request_of(pod, queue, body), Placement.of(body)
            cached = (
                request,
                body.metadata.creation_timestamp or 0.0,
                placement,
                pod_signature(request, placement),
            )
            self.decoded[pod.key] = (pod.resource_version, cached)
        return cached

    def _request_of(self, pod: PodRecord, queue: str, body: Pod | None = None) -> dict[str, int]:
        body = body if body is not None else decode_pod(pod.body, "queued pod")
        request = {r: a for r, a in pod_requests(body).items() if a > 0}
        covered = self.cohorts[self.cohort_of[queue]].queues[queue].flavors_of
        if "pods" in covered:
            request["pods"] = 1
        return request
