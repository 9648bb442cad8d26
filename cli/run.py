"""`berth run`: an ephemeral stack, an observer of its topics, and the report."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from cli.client import StackClient
from cli.commands import Args, invoke
from cli.servers import (
    DevServers,
)
from cli.supervisor import RunningStack, Stack, start_stack
from shared.messaging.kafka import Topics, assign_all, make_reader, message_verifier, refusal
from shared.messaging.message_auth import Verifier
from shared.messaging.wire import MessageError, expect_message
from shared.models import ManifestError, Manifests, Pod, load_manifests
from shared.models.schema import fields_of
from shared.runtime.env import StackError, StackSettings
from shared.runtime.retry import Retry
from shared.runtime.security import KafkaSecurity, SecurityError

if TYPE_CHECKING:
    from shared.messaging.messages import Outcome
    from shared.messaging.proposals import Proposal

log = logging.getLogger(__name__)

RUN_TENANT = "run"
"""`berth run`'s one tenant queue (kube-scheduler has one queue)."""


@functools.cache
def _wire(cls: type, attr: str) -> str:
    """The wire name of field `attr` of message class `cls`."""
    return next(spec.json for spec in fields_of(cls) if spec.attr == attr)


@dataclass(slots=True)
class RunObserver:
    """Reads `berth.schedule`, `berth.proposals` and `berth.outcomes` from the start (no
    group): preemptions (victims, nominated node), conflicts, and when each pod was first
    dispatched, proposed and bound (broker timestamps), for latency figures."""

    bootstrap: str
    topics: Topics
    security: KafkaSecurity = field(default_factory=KafkaSecurity)
    victims: dict[str, list[str]] = field(default_factory=dict)
    nominated: dict[str, str] = field(default_factory=dict)
    bound_at: dict[str, float] = field(default_factory=dict)
    """pod uid -> broker timestamp of its "scheduled" outcome (epoch seconds)."""
    results: Counter[str] = field(default_factory=Counter)
    conflicts: Counter[str] = field(default_factory=Counter)
    """Conflict messages (the binder's reasons)."""
    dispatched_at: dict[str, float] = field(default_factory=dict)
    proposed_at: dict[str, float] = field(default_factory=dict)
    _consumer: AIOKafkaConsumer | None = None
    _task: asyncio.Task[None] | None = None
    _verifier: Verifier | None = None

    async def start(self) -> None:
        self._verifier = message_verifier(self.security, self.topics)
        consumer = make_reader(
            self.bootstrap, security=self.security, max_partition_fetch_bytes=16 * 1024 * 1024
        )
        await consumer.start()
        topics = self.topics
        assigned = await assign_all(consumer, [topics.schedule, topics.proposals, topics.outcomes])
        await consumer.seek_to_beginning(*assigned)
        self._consumer = consumer
        self._task = asyncio.create_task(self._read(), name="run-observer")

    async def _read(self) -> None:
        assert self._consumer is not None
        retry = Retry("run observer: reading the topics", log)
        while True:
            try:
                batches = await self._consumer.getmany(timeout_ms=200, max_records=20_000)
                retry.succeeded()
            except KafkaError as exc:  # the broker is away (it is restarted): wait for it
                await retry.pause(exc)
                continue
            verifier = self._verifier
            for tp, records in batches.items():
                for record in records:
                    if refusal(verifier, record):
                        continue  # forged: not part of the run
                    at = record.timestamp / 1000
                    try:
                        if tp.topic == self.topics.schedule:
                            self._dispatched(record.value, at)
                        elif tp.topic == self.topics.proposals:
                            self._proposals(record.value, at)
                        else:
                            self._outcomes(record.value, at)
                    except MessageError:
                        continue

    # The observer runs beside the services it measures, on the same cores: the messages it
    # only times (every schedule request, a binding proposal, a "scheduled" outcome) are read
    # for their uid, not decoded whole (which was most of a bench's own CPU); the rest are.
    def _dispatched(self, data: bytes, at: float) -> None:
        from shared.messaging.messages import ScheduleBatch, ScheduleRequest

        requests = expect_message(data, ScheduleBatch.TYPE).get(_wire(ScheduleBatch, "requests"))
        uid_field = _wire(ScheduleRequest, "uid")
        for request in requests if isinstance(requests, list) else ():
            uid = request.get(uid_field) if isinstance(request, dict) else None
            if isinstance(uid, str):
                self.dispatched_at.setdefault(uid, at)

    def _proposals(self, data: bytes, at: float) -> None:
        from shared.messaging.proposals import Proposal

        kind_field, uid_field = _wire(Proposal, "kind"), _wire(Proposal, "uid")
        for item in Proposal.items_of(data):
            if item.error:
                continue
            uid = item.body.get(uid_field)
            if item.body.get(kind_field, "bind") == "bind" and isinstance(uid, str):
                self.proposed_at.setdefault(uid, at)
            else:
                with contextlib.suppress(MessageError):
                    self._proposed(Proposal.from_body(item.body), at)

    def _outcomes(self, data: bytes, at: float) -> None:
        from shared.messaging.messages import Outcome

        result_field, uid_field = _wire(Outcome, "result"), _wire(Outcome, "uid")
        for item in Outcome.items_of(data):
            if item.error:
                continue
            uid = item.body.get(uid_field)
            if item.body.get(result_field) == "scheduled" and isinstance(uid, str):
                self.results["scheduled"] += 1
                self.bound_at.setdefault(uid, at)
            else:
                with contextlib.suppress(MessageError):
                    self._ended(Outcome.from_body(item.body), at)

    def _proposed(self, proposal: Proposal, at: float) -> None:
        self.proposed_at.setdefault(proposal.uid, at)
        if proposal.kind == "preempt":
            victims = [v.pod_key for v in proposal.victims]
            self.victims.setdefault(proposal.pod_key, []).extend(victims)
            self.nominated[proposal.pod_key] = proposal.node_name

    def _ended(self, outcome: Outcome, at: float) -> None:
        self.results[outcome.result] += 1
        if outcome.result == "conflict":
            self.conflicts[outcome.message] += 1
        if outcome.result == "scheduled":
            self.bound_at.setdefault(outcome.uid, at)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()


