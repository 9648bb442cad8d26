"""Preempt proposals: the victims a worker's PostFilter chose are evicted, the preemptor is
nominated to the node and reported unschedulable with the nomination, as upstream does.

The binder refuses a proposal whose victims are not the pod's to evict (forged, or a duplicate
of one that ended: services/binder/refusals.py) or that its own view, caught up with the
store, does not justify (checks.ProfileChecks.preemption_refusal). Victims are evicted through
`shared.lifecycle.eviction.evict` (PodDisruptionBudget bookkeeping) and deleted, or, in
Kubernetes mode, through the API server's eviction subresource.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from scheduling.cache.cache import ClusterCache
from scheduling.plugins import binding
from services.binder.checks import Checks
from services.binder.config import BinderConfig
from services.binder.kube_api import KubeWriter
from services.binder.refusals import victims_refusal
from services.binder.report import CYCLE, Emitter, Reporter, mark_replay, stored_pod
from shared.lifecycle.eviction import evict
from shared.messaging.proposals import Proposal
from shared.models import Pod, PodDisruptionBudget, priority_of
from shared.observability.logs import DecisionLog
from shared.observability.tracing import add_victim_events
from shared.store import ClusterStore, PodCharge
from shared.store.records import unpack

log = logging.getLogger(__name__)


class Preemption:
    """The binder's handling of preempt proposals."""

    def __init__(
        self,
        store: ClusterStore,
        view: ClusterCache,
        checks: Checks,
        config: BinderConfig,
        report: Reporter,
        emitter: Emitter,
        stats: Counter[str],
        decisions: DecisionLog,
        kube: KubeWriter | None,
    ) -> None:
        self.store = store
        self.bindings = store.bindings
        self.view = view
        self.checks = checks
        self.config = config
        self.report = report
        self.emitter = emitter
        self.stats = stats
        self.decisions = decisions
        self.kube = kube

    async def run(self, p: Proposal) -> None:
        """Carry out a preempt proposal (see the module's docstring); never binds."""
        pod = await stored_pod(self.store, p)
        if pod is None:
            await self.report.outcome(p, "error", message=f"pod {p.pod_key} ({p.uid}) not found")
            return
        victims: list[Pod] = []
        for victim_ref in p.victims:
            namespace, name = victim_ref.pod_key.split("/", 1)
            victim = await self.store.get_pod(namespace, name)
            if victim is not None and victim.metadata.uid == victim_ref.uid:
                victims.append(victim)  # the others are gone already
        refusal = victims_refusal(p, pod, victims)
        if refusal:
            self.stats["refused"] += 1
            log.warning("refused preemption for %s: %s", p.pod_key, refusal)
            await self.emitter.refused(p, refusal)
            # Forged or a duplicate of one that ended: no worker waits on it, nothing is
            # written.
            message = f"preemption refused: {refusal}"
            mark_replay()  # not an attempt's end: counted (if ever) when it ended
            await self.report.outcome(p, "error", message=message, stream_end=False)
            return
        unjustified = await self._unjustified(p, pod, victims)
        if unjustified:
            self.stats["unjustified"] += 1
            log.warning("refused preemption for %s: %s", p.pod_key, unjustified)
            await self.emitter.refused(p, unjustified)
            # Perhaps only stale (the cluster changed since the worker looked): the pod
            # tries again after a backoff, and the worker waiting on it stops waiting.
            await self.report.outcome(p, "error", message=f"preemption refused: {unjustified}")
            return
        status, _, seen = await self.bindings.claim(p.uid, p.attempt, "p")
        if status == "stale":
            self.stats["stale"] += 1
            return
        if status == "dup":
            if seen != "p":
                await self.report.replay(p, seen)
                return
            # Claimed by a binder that may have died half-way: evicting the victims left,
            # nominating and reporting are idempotent, so do it all again.
            self.stats["duplicate"] += 1
        pods = self.view.bound_pods()
        pdbs: dict[str, PodDisruptionBudget] = dict(self.view.pdbs)
        evicted = 0
        if self.kube is not None:
            stopped = await self._api_evict(p, pod, victims)
            if stopped is not None:
                await self.report.outcome(
                    p, "unschedulable", message=stopped, plugins=p.unschedulable_plugins
                )
                return
            victims = []  # the adapter deletes them from the store once the server has
        for victim in victims:
            namespace, name = victim.metadata.namespace, victim.metadata.name
            answer = evict(victim, list(pdbs.values()), pods)
            if not answer.allowed:
                if self.config.preemption_honors_pdb:
                    await self.report.outcome(
                        p,
                        "unschedulable",
                        message=f"preemption stopped: {victim.key}: {answer.message}",
                        plugins=p.unschedulable_plugins,
                    )
                    return
                log.info("preempting %s despite its budget: %s", victim.key, answer.message)
            elif answer.pdb is not None and answer.status is not None:
                budget = replace(answer.pdb, status=answer.status)
                await self.store.apply([budget])
                pdbs[budget.key] = budget
            uid = victim.metadata.uid
            if await self.store.delete("Pod", namespace, name, uid=uid) is None:
                continue
            evicted += 1
            pods = [q for q in pods if q.metadata.uid != uid]
        await self.bindings.nominate(
            p.pod_key, p.uid, p.node_name, priority_of(pod), PodCharge.of(pod)
        )
        await self._clear_lower_nominations(p, priority_of(pod))
        self.stats["preempted"] += evicted
        cycle = CYCLE.get()
        if cycle is not None:
            evicted_refs = [(v.pod_key, v.uid) for v in p.victims]
            add_victim_events(cycle.span, evicted_refs, p.node_name)
        self.decisions.info(
            "preemption",
            "preempted %d pod(s) on %s for %s: %s",
            len(p.victims),
            p.node_name,
            p.pod_key,
            ", ".join(v.pod_key for v in p.victims),
            pod=p.pod_key,
            node=p.node_name,
            victims=[v.pod_key for v in p.victims],
        )
        await self.report.outcome(
            p,
            "unschedulable",
            message=p.message,
            plugins=p.unschedulable_plugins,
            nominated=p.node_name,
        )

    async def _unjustified(self, p: Proposal, pod: Pod, victims: Sequence[Pod]) -> str:
        """Why this binder's own view, caught up with the store, does not call for evicting
        `victims` for `pod` ("" when it does; see checks.ProfileChecks.preemption_refusal)."""
        target = await self.store.resource_version()
        if not await self.view.wait_for(target, self.config.view_timeout_seconds):
            return "the binder's view of the cluster is behind"
        profile = self.checks.for_pod(pod)
        return profile.preemption_refusal(pod, p.node_name, victims)

    async def _api_evict(self, p: Proposal, pod: Pod, victims: Sequence[Pod]) -> str | None:
        """Kubernetes mode: evict each victim through the API (PodDisruptionBudgets are the
        server's to enforce). Returns why preemption stopped, or None."""
        assert self.kube is not None
        for victim in victims:
            answer = await self.kube.evict(victim, pod, p.node_name)
            if answer.result != "ok":
                return f"preemption stopped: {victim.key}: {answer.message}"
            self.stats["preempted"] += 1
        return None

    async def _clear_lower_nominations(self, p: Proposal, priority: int) -> None:
        """Pods of lower priority nominated to the node the preemptor took lose their
        nomination, so they look elsewhere (upstream prepareCandidate; the dry run does the
        same)."""
        keys = self.store.keys
        nominated = await self.store.redis.hgetall(keys.nominated(p.node_name))
        for raw_key, raw_record in nominated.items():
            key = raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)
            record = raw_record if isinstance(raw_record, bytes) else raw_record.encode()
            if key == p.pod_key or not binding.loses_nomination(
                unpack(record).get("prio", 0), priority
            ):
                continue
            meta = await self.store.redis.hget(keys.meta("Pod"), key)
            if meta is None:
                continue
            uid = (meta.decode() if isinstance(meta, bytes) else str(meta)).partition(" ")[2]
            await self.bindings.nominate(key, uid, "", 0, PodCharge())
            self.stats["nominations_cleared"] += 1
