"""`berth simulate` end to end on the test servers: a zone fails under a small load, time
compressed x20; the report counts every completion and eviction, the node events, and
completion times that include the failure."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from cli.run import pipeline
from cli.servers import DevServers
from cli.simulate import format_summary, simulate
from cli.simulate_plot import plot_simulation
from cli.simulate_trace import parse_trace
from shared.models import load_manifest_text

CLUSTER = "".join(
    f"""---
apiVersion: v1
kind: Node
metadata:
  name: {zone}
  labels: {{topology.kubernetes.io/zone: {zone}}}
status: {{capacity: {{cpu: "4", pods: "20"}}}}
"""
    for zone in ("zone-a", "zone-b")
)
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "job",
        "namespace": "team",
        "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "100s"},
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": "j", "controller": True}
        ],
    },
    "spec": {
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [
                                {
                                    "key": "topology.kubernetes.io/zone",
                                    "operator": "In",
                                    "values": ["zone-a"],
                                }
                            ]
                        },
                    }
                ]
            }
        },
    },
}
TRACE = {
    "kind": "Trace",
    "spec": {
        "events": [
            {"at": "0s", "pods": [{"replicas": 4, "template": POD}]},
            {"at": "20s", "fail": {"zone": "zone-a"}},
            {"at": "200s", "recover": {"zone": "zone-a"}},
        ]
    },
}


async def test_a_zone_failure_replayed(dev_servers: DevServers, tmp_path: Path) -> None:
    speed = 20.0
    trace = parse_trace(TRACE, "trace").scaled(speed)
    result = await simulate(
        load_manifest_text(CLUSTER),
        trace,
        speed=speed,
        sample_seconds=0.1,
        wall_limit=60,
        run_factory=functools.partial(pipeline, servers=dev_servers),
    )
    summary = result.summary()
    assert summary["finished"] is True
    team = summary["tenants"]["team"]
    # All four land on zone-a (preferred); the zone fails at 20 s, is tainted unreachable
    # after the 40 s grace period, and every pod there (no toleration) is evicted, replaced
    # and runs its 100 s on zone-b.
    assert (team["submitted"], team["completed"], team["evicted"]) == (4, 4, 4)
    assert summary["evictions"] == {"TaintManagerEviction": 4}
    assert [e["event"] for e in summary["nodeEvents"]] == [
        "fail zone zone-a (1)",
        "recover zone zone-a (1)",
    ]
    # Completion: at least the grace period after the failure plus a full run on zone-b.
    assert team["completionSeconds"]["count"] == 4
    assert team["completionSeconds"]["p50"] >= 20 + 40 + 100 - 10
    evicted_at = sorted(t for t, _, _ in result.evictions)
    assert 20 + 40 - 10 <= evicted_at[0] <= 20 + 40 + 30
    assert 0 < team["meanCpuShare"] <= 0.5
    text = format_summary(summary)
    assert "team" in text
    assert "TaintManagerEviction 4" in text
    assert json.loads(json.dumps(result.to_json()))["series"]
    plot_simulation(result, tmp_path / "sim.png")
    assert (tmp_path / "sim.png").read_bytes()[:4] == b"\x89PNG"