@dataclass(slots=True)
class Progress:
    bound: int
    parked: int
    waiting: int
    """Pending pods the queue still holds in active, backoff or in flight (or not yet seen)."""
    total: int


async def pending_progress(
    client: StackClient, pending: Mapping[str, Pod], names: frozenset[str]
) -> tuple[Progress, int]:
    """How many of `pending` (key -> pod as applied) are bound (or deleted after binding:
    preempted), parked (the queue's unschedulable and gated pods), or still moving; and the
    store's resourceVersion (a change means something is still happening). Reads raw hashes
    and the queue's counts only: it runs every few hundred milliseconds beside the services."""
    from services.queue.client import QueueCounts

    keys = client.store.keys
    async with client.redis.pipeline(transaction=True) as pipe:
        pipe.get(keys.rv)
        pipe.hgetall(keys.pod_node)
        pipe.hgetall(keys.meta("Pod"))
        rv, nodes, metas = await pipe.execute()
    counts = sum((await client.queue.counts()).values(), QueueCounts())
    considered = bound = 0
    for key, pod in pending.items():
        if pod.spec.scheduler_name not in names or pod.metadata.deletion_timestamp is not None:
            continue
        considered += 1
        field = key.encode()
        meta = metas.get(field)
        uid = meta.partition(b" ")[2].decode() if meta is not None else ""
        if uid != pod.metadata.uid or field in nodes:
            bound += 1
    parked = min(considered - bound, counts.unschedulable + counts.gated)
    return Progress(bound, parked, considered - bound - parked, considered), int(rv or 0)


async def wait_until_settled(
    client: StackClient,
    pending: Mapping[str, Pod],
    *,
    seconds: float,
    quiet_seconds: float = 1.5,
    on_progress: Callable[[Progress], None] | None = None,
) -> bool:
    """Until no pending pod is active, backing off or in flight and nothing changed in the
    store for `quiet_seconds`; False on timeout.

    Without `on_progress`, a poll that finds the store's resourceVersion moved since the
    last one stops there: the pipeline is not quiet, whatever the pods' progress. The full
    count reads two hashes with an entry per pod and looks at every pending pod, which at
    10,000 pods cost this process about a tenth of a core polled five times a second, taken
    from the services it waits for (a bench's figures)."""
    names = client.settings.scheduler_names()
    deadline = time.monotonic() + seconds
    last: tuple[int, int, int, int] | None = None
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        if on_progress is None and last is not None:
            moved = await client.store.resource_version()
            if moved != last[0]:
                last, quiet_since = (moved, -1, -1, -1), time.monotonic()
                await asyncio.sleep(0.2)
                continue
        progress, rv = await pending_progress(client, pending, names)
        if on_progress is not None:
            on_progress(progress)
        state = (rv, progress.bound, progress.parked, progress.waiting)
        if state != last:
            last, quiet_since = state, time.monotonic()
        elif progress.waiting == 0 and time.monotonic() - quiet_since >= quiet_seconds:
            return True
        await asyncio.sleep(0.2)
    return False


async def collect_report(
    client: StackClient, manifests_pods: Sequence[Pod], observer: RunObserver
) -> dict[str, Any]:
    """The `berth schedule -o json` document for the pods that had no nodeName."""
    names = client.settings.scheduler_names()
    stored = {p.key: p for p in cast(list[Pod], await client.store.list("Pod"))}
    queued = {p.key: p for p in (await client.queue.pending()).pods}
    preempted_by = {v: preemptor for preemptor, vs in observer.victims.items() for v in vs}
    out = []
    for pod in manifests_pods:
        if pod.spec.node_name:
            continue
        key = pod.key
        entry: dict[str, Any] = {
            "pod": key,
            "status": "Unschedulable",
            "node": None,
            "nominatedNode": observer.nominated.get(key) or None,
            "victims": list(observer.victims.get(key, [])),
            "message": "",
        }
        now = stored.get(key)
        waiting = queued.get(key)
        if pod.spec.scheduler_name not in names:
            entry["status"] = "Skipped"
            entry["message"] = f'profile not found for scheduler name "{pod.spec.scheduler_name}"'
        elif pod.metadata.deletion_timestamp is not None:
            entry["status"] = "Skipped"
            entry["message"] = f"skip schedule deleting pod: {key}"
        elif now is None or now.metadata.uid != pod.metadata.uid:
            entry["message"] = f"preempted by {preempted_by.get(key, 'another pod')}"
        elif now.spec.node_name:
            entry["status"] = "Scheduled"
            entry["node"] = now.spec.node_name
            entry["message"] = f"Successfully assigned {key} to {now.spec.node_name}"
        elif waiting is not None:
            entry["status"] = (
                ("Quota" if "Quota" in waiting.unschedulable_plugins else "Gated")
                if waiting.queue == "gated"
                else "Unschedulable"
            )
            entry["message"] = waiting.message
        out.append(entry)
    return {"pods": out}


