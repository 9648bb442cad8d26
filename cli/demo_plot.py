"""`berth demo --tenants --plot FILE.png`: usage and weighted share per ClusterQueue over time.

matplotlib with the Agg backend (a PNG in memory, no display), imported only when a plot is
asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cli.demo_tenants_samples import TenantsResult


def plot_tenants(result: TenantsResult, path: str | Path) -> None:
    """Two panels sharing the time axis: each queue's usage (its nominal quota dashed, the
    cohort's quota dotted, evictions marked x) and each queue's weighted DRF share; a
    vertical line where each queue's jobs arrive."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sc = result.scenario
    times = [s.t for s in result.samples]
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(10, 7), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, tenant in enumerate(sc.tenants):
        color = colors[i % len(colors)]
        usage = result.series(tenant.name, "usage")
        top.step(times, usage, where="post", color=color, linewidth=2, label=tenant.name)
        top.axhline(tenant.nominal, color=color, linestyle="--", linewidth=1, alpha=0.7)
        evicted = result.series(tenant.name, "evicted")
        marks = [k for k in range(1, len(evicted)) if evicted[k] > evicted[k - 1]]
        if marks:
            top.plot(
                [times[k] for k in marks],
                [usage[k] for k in marks],
                "x",
                color=color,
                markersize=9,
                label=f"{tenant.name} pods evicted",
            )
        bottom.step(
            times,
            result.series(tenant.name, "share"),
            where="post",
            color=color,
            linewidth=2,
            label=f"{tenant.name} (weight {tenant.weight})",
        )
        for axis in (top, bottom):
            axis.axvline(tenant.arrives, color=color, linestyle=":", linewidth=1)
        top.annotate(
            f"{tenant.name} arrives",
            (tenant.arrives, sc.cohort_quota),
            textcoords="offset points",
            xytext=(3, 4 + 10 * i),
            fontsize=8,
            color=color,
        )
    top.axhline(sc.cohort_quota, color="black", linestyle=":", linewidth=1, label="cohort quota")
    top.set_ylabel("CPUs admitted (usage)")
    top.set_ylim(0, sc.cohort_quota * 1.25)
    top.set_title(
        f"berth demo --tenants: cohort {sc.cohort_quota} CPUs; dashed: nominal quota; "
        f"jobs of 1 CPU for {sc.job_seconds:g} s"
    )
    top.legend(loc="upper right", fontsize=8)
    bottom.set_ylabel("weighted share (x1000)")
    bottom.set_xlabel("seconds")
    bottom.legend(loc="upper right", fontsize=8)
    for axis in (top, bottom):
        axis.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(str(path), format="png", dpi=100)
    plt.close(fig)
