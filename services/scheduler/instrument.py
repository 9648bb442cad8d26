"""kube-scheduler's framework metrics for a worker's frameworks, without touching the framework.

    sampler = instrument(frameworks, metrics)      # once, after build_frameworks
    sampler.begin_cycle()                          # before each scheduling cycle

- scheduler_framework_extension_point_duration_seconds{extension_point, status, profile}:
  every run of PreFilter, Filter, PostFilter, PreScore, Score, Reserve and Permit (the
  framework's run_* methods, wrapped on the instance: its own calls go through the wrappers).
  Filter is the vectorised pass over all feasible rows, once per cycle (upstream times the
  per-node filter calls; the sum over a cycle is what a panel shows).
- scheduler_plugin_execution_duration_seconds{plugin, extension_point, status}: each plugin's
  call, in a sample of the cycles (upstream samples 10%: pluginMetricsSamplePercent).
- The status label is the status code's name ("Success", "Unschedulable", ...; "Error" when
  the call raised).
- berth_signature_reuse_total{profile, result}: what the signature cache did (its counters,
  reported by `report_reuse` at each heartbeat).
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from scheduling.framework.runtime import Framework
from scheduling.framework.status import Code, Status
from shared.observability.metrics import SUCCESS, BerthMetrics
from shared.observability.tracing import (
    ATTR_PLUGIN,
    extension_point_span,
    span_status,
    tracing_enabled,
)

PLUGIN_SAMPLE_PERCENT = 10
"""Upstream pluginMetricsSamplePercent."""

EXTENSION_POINTS = (
    ("run_pre_filter_plugins", "PreFilter"),
    ("run_filter_plugins", "Filter"),
    ("run_post_filter_plugins", "PostFilter"),
    ("run_pre_score_plugins", "PreScore"),
    ("run_score_plugins", "Score"),
    ("run_reserve_plugins_reserve", "Reserve"),
    ("run_permit_plugins", "Permit"),
)
"""Framework method -> upstream's extension_point label."""

PLUGIN_METHODS = (
    ("pre_filter_plugins", "pre_filter", "PreFilter"),
    ("filter_plugins", "filter", "Filter"),
    ("post_filter_plugins", "post_filter", "PostFilter"),
    ("pre_score_plugins", "pre_score", "PreScore"),
    ("score_plugins", "score", "Score"),
    ("reserve_plugins", "reserve", "Reserve"),
    ("permit_plugins", "permit", "Permit"),
)
"""Framework list attribute -> plugin method -> extension_point label."""

_MARK = "_berth_timed"

_CODE_NAMES = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


def status_label(result: object) -> str:
    """The status label of a run_* or plugin result: a Status, or an object carrying one
    (`.status`, `.error`, or a Filter plugin's `.failures`), or a tuple holding one;
    anything else is a success."""
    status: object = result
    if isinstance(result, tuple):
        status = next((item for item in result if isinstance(item, Status)), None)
    elif not isinstance(result, Status):
        status = getattr(result, "status", None) or getattr(result, "error", None)
        failures = getattr(result, "failures", None)
        if status is None and failures:
            # A vectorised Filter plugin's verdicts: the status of the rows it rejected.
            status = failures[0][0]
    if isinstance(status, Status):
        return _CODE_NAMES.get(status.code, str(status.code))
    return SUCCESS


class CycleSampler:
    """Whether this cycle's plugin calls are timed (decided once per cycle)."""

    __slots__ = ("percent", "rng", "sampled")

    def __init__(self, percent: int = PLUGIN_SAMPLE_PERCENT, rng: random.Random | None = None):
        self.percent = percent
        self.rng = rng if rng is not None else random.Random()
        self.sampled = False

    def begin_cycle(self) -> None:
        self.sampled = self.rng.random() * 100 < self.percent


