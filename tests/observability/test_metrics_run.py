"""kube-scheduler's metrics after a real run: every service process's /metrics scraped, the
counts checked against what happened (the bindings on the change stream, the victims, the
pods applied, the pods no node fits).

The stack runs as `berth run` runs it (one process per replica: 2 workers, 1 binder, 1
queue), each serving /metrics on a free port (BERTH_METRICS_PORT=0; the port is read from the
replica's log).
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from cli.demo_workload import demo_workload
from cli.run import Pipeline, pipeline
from cli.servers import DevServers
from shared.models.manifest import Manifests
from tests.builders import make_pod
from tests.pipeline.final_state import binding_history

SERVING = re.compile(r"serving /metrics, /healthz, /readyz on port (\d+)")

Samples = dict[str, list[tuple[dict[str, str], float]]]


def metrics_ports(run: Pipeline) -> dict[str, int]:
    """Replica name -> its /metrics port (the last one its log announced)."""
    ports: dict[str, int] = {}
    for log in Path(run.running.workdir).glob("*.log"):
        found = SERVING.findall(log.read_text(errors="replace"))
        if found:
            ports[log.stem] = int(found[-1])
    return ports


async def scrape(port: int) -> Samples:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0]
    out: Samples = defaultdict(list)
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            out[sample.name].append((dict(sample.labels), sample.value))
    return out


def total(samples: Samples, name: str, **labels: str) -> float:
    return sum(
        value
        for have, value in samples.get(name, [])
        if all(have.get(k) == v for k, v in labels.items())
    )


async def scrape_all(run: Pipeline) -> dict[str, Samples]:
    ports = metrics_ports(run)
    names = sorted(ports)
    return dict(zip(names, await asyncio.gather(*(scrape(ports[n]) for n in names)), strict=True))


def summed(by_replica: dict[str, Samples], kind: str, name: str, **labels: str) -> float:
    return sum(total(s, name, **labels) for r, s in by_replica.items() if r.startswith(kind))


async def test_a_run_fills_kube_schedulers_metrics_with_the_right_counts(
    dev_servers: DevServers,
) -> None:
    workload = demo_workload(nodes=20, pods=160, seed=11)
    unfit = [make_pod(f"too-big-{i}").namespace("team-a").req(cpu="500").obj() for i in range(3)]
    async with pipeline(
        workers=2,
        binders=1,
        servers=dev_servers,
        ordered=False,
        single_tenant=None,
        extra_env={"BERTH_METRICS_PORT": "0"},
    ) as run:
        await run.apply(workload.base)
        await run.apply(Manifests(pods=unfit))
        await run.settle(240.0)
        await run.apply(workload.preemptors)
        await run.settle(240.0)
        bindings = await binding_history(run.client.store)
        victims = sum(len(v) for v in run.observer.victims.values())
        # The periodic gauges (pending pods, lag, cache size) refresh every few seconds.
        await asyncio.sleep(6.0)
        m = await scrape_all(run)

    assert {r.split("-")[0] for r in m} >= {"queue", "worker", "binder"}, sorted(m)
    applied = len(workload.base.pods) + len(unfit) + len(workload.preemptors.pods)

    # Every binding on the change stream is one `scheduled` attempt, counted by the binder.
    scheduled = summed(m, "binder", "scheduler_schedule_attempts_total", result="scheduled")
    assert scheduled == len(bindings) > 0
    assert summed(m, "worker", "scheduler_schedule_attempts_total", result="scheduled") == 0
    attempt_count = "scheduler_scheduling_attempt_duration_seconds_count"
    assert summed(m, "binder", attempt_count, result="scheduled") == scheduled
    assert summed(m, "binder", "scheduler_pod_scheduling_attempts_count") == scheduled
    assert summed(m, "binder", "scheduler_pod_scheduling_sli_duration_seconds_count") == scheduled
    # Every pod that no node fits failed at least once, at a worker.
    unschedulable = summed(m, "worker", "scheduler_schedule_attempts_total", result="unschedulable")
    assert unschedulable >= len(unfit)
    # Conflicts carry a reason and are counted once, as attempts and as berth_conflicts.
    conflicts = summed(m, "binder", "scheduler_schedule_attempts_total", result="conflict")
    assert summed(m, "binder", "berth_conflicts_total") == conflicts

    # Preemption: the worker counts the attempts that chose victims, and the victims.
    assert victims >= 1
    assert summed(m, "worker", "scheduler_preemption_attempts_total") >= 1
    assert summed(m, "worker", "scheduler_preemption_victims_sum") == victims

    # The framework's extension points ran on every cycle of the workers.
    points = "scheduler_framework_extension_point_duration_seconds_count"
    pre_filters = summed(m, "worker", points, extension_point="PreFilter")
    assert pre_filters >= scheduled + unschedulable
    assert summed(m, "worker", points, extension_point="Filter") > 0
    assert summed(m, "worker", points, extension_point="Filter", status="Success") > 0
    assert summed(m, "worker", "scheduler_scheduling_algorithm_duration_seconds_count") > 0
    assert summed(m, "worker", "scheduler_plugin_execution_duration_seconds_count") > 0

    # The queue: every pod applied entered it once (PodAdd), and its consumer lag is reported.
    assert summed(m, "queue", "scheduler_queue_incoming_pods_total", event="PodAdd") == applied
    queue_lag = [labels for labels, _ in m["queue-0"].get("berth_consumer_lag", [])]
    assert queue_lag
    assert all(labels["topic"].startswith("berth.outcomes") for labels in queue_lag)
    assert total(m["queue-0"], "berth_consumer_lag") == 0
    assert total(m["queue-0"], "scheduler_pending_pods", queue="unschedulable") >= len(unfit)
    # Each of them counts for the plugin that rejected it (derived from the queue's Redis).
    rejected = total(m["queue-0"], "scheduler_unschedulable_pods", plugin="NodeResourcesFit")
    assert rejected >= len(unfit)
    assert total(m["queue-0"], "scheduler_unschedulable_pods", profile="default-scheduler") >= (
        rejected
    )

    # The workers' views: every node in the cache, nothing left to follow.
    nodes = len(workload.base.nodes)
    for name in ("worker-0", "worker-1"):
        assert total(m[name], "scheduler_scheduler_cache_size", type="nodes") == nodes
        assert total(m[name], "berth_view_follow_lag") == 0
