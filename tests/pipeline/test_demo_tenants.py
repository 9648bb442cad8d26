"""`berth demo --tenants`: the act runs (small sizes) on the session's real Redis and broker,
and its time series shows what quota admission promises: a burst borrows idle quota within
its borrowingLimit, queues that arrive get their nominal quota, a borrower never grows while a
queue below its nominal quota waits (DRF), the weighted shares are Kueue's, no queue and no
cohort ever goes over its quota; `--plot` writes a PNG, `-o json` the series."""

from __future__ import annotations

import functools
import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

from cli.demo_plot import plot_tenants
from cli.demo_tenants import format_result, run_tenants
from cli.demo_tenants_samples import TenantsResult
from cli.demo_tenants_scenario import (
    Scenario,
    Tenant,
    default_scenario,
    queue_manifests,
    tenant_jobs,
)
from cli.run import pipeline
from cli.servers import DevServers
from shared.models import pod_requests
from shared.models.kueue import QUEUE_NAME_LABEL, ClusterQueue

SMALL = Scenario(
    (
        Tenant("batch", nominal=2, borrowing_limit=4, weight=1, arrives=0.0, jobs=10),
        Tenant("prod", nominal=3, borrowing_limit=2, weight=2, arrives=2.0, jobs=6),
        Tenant("research", nominal=2, borrowing_limit=2, weight=1, arrives=4.5, jobs=4),
    ),
    job_seconds=3.0,
    nodes=2,
)


def test_the_act_objects_are_valid_kueue_objects() -> None:
    manifests = queue_manifests(default_scenario())
    queues = {q.metadata.name: q for q in manifests.queue_objects if isinstance(q, ClusterQueue)}
    assert sorted(queues) == ["batch", "prod", "research"]
    assert {q.spec.cohort for q in queues.values()} == {"tenants"}
    assert queues["prod"].spec.fair_sharing.weight == 2
    assert queues["batch"].spec.preemption.reclaim_within_cohort == "Any"
    assert default_scenario().cohort_quota == 18
    # The nodes hold more than the cohort's quota: quota, not capacity, limits the act.
    assert sum(n.status.allocatable["cpu"] for n in manifests.nodes) > 18_000
    jobs = tenant_jobs(default_scenario().tenant("prod"), created=100.0)
    assert len(jobs) == 20
    assert all(pod_requests(p) == {"cpu": 1000} for p in jobs)
    assert all(p.metadata.labels[QUEUE_NAME_LABEL] == "jobs" for p in jobs)
    created = [p.metadata.creation_timestamp or 0.0 for p in jobs]
    assert created == sorted(created)
    assert created[0] == 100.0


def check_quota_limits(result: TenantsResult) -> None:
    sc = result.scenario
    lendable = sc.cohort_quota
    for s in result.samples:
        assert s.cohort_usage <= sc.cohort_quota, s
        for t in sc.tenants:
            q = s.queues[t.name]
            assert t.borrowing_limit is not None
            assert 0 <= q.usage <= t.nominal + t.borrowing_limit, (t.name, s)
            assert q.borrowed == max(0.0, q.usage - t.nominal), (t.name, s)
            # Kueue's weighted share: borrowed over what the cohort lends, x1000, / weight.
            exact = Fraction(int(q.borrowed * 1000) * 1000, lendable * 1000 * t.weight)
            assert q.share == math.floor(exact), (t.name, s)


def check_burst_and_arrivals(result: TenantsResult) -> None:
    sc = result.scenario
    batch, prod, research = sc.tenants
    alone = [s for s in result.samples if s.t < prod.arrives]
    assert alone
    assert all(s.queues["prod"].usage == s.queues["research"].usage == 0 for s in alone)
    # The burst borrows the idle quota up to nominal + borrowingLimit.
    assert batch.borrowing_limit is not None
    peak = max(s.queues["batch"].usage for s in alone)
    assert peak == batch.nominal + batch.borrowing_limit
    batch_peak_share = max(s.queues["batch"].share for s in alone)
    assert batch_peak_share > 0
    for t in (prod, research):
        before = [s.queues[t.name].usage for s in result.samples if s.t < t.arrives]
        after = [s.queues[t.name].usage for s in result.samples if s.t >= t.arrives]
        assert set(before) <= {0.0}
        assert max(after) >= t.nominal, t.name  # it got its nominal quota
    # batch gave its borrowed quota back: its share fell once the others came.
    later = [s.queues["batch"].share for s in result.samples if s.t >= research.arrives]
    assert min(later) < batch_peak_share


def check_drf_order(result: TenantsResult) -> int:
    """Between two samples, no queue borrows more while another queue, below its nominal
    quota, had pods waiting for quota throughout (the freed quota goes to the lower share).
    Evictions take only pods of queues at or above their nominal quota (reclaim never takes
    a queue below it). An eviction seen at one sample was decided since the tick before, so
    the sample before that one, or the one between, shows it. Returns how many pairs of
    samples had a queue waiting below its nominal quota."""
    sc = result.scenario
    starved_pairs = 0
    samples = result.samples
    for i, (before, after) in enumerate(itertools.pairwise(samples)):
        earlier = samples[max(0, i - 1)]
        for t in sc.tenants:
            a0, a1 = before.queues[t.name], after.queues[t.name]
            starved = a0.waiting > 0 and a1.waiting > 0 and a1.usage < t.nominal
            if starved:
                starved_pairs += 1
                for other in sc.tenants:
                    if other is not t:
                        assert (
                            after.queues[other.name].borrowed <= before.queues[other.name].borrowed
                        ), (other.name, "borrowed more while", t.name, "waited", before, after)
            if a1.evicted > a0.evicted:
                around = (earlier.queues[t.name].usage, a0.usage)
                assert max(around) >= t.nominal, (t.name, earlier, before, after)
    return starved_pairs


async def test_the_tenants_act_end_to_end(dev_servers: DevServers, tmp_path: Path) -> None:
    result = await run_tenants(
        SMALL, seconds=120, run_factory=functools.partial(pipeline, servers=dev_servers)
    )
    assert result.finished, format_result(result)
    summary = result.summary()
    for t in SMALL.tenants:
        assert summary[t.name]["done"] == t.jobs
    last = result.samples[-1]
    assert all(q.usage == 0 and q.waiting == 0 for q in last.queues.values())
    assert len(result.samples) >= result.seconds / SMALL.sample_seconds / 2

    check_quota_limits(result)
    check_burst_and_arrivals(result)
    starved_pairs = check_drf_order(result)
    # prod arrives to find the cohort nearly full: it waits below its nominal quota while
    # batch's jobs finish, or (with reclaim) evicts batch's borrowed pods.
    assert starved_pairs > 0 or summary["batch"]["evicted"] > 0

    doc = json.loads(json.dumps(result.to_json()))
    assert doc["cohortQuota"] == 7
    assert [q["name"] for q in doc["queues"]] == ["batch", "prod", "research"]
    assert len(doc["samples"]) == len(result.samples)
    assert set(doc["samples"][-1]["queues"]["prod"]) == {
        "usage",
        "borrowed",
        "share",
        "waitingForQuota",
        "running",
        "done",
        "evicted",
    }
    assert [e["what"] for e in doc["events"] if "submits" in e["what"]] == [
        "batch submits 10 jobs",
        "prod submits 6 jobs",
        "research submits 4 jobs",
    ]
    text = format_result(result)
    assert "all jobs done" in text
    assert "batch (nom 2, w 1)" in text

    png = tmp_path / "tenants.png"
    plot_tenants(result, png)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000
