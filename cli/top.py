"""`berth top`: live throughput, attempt latency and queue depth per tenant, for a person at a
terminal, from the same /metrics the chart's dashboard reads.

    berth top --url http://queue-0:9090 --url http://worker-0:9090 --url http://binder-0:9090
    berth top --url ... --once --interval 5      # one frame after two scrapes, then exit

Every `--interval` seconds each endpoint's /metrics is scraped; a frame shows what happened
between the last two scrapes (summed over the endpoints): pods bound per second, attempts
by result, p50/p99 attempt latency and SLI (from the histograms' bucket deltas), conflicts
by reason, the pending pods per queue and per tenant (the queue's gauges: max over replicas)
and each endpoint's consumer lag. An endpoint that does not answer is named in the frame.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from cli.commands import Args, invoke

Labels = tuple[tuple[str, str], ...]
Series = dict[tuple[str, Labels], float]

ENV_URLS = "BERTH_TOP_URLS"
"""Comma-separated /metrics URLs when no --url is given."""


class TopError(ValueError):
    """A bad argument (one line, exit 2)."""


@dataclass
class Scrape:
    """One scrape of every endpoint: its series (name, sorted labels) -> value."""

    at: float
    series: dict[str, Series] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def parse(text: str) -> Series:
    out: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def metrics_url(url: str) -> str:
    url = url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise TopError(f"--url {url!r}: expected http://host:port")
    return url if url.endswith("/metrics") else url + "/metrics"


def fetch(url: str, timeout: float = 3.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        body: bytes = answer.read()
    return body.decode()


async def scrape(urls: Sequence[str]) -> Scrape:
    async def one(url: str) -> tuple[str, str | Exception]:
        try:
            return url, await asyncio.to_thread(fetch, url)
        except Exception as exc:  # noqa: BLE001 (named in the frame)
            return url, exc

    result = Scrape(time.monotonic())
    for url, answer in await asyncio.gather(*(one(u) for u in urls)):
        if isinstance(answer, Exception):
            result.errors[url] = f"{type(answer).__name__}: {answer}"
        else:
            result.series[url] = parse(answer)
    return result


def total(series: Series, name: str, **labels: str) -> float:
    want = labels.items()
    return sum(v for (n, have), v in series.items() if n == name and want <= set(have))


def by_label(series: Series, name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for (n, have), value in series.items():
        if n == name:
            out[dict(have).get(label, "")] += value
    return dict(out)


def merged(scrape: Scrape) -> Series:
    """Counters and histograms summed over the endpoints."""
    out: Series = defaultdict(float)
    for series in scrape.series.values():
        for key, value in series.items():
            out[key] += value
    return dict(out)


def gauge_max(scrape: Scrape, name: str, label: str) -> dict[str, float]:
    """A gauge the queue replicas all report alike: the max per label value."""
    out: dict[str, float] = {}
    for series in scrape.series.values():
        for value_of, value in by_label(series, name, label).items():
            out[value_of] = max(out.get(value_of, 0.0), value)
    return out


def delta(new: Series, old: Series) -> Series:
    """Counter increases between two scrapes (a restart's reset counts from zero)."""
    out: Series = {}
    for key, value in new.items():
        before = old.get(key, 0.0)
        out[key] = value - before if value >= before else value
    return out


def quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """histogram_quantile over cumulative bucket counts (upper bound -> count); None when
    nothing was observed."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    count = buckets[bounds[-1]]
    rank = q * count
    lower, below = 0.0, 0.0
    for bound in bounds:
        cumulative = buckets[bound]
        if cumulative >= rank:
            if math.isinf(bound):
                return lower
            if cumulative == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (cumulative - below)
        lower, below = bound, cumulative
    return bounds[-1]


def histogram(series: Series, name: str, **labels: str) -> dict[float, float]:
    out: dict[float, float] = defaultdict(float)
    want = labels.items()
    for (n, have), value in series.items():
        if n != name + "_bucket":
            continue
        fields = dict(have)
        if want <= fields.items():
            out[float(fields["le"])] += value
    return dict(out)


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.1f}ms" if value < 1 else f"{value:.2f}s"


def frame(old: Scrape, new: Scrape) -> str:
    """The text of one frame: what happened between two scrapes."""
    seconds = max(1e-9, new.at - old.at)
    d = delta(merged(new), merged(old))
    attempts = by_label(d, "scheduler_schedule_attempts_total", "result")
    bound = attempts.get("scheduled", 0.0)
    latency = histogram(d, "scheduler_scheduling_attempt_duration_seconds", result="scheduled")
    sli = histogram(d, "scheduler_pod_scheduling_sli_duration_seconds")
    by_result = "  ".join(f"{r} {v / seconds:.1f}/s" for r, v in sorted(attempts.items()) if v)
    lines = [
        f"berth top - {time.strftime('%H:%M:%S')} - {len(new.series)} endpoint(s), "
        f"{seconds:.1f}s window",
        f"throughput   {bound / seconds:8.1f} pods bound/s",
        f"attempts     {by_result or '-'}",
        f"attempt      p50 {_seconds(quantile(0.5, latency))}  "
        f"p99 {_seconds(quantile(0.99, latency))}",
        f"pod SLI      p50 {_seconds(quantile(0.5, sli))}  p99 {_seconds(quantile(0.99, sli))}",
    ]
    conflicts = by_label(d, "berth_conflicts_total", "reason")
    if any(conflicts.values()):
        lines.append(
            "conflicts    "
            + "  ".join(f"{r} {v / seconds:.1f}/s" for r, v in sorted(conflicts.items()) if v)
        )
    pending = gauge_max(new, "scheduler_pending_pods", "queue")
    lines.append(
        "pending      " + "  ".join(f"{q} {int(v)}" for q, v in sorted(pending.items()))
        if pending
        else "pending      -"
    )
    tenants: dict[str, dict[str, float]] = defaultdict(dict)
    for series in new.series.values():
        for (n, have), value in series.items():
            if n == "berth_tenant_pending_pods":
                fields = dict(have)
                queues = tenants[fields.get("tenant", "")]
                queue = fields.get("queue", "")
                queues[queue] = max(queues.get(queue, 0.0), value)
    if tenants:
        lines.append("")
        columns = ("active", "backoff", "unschedulable", "gated", "in_flight")
        lines.append(f"{'TENANT':<24}" + "".join(f"{c.upper():>15}" for c in columns))
        for tenant, queues in sorted(tenants.items()):
            counts = "".join(f"{int(queues.get(c, 0)):>15}" for c in columns)
            lines.append(f"{tenant:<24}{counts}")
    lags = []
    for url, series in sorted(new.series.items()):
        lag = total(series, "berth_consumer_lag")
        if any(n == "berth_consumer_lag" for n, _ in series):
            lags.append(f"{url.removesuffix('/metrics')} {int(lag)}")
    if lags:
        lines.append("")
        lines.append("consumer lag " + "  ".join(lags))
    for url, error in sorted(new.errors.items()):
        lines.append(f"unreachable  {url}: {error}")
    return "\n".join(lines)


def endpoints(raw: Sequence[str], interval: float) -> list[str]:
    """The /metrics URLs to scrape; TopError on a bad argument."""
    if not raw:
        raise TopError(f"no endpoint: give --url (or ${ENV_URLS})")
    if not interval > 0:
        raise TopError(f"--interval {interval}: must be positive")
    return [metrics_url(u.strip()) for u in raw]


async def run(urls: Sequence[str], interval: float, once: bool) -> int:
    old = await scrape(urls)
    while True:
        await asyncio.sleep(interval)
        new = await scrape(urls)
        text = frame(old, new)
        if once:
            print(text)
            return 0
        print("\x1b[H\x1b[2J" + text, flush=True)
        old = new


def top_main(argv: Sequence[str] | None = None) -> int:
    """`berth top ARGV...` (the click command in cli/commands/top.py parses)."""
    from cli.commands.top import top

    return invoke(top, argv, "berth top")


def top_run(args: Args) -> int:
    import os

    raw = args.url or [u for u in os.environ.get(ENV_URLS, "").split(",") if u.strip()]
    try:
        urls = endpoints(raw, args.interval)
    except TopError as exc:
        print(f"berth top: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(urls, args.interval, args.once))
    except KeyboardInterrupt:
        return 0