@dataclass(slots=True)
class Pipeline:
    """An ephemeral stack with a client and an observer (see `pipeline`)."""

    running: RunningStack
    client: StackClient
    observer: RunObserver
    pods: list[Pod] = field(default_factory=list)
    """Every pod applied, as applied."""

    @property
    def stack(self) -> Stack:
        return self.running.stack

    async def apply(self, manifests: Manifests) -> None:
        self.pods += manifests.pods
        await self.client.apply(manifests)

    def pending(self) -> dict[str, Pod]:
        return {p.key: p for p in self.pods if not p.spec.node_name}

    async def settle(self, seconds: float, **options: Any) -> bool:
        return await wait_until_settled(self.client, self.pending(), seconds=seconds, **options)

    async def report(self) -> dict[str, Any]:
        return await collect_report(self.client, self.pods, self.observer)


@contextlib.asynccontextmanager
async def pipeline(
    *,
    config_path: str | None = None,
    workers: int = 1,
    binders: int = 1,
    queues: int = 1,
    seed: int | None = None,
    servers: DevServers | None = None,
    ordered: bool = True,
    single_tenant: str | None = RUN_TENANT,
    session_ms: int = 1500,
    workdir: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
    component_env: Mapping[str, Mapping[str, str]] | None = None,
    watch_servers: bool = False,
    dashboard: bool = False,
    agents: int | None = None,
    settings: StackSettings | None = None,
) -> AsyncIterator[Pipeline]:
    """Start an ephemeral stack (on `servers`, with keys and topics of its own, or on servers
    of its own; with a dashboard at `run.stack.dashboard_url` if asked; `agents` node agents,
    None: the stack's default), yield a Pipeline, stop everything. Servers of its own are
    restarted when they die; `servers` too with `watch_servers` (for a test that kills
    them). `component_env`: variables per kind of process (cli.supervisor.Stack).
    `settings`: the stack's (e.g. prefixes known beforehand), instead of isolated ones."""
    if settings is None and servers is not None:
        settings = servers.isolated_settings()
    running = await start_stack(
        workers=workers,
        binders=binders,
        queues=queues,
        config_path=config_path,
        seed=seed,
        single_tenant=single_tenant,
        settings=settings,
        ordered=ordered,
        session_ms=session_ms,
        workdir=workdir,
        extra_env=extra_env,
        component_env=component_env,
        servers=servers,
        watch_servers=watch_servers,
        dashboard=dashboard,
        agents=agents,
    )
    try:
        observer = RunObserver(
            running.settings.kafka_bootstrap,
            running.settings.topics,
            running.settings.kafka_security,
        )
        await observer.start()
        try:
            async with StackClient(running.settings) as client:
                yield Pipeline(running, client, observer)
        finally:
            await observer.stop()
    finally:
        await running.close()


async def run_pipeline(
    manifests: Manifests,
    *,
    config_path: str | None = None,
    workers: int = 1,
    binders: int = 1,
    seed: int | None = None,
    seconds: float = 300.0,
    servers: DevServers | None = None,
) -> tuple[dict[str, Any], bool]:
    """`berth run` as a library: (the report, whether everything settled within `seconds`)."""
    async with pipeline(
        config_path=config_path, workers=workers, binders=binders, seed=seed, servers=servers
    ) as run:
        await run.apply(manifests)
        settled = await run.settle(seconds)
        return await run.report(), settled


def run_main(argv: Sequence[str] | None = None) -> int:
    """`berth run ARGV...` (the click command in cli/commands/workloads.py parses)."""
    from cli.commands.workloads import run as command

    return invoke(command, argv, "berth run")


def run_run(args: Args) -> int:
    try:
        manifests = load_manifests(*args.file)
        if args.config:
            from shared.config import load_config

            load_config(args.config)  # fail before starting anything
    except (ManifestError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        report, settled = asyncio.run(
            run_pipeline(
                manifests,
                config_path=args.config,
                workers=args.workers,
                binders=args.binders,
                seed=args.seed,
                seconds=args.timeout,
            )
        )
    except (StackError, ManifestError, SecurityError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2))
    if not settled:
        print(f"warning: not settled after {args.timeout}s", file=sys.stderr)
        return 2
    return 0
