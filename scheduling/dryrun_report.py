"""What `berth schedule` reports: each pod's result (status, node, victims, the nodes
filtered out and why, the scores) and the report's JSON and table views."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.status import Status

SCHEDULED = "Scheduled"
UNSCHEDULABLE = "Unschedulable"
GATED = "Gated"
SKIPPED = "Skipped"


@dataclass(slots=True)
class FilteredNode:
    """Why one node was rejected: the Filter (or PreFilter) plugin and its reasons."""

    plugin: str
    reasons: list[str]


class FilteredNodes(Mapping[str, FilteredNode]):
    """Node -> why a cycle rejected it, in node order: read-only, expanded on first read.

    A cycle over thousands of nodes rejects thousands of them; building a dict entry per node
    for every pod would cost more than the cycle itself when nobody prints them (`-o table`),
    so this keeps the cycle's (status, rows) pairs and the node names until asked. Nodes
    rejected by the same status share one FilteredNode (do not mutate it).
    """

    __slots__ = ("_names", "_nodes", "_rejections")

    def __init__(self, rejections: list[tuple[Status, NDArray[np.intp]]], names: list[str]) -> None:
        self._rejections = rejections
        self._names = names
        """The node names by row when the cycle ran (NodeColumns replaces, never edits, it)."""
        self._nodes: dict[str, FilteredNode] | None = None

    def _expanded(self) -> dict[str, FilteredNode]:
        if self._nodes is None:
            self._nodes = self._expand()
        return self._nodes

    def _expand(self) -> dict[str, FilteredNode]:
        rejections = [(status, rows) for status, rows in self._rejections if rows.shape[0]]
        if not rejections:
            return {}
        rows = np.concatenate([rows for _, rows in rejections])
        which = np.repeat(
            np.arange(len(rejections), dtype=np.intp), [r.shape[0] for _, r in rejections]
        )
        # Row order; a row named twice keeps its last status (as Diagnosis.status_by_row);
        # -1 is a node that left the columns: named nowhere.
        order = np.argsort(rows, kind="stable")
        rows, which = rows[order], which[order]
        last = np.ones(rows.shape[0], dtype=np.bool_)
        last[:-1] = rows[1:] != rows[:-1]
        keep = last & (rows >= 0)
        entries = [FilteredNode(status.plugin, list(status.reasons)) for status, _ in rejections]
        names = self._names
        return {
            names[row]: entries[w]
            for row, w in zip(rows[keep].tolist(), which[keep].tolist(), strict=True)
        }

    def __getitem__(self, node: str) -> FilteredNode:
        return self._expanded()[node]

    def __iter__(self) -> Iterator[str]:
        return iter(self._expanded())

    def __len__(self) -> int:
        return len(self._expanded())

    def __repr__(self) -> str:
        # Never expands (a repr must stay cheap, see run_dry); shows the nodes once read.
        if self._nodes is not None:
            return f"FilteredNodes({self._nodes!r})"
        statuses = [f"{status.plugin}: {rows.shape[0]} row(s)" for status, rows in self._rejections]
        return f"FilteredNodes(<not expanded: {', '.join(statuses)}>)"

    def to_json(self) -> dict[str, dict[str, object]]:
        """{node: {"plugin", "reasons"}}; nodes with the same status share one entry."""
        shared: dict[int, dict[str, object]] = {}
        out: dict[str, dict[str, object]] = {}
        for node, f in self._expanded().items():
            entry = shared.get(id(f))
            if entry is None:
                entry = shared[id(f)] = {"plugin": f.plugin, "reasons": list(f.reasons)}
            out[node] = entry
        return out


@dataclass(slots=True)
class NodeScore:
    """One feasible node's score: each plugin's value after NormalizeScore and weight."""

    total: int
    plugins: dict[str, int]


@dataclass(slots=True)
class PodResult:
    """The outcome of one pending pod (its last scheduling attempt)."""

    pod: str
    """"namespace/name"."""
    status: str
    """Scheduled, Unschedulable, Gated or Skipped."""
    node: str | None = None
    nominated_node: str | None = None
    victims: list[str] = field(default_factory=list)
    """Pods ("namespace/name") this pod's preemption deleted."""
    message: str = ""
    filtered: Mapping[str, FilteredNode] = field(default_factory=dict)
    """Every node a Filter or PreFilter plugin (or an extender) rejected in the last attempt
    (a FilteredNodes: expanded when read)."""
    scores: dict[str, NodeScore] = field(default_factory=dict)
    """Per feasible node (explain only; empty when scoring did not run)."""

    def to_dict(self, explain: bool) -> dict[str, object]:
        out: dict[str, object] = {
            "pod": self.pod,
            "status": self.status,
            "node": self.node,
            "nominatedNode": self.nominated_node,
            "victims": list(self.victims),
            "message": self.message,
            "filtered": (
                self.filtered.to_json()
                if isinstance(self.filtered, FilteredNodes)
                else {
                    node: {"plugin": f.plugin, "reasons": list(f.reasons)}
                    for node, f in self.filtered.items()
                }
            ),
        }
        if explain:
            out["scores"] = {
                node: {"total": s.total, "plugins": dict(s.plugins)}
                for node, s in self.scores.items()
            }
        return out


@dataclass(slots=True)
class DryRunReport:
    pods: list[PodResult]
    """One entry per pod without spec.nodeName, in input order."""
    explain: bool = False
    passes: int = 0
    """Scheduling passes run."""
    warnings: list[str] = field(default_factory=list)
    """Input the run accepted with a doubt (e.g. a pod's priority disagreeing with its
    class), one line each, naming the object."""

    def to_dict(self) -> dict[str, object]:
        return {"pods": [pod.to_dict(self.explain) for pod in self.pods]}


# ------------------------------------------------------------------------- output
def to_json(report: DryRunReport) -> dict[str, object]:
    """The `-o json` document (issue #2 section 6), as JSON-ready data: json.dumps it."""
    return report.to_dict()


def to_table(report: DryRunReport) -> str:
    """The `-o table` view: pod, status, node and the reason, one line per pod."""
    header = ("POD", "STATUS", "NODE", "REASON")
    rows = [header]
    for pod in report.pods:
        rows.append((pod.pod, pod.status, pod.node or "<none>", _reason(pod)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = [
        "   ".join([*(cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])), row[-1]])
        for row in rows
    ]
    return "\n".join(line.rstrip() for line in lines)


def _reason(pod: PodResult) -> str:
    if pod.status == SCHEDULED:
        extra = []
        if pod.victims:
            extra.append(f"preempted {', '.join(pod.victims)}")
        return "; ".join(extra)
    reason = pod.message
    if pod.nominated_node:
        reason += f" (nominated node: {pod.nominated_node})"
    return reason