def _timed_point(
    method: Callable[..., Any],
    point: str,
    profile: str,
    metrics: BerthMetrics,
    depth: list[int],
) -> Callable[..., Any]:
    @functools.wraps(method)
    def timed(*args: Any, **kwargs: Any) -> Any:
        if depth[0]:
            # Called by another extension point (PostFilter's dry run runs PreFilter and
            # Filter): part of that one's time, as upstream counts it.
            return method(*args, **kwargs)
        depth[0] += 1
        try:
            return _outermost(args, kwargs)
        finally:
            depth[0] -= 1

    def _outermost(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        span = extension_point_span(point) if tracing_enabled() else None
        if span is None:
            return _call(
                method,
                args,
                kwargs,
                lambda s, t: metrics.observe_extension_point(point, t, status=s, profile=profile),
            )
        with span as current:

            def done(status: str, seconds: float) -> None:
                metrics.observe_extension_point(point, seconds, status=status, profile=profile)
                span_status(current, status)

            return _call(method, args, kwargs, done)

    setattr(timed, _MARK, True)
    return timed


def _call(
    method: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    done: Callable[[str, float], None],
) -> Any:
    """`method(*args, **kwargs)`, then `done(status label, seconds)` (also on a raise)."""
    started = time.perf_counter()
    status = "Error"
    try:
        result = method(*args, **kwargs)
        status = status_label(result)
        return result
    finally:
        done(status, time.perf_counter() - started)


def _timed_plugin(
    method: Callable[..., Any],
    plugin: str,
    point: str,
    sampler: CycleSampler,
    metrics: BerthMetrics,
) -> Callable[..., Any]:
    """Timed in sampled cycles; a span of its own (under the extension point's) whenever
    the cycle is traced."""

    def observe(status: str, seconds: float) -> None:
        if sampler.sampled:
            metrics.observe_plugin(plugin, point, seconds, status)

    @functools.wraps(method)
    def timed(*args: Any, **kwargs: Any) -> Any:
        if tracing_enabled():
            with extension_point_span(plugin, {ATTR_PLUGIN: plugin}) as span:
                if span.is_recording():

                    def done(status: str, seconds: float) -> None:
                        observe(status, seconds)
                        span_status(span, status)

                    return _call(method, args, kwargs, done)
        if not sampler.sampled:
            return method(*args, **kwargs)
        return _call(method, args, kwargs, observe)

    setattr(timed, _MARK, True)
    return timed


def instrument(
    frameworks: Iterable[tuple[str, Framework]] | dict[str, Framework],
    metrics: BerthMetrics,
    sampler: CycleSampler | None = None,
) -> CycleSampler:
    """Wrap every framework's extension points and plugins (idempotent per object)."""
    sampler = sampler if sampler is not None else CycleSampler()
    items = frameworks.items() if isinstance(frameworks, dict) else frameworks
    for profile, framework in items:
        depth = [0]
        for attribute, point in EXTENSION_POINTS:
            method = getattr(framework, attribute)
            if not getattr(method, _MARK, False):
                timed = _timed_point(method, point, profile, metrics, depth)
                setattr(framework, attribute, timed)
        for listed, method_name, point in PLUGIN_METHODS:
            for entry in getattr(framework, listed):
                name, plugin = entry[0], entry[1]
                method = getattr(plugin, method_name, None)
                if method is None or getattr(method, _MARK, False):
                    continue
                try:
                    setattr(
                        plugin, method_name, _timed_plugin(method, name, point, sampler, metrics)
                    )
                except AttributeError:  # a plugin with __slots__: its calls go untimed
                    continue
    return sampler


REUSE_RESULTS = ("hit", "build", "full")


def report_reuse(
    frameworks: Mapping[str, Framework], metrics: BerthMetrics, seen: dict[tuple[str, str], int]
) -> None:
    """Add what each profile's signature cache did since the last call (`seen`: the counts
    reported so far) to berth_signature_reuse_total."""
    for profile, framework in frameworks.items():
        cache = framework.signatures
        if cache is None:
            continue
        stats = cache.stats
        counts = (stats.hits, stats.builds, sum(stats.fallbacks.values()))
        for result, count in zip(REUSE_RESULTS, counts, strict=True):
            new = count - seen.get((profile, result), 0)
            if new > 0:
                metrics.signature_reuse.labels(profile=profile, result=result).inc(new)
            seen[profile, result] = count
