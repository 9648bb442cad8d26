"""`berth simulate --plot FILE.png`: CPU in use per tenant and weighted share per
ClusterQueue over simulated time, node events as vertical lines, evictions marked.
matplotlib (Agg backend), imported only when a plot is asked for."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cli.simulate import SimResult


def plot_simulation(result: SimResult, path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = [pt.t for pt in result.series]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    tenants = sorted({ns for pt in result.series for ns in pt.tenants})
    for ns in tenants:
        cpus = [pt.tenants.get(ns, {}).get("cpu", 0) / 1000 for pt in result.series]
        top.step(times, cpus, where="post", linewidth=2, label=ns)
    if result.capacity_cpu:
        top.axhline(result.capacity_cpu / 1000, color="grey", linestyle=":", label="capacity")
    for t, _key, _reason in result.evictions:
        top.axvline(t, color="red", alpha=0.15, linewidth=1)
    queues = sorted({q for pt in result.series for q in pt.queues})
    for name in queues:
        share = [pt.queues.get(name, {}).get("share", 0) for pt in result.series]
        bottom.step(times, share, where="post", linewidth=2, label=name)
    for axis in (top, bottom):
        for t, text in result.node_events:
            axis.axvline(t, color="black", linestyle="--", linewidth=1)
            if axis is top:
                axis.annotate(text, (t, 0), rotation=90, fontsize=7, va="bottom")
    top.set_ylabel("CPUs bound")
    top.legend(loc="upper right", fontsize=8)
    bottom.set_ylabel("weighted share x1000")
    bottom.set_xlabel("simulated seconds")
    if queues:
        bottom.legend(loc="upper right", fontsize=8)
    top.set_title("berth simulate (red: evictions; dashed: node events)")
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
    plt.close(fig)
