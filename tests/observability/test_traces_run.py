"""Traces of a real run (queue, 2 workers, a binder as separate processes) read back from an
OTLP receiver: every attempt of a pod in the pod's one trace, dispatch -> scheduling_cycle ->
binding_cycle linked by parent ids, extension point spans under each cycle, unschedulable
attempts carrying the FitError, conflicts failed (ERROR), preemption victims as events; and
the cost per pod in spans and bytes."""

from __future__ import annotations

from collections import defaultdict

from cli.demo_workload import demo_workload
from cli.run import pipeline
from cli.servers import DevServers
from shared.models.manifest import Manifests
from shared.observability.tracing import (
    ATTR_MESSAGE,
    ATTR_PLUGINS,
    ATTR_POD_UID,
    ATTR_RESULT,
    EVENT_VICTIM,
    SPAN_BINDING_CYCLE,
    SPAN_DISPATCH,
    SPAN_SCHEDULING_CYCLE,
    pod_trace_id,
)
from tests.builders import make_pod
from tests.observability.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.pipeline.final_state import binding_history

STATUS_ERROR = 2


async def test_every_pods_path_is_one_linked_trace(dev_servers: DevServers) -> None:
    workload = demo_workload(nodes=12, pods=90, seed=5)
    unfit = [make_pod(f"too-big-{i}").namespace("team-a").req(cpu="500").obj() for i in range(2)]
    with OtlpReceiver() as receiver:
        async with pipeline(
            workers=2,
            binders=1,
            servers=dev_servers,
            ordered=False,
            single_tenant=None,
            extra_env={"BERTH_OTLP_ENDPOINT": receiver.endpoint},
        ) as run:
            await run.apply(workload.base)
            await run.apply(Manifests(pods=unfit))
            await run.settle(240.0)
            await run.apply(workload.preemptors)
            await run.settle(240.0)
            bindings = await binding_history(run.client.store)
            victims = sum(len(v) for v in run.observer.victims.values())
        # the services flushed their spans when they stopped
        spans = receiver.wait_for(10**9, timeout=1.0)
        sent = receiver.bytes_received

    by_trace: dict[str, list[ReceivedSpan]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    by_id = {s.span_id: s for s in spans}
    services = {s.resource["service.name"] for s in spans}
    assert services >= {"berth-queue", "berth-scheduler", "berth-binder"}

    # Every binding: in the pod's trace, binding_cycle <- scheduling_cycle <- queue.dispatch.
    assert bindings
    filtered = 0
    for uid, node in bindings:
        trace = by_trace[format(pod_trace_id(uid), "032x")]
        bound = [
            s
            for s in trace
            if s.name == SPAN_BINDING_CYCLE and s.attributes.get(ATTR_RESULT) == "scheduled"
        ]
        assert len(bound) == 1, (uid, [(s.name, s.attributes) for s in trace])
        cycle = by_id[bound[0].parent_span_id]
        assert cycle.name == SPAN_SCHEDULING_CYCLE
        assert cycle.attributes[ATTR_POD_UID] == uid
        dispatch = by_id[cycle.parent_span_id]
        assert dispatch.name == SPAN_DISPATCH
        assert dispatch.parent_span_id == ""
        points = {s.name for s in trace if s.parent_span_id == cycle.span_id}
        # (a pod whose signature's results were kept runs no PreFilter/Filter of its own)
        assert {"Reserve", "Permit", SPAN_BINDING_CYCLE} <= points, points
        filtered += "Filter" in points
        assert all(s.trace_id == bound[0].trace_id for s in trace)
        assert bound[0].attributes["berth.node"] == node

    assert filtered > 0

    # Pods no node fits: every attempt in the one trace, each unschedulable with its FitError.
    for pod in unfit:
        trace = by_trace[format(pod_trace_id(pod.metadata.uid), "032x")]
        cycles = [s for s in trace if s.name == SPAN_SCHEDULING_CYCLE]
        assert cycles
        for cycle in cycles:
            assert cycle.attributes[ATTR_RESULT] == "unschedulable"
            assert "nodes are available" in cycle.attributes[ATTR_MESSAGE]
            assert "NodeResourcesFit" in cycle.attributes[ATTR_PLUGINS]
            assert cycle.status_code != STATUS_ERROR
        assert len({s.attributes["berth.pod.attempt"] for s in cycles}) == len(cycles)

    # Conflicts and errors failed their attempt: status ERROR.
    for span in spans:
        if span.attributes.get(ATTR_RESULT) in ("conflict", "error"):
            assert span.status_code == STATUS_ERROR, span
    # Preemption: the victims are events, on the worker's and the binder's spans.
    assert victims >= 1
    events = [e for s in spans for name, e in s.events if name == EVENT_VICTIM]
    assert len(events) >= victims

    pods = len({s.attributes[ATTR_POD_UID] for s in spans if ATTR_POD_UID in s.attributes})
    print(
        f"\ntrace cost: {len(spans)} spans, {sent} bytes for {pods} pods: "
        f"{len(spans) / pods:.1f} spans and {sent / pods:.0f} bytes per pod"
    )
