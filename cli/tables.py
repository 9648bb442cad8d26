"""`berth get` tables."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from services.queue.client import PodRow
from shared.lifecycle.state import PodEvent
from shared.models.quantity import format_resource


def _table(rows: Sequence[Sequence[str]]) -> str:
    if not rows:
        return ""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append("   ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def format_pods(rows: Sequence[PodRow], output: str) -> str:
    if output == "json":
        return json.dumps({"pods": [r.to_json() for r in rows]}, indent=2)
    wide = output == "wide"
    header = ["NAMESPACE", "NAME", "STATUS", "NODE"]
    header += ["QUEUE", "ATTEMPTS", "NOMINATED", "REASON"] if wide else ["REASON"]
    table = [header]
    for r in rows:
        line = [r.namespace, r.name, r.status, r.node or "<none>"]
        if wide:
            line += [r.queue or "-", str(r.attempts), r.nominated_node or "-"]
        reason = r.message if r.status != "Bound" else ""
        if not wide and r.queue and r.status == "Pending":
            reason = f"[{r.queue}, {r.attempts} attempts] {reason}".rstrip()
        table.append([*line, reason])
    return _table(table)


def _fraction(requested: Mapping[str, int], allocatable: Mapping[str, int], name: str) -> str:
    total = allocatable.get(name, 0)
    used = requested.get(name, 0)
    return f"{100 * used // total}%" if total else "-"


def format_nodes(rows: Sequence[dict[str, Any]], output: str) -> str:
    if output == "json":
        return json.dumps({"nodes": list(rows)}, indent=2)
    wide = output == "wide"
    header = ["NAME", "STATUS", "ZONE", "PODS", "CPU", "MEMORY"]
    if wide:
        header.append("TAINTS")
    table = [header]
    for r in rows:
        line = [
            r["name"],
            r["status"],
            r["zone"] or "-",
            f"{r['pods']}/{r['allocatable'].get('pods', 0)}",
            _fraction(r["requested"], r["allocatable"], "cpu"),
            _fraction(r["requested"], r["allocatable"], "memory"),
        ]
        if wide:
            line.append(",".join(r["taints"]) or "-")
        table.append(line)
    return _table(table)


def format_queues(view: Mapping[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(view, indent=2, default=str)
    table = [["TENANT", "ACTIVE", "BACKOFF", "UNSCHEDULABLE", "GATED", "INFLIGHT"]]
    for tenant, c in view["tenants"].items():
        table.append(
            [
                tenant,
                *(str(c[k]) for k in ("active", "backoff", "unschedulable", "gated", "inflight")),
            ]
        )
    out = _table(table)
    workers = view["workers"]
    if workers:
        rows = [["WORKER", "RV", "PODS", "PROPOSALS", "ASSUMED", "AGE"]]
        for name, beat in sorted(workers.items()):
            age = time.time() - float(beat.get("ts", 0))
            rows.append(
                [
                    name,
                    str(beat.get("rv", 0)),
                    str(beat.get("pods", 0)),
                    str(beat.get("proposals", 0)),
                    str(beat.get("assumed", 0)),
                    f"{age:.0f}s",
                ]
            )
        out += "\n\n" + _table(rows)
    return out


def format_cluster_queues(rows: Sequence[Mapping[str, Any]], output: str) -> str:
    """`berth get clusterqueues`: one line per ClusterQueue, flavor and resource. USAGE is
    what bound pods use, RESERVED what admission charged (bound or about to be)."""
    if output == "json":
        return json.dumps(list(rows), indent=2, default=str)
    columns = ["NAME", "COHORT", "FLAVOR", "RESOURCE", "NOMINAL", "RESERVED", "USAGE"]
    table = [[*columns, "BORROWED", "SHARE", "PENDING"]]
    for row in rows:
        pending = ", ".join(f"{n} {why}" for why, n in sorted(row["pending"].items())) or "0"
        for r in row["resources"]:
            name = str(r["resource"])
            table.append(
                [
                    str(row["name"]),
                    str(row["cohort"] or "-"),
                    str(r["flavor"]),
                    name,
                    *(
                        format_resource(name, int(r[k]))
                        for k in ("nominal", "reserved", "usage", "borrowed")
                    ),
                    str(row["share"]),
                    pending,
                ]
            )
    return _table(table)


def describe_pod(row: PodRow, events: Sequence[PodEvent] = ()) -> str:
    """`berth describe pod`: kubectl describe's habit, the fields a pending pod is read by."""
    fields = [
        ("Name", row.name),
        ("Namespace", row.namespace),
        ("Priority", str(row.priority)),
        ("Labels", ",".join(f"{k}={v}" for k, v in sorted(row.labels.items())) or "<none>"),
        ("Status", row.status),
        ("Node", row.node or "<none>"),
        ("Reason", row.reason or "-"),
        ("Queue", f"{row.queue or '-'} (tenant {row.tenant or '-'})"),
        ("ClusterQueue", row.cluster_queue or "<none>"),
        ("Attempts", str(row.attempts)),
        ("Nominated Node", row.nominated_node or "<none>"),
        ("Message", row.reason_message or row.message or "<none>"),
    ]
    text = "\n".join(f"{name + ':':<16}{value}" for name, value in fields)
    return text + "\n" + format_events(events) if events else text


def format_events(events: Sequence[PodEvent], now: float | None = None) -> str:
    """kubectl describe's Events section, oldest first (`events` come newest first)."""
    at = time.time() if now is None else now
    table = [["Type", "Reason", "Age", "From", "Message"]]
    for event in reversed(events):
        age = max(0, int(at - event.time))
        table.append([event.type, event.reason, f"{age}s", event.source, event.message])
    return "Events:\n" + "\n".join("  " + line for line in _table(table).splitlines())


def format_local_queues(
    cluster_queues: Sequence[Mapping[str, Any]], pods: Sequence[PodRow], output: str
) -> str:
    """`berth get localqueues`: each LocalQueue, its ClusterQueue, and its pods: admitted
    (bound) and pending by reason."""
    rows = []
    for cq in cluster_queues:
        for key in cq.get("localQueues") or []:
            mine = [p for p in pods if p.local_queue == key]
            pending: dict[str, int] = {}
            for p in mine:
                if p.pending:
                    pending[p.reason] = pending.get(p.reason, 0) + 1
            namespace, _, name = str(key).partition("/")
            rows.append(
                {
                    "namespace": namespace,
                    "name": name,
                    "clusterQueue": cq["name"],
                    "admitted": sum(1 for p in mine if p.reason == "bound"),
                    "pending": dict(sorted(pending.items())),
                }
            )
    rows.sort(key=lambda r: (r["namespace"], r["name"]))
    if output == "json":
        return json.dumps({"localQueues": rows}, indent=2)
    table = [["NAMESPACE", "NAME", "CLUSTERQUEUE", "ADMITTED", "PENDING"]]
    for r in rows:
        pending_text = ", ".join(f"{n} {why}" for why, n in r["pending"].items()) or "0"
        table.append(
            [r["namespace"], r["name"], r["clusterQueue"], str(r["admitted"]), pending_text]
        )
    return _table(table)
