"""Extenders in distributed scheduler workers: the worker builds the configured extenders and
calls them as the dry run does (in a thread, so the event loop keeps following the stream);
a filter extender that rejects a node steers `berth run` exactly as it steers
`berth schedule`. Real local extender, real Redis and broker, services as processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from cli.run import run_pipeline
from cli.servers import DevServers
from scheduling.dryrun import run_dry_async, to_json
from shared.config import load_config
from shared.models import load_manifests
from tests.extender.test_extender import Recorder, keep
from tests.extender.test_scheduling import CONFIG, cluster_yaml

Server = tuple[str, Recorder]


async def test_workers_call_the_filter_extender_like_the_dry_run(
    server: Server, dev_servers: DevServers, tmp_path: Path
) -> None:
    url, recorder = server
    recorder.replies["filter"] = keep("n1", "n3", FailedNodes={"n2": "too hot"})
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(cluster_yaml())
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG + f"extenders: [{{urlPrefix: '{url}', filterVerb: filter}}]\n")
    expected = to_json(
        await run_dry_async(load_manifests(cluster), load_config(str(config)), seed=1)
    )
    dry_run_calls = len(recorder.requests)
    report, settled = await run_pipeline(
        load_manifests(cluster), config_path=str(config), seed=1, seconds=60, servers=dev_servers
    )
    assert settled
    [pod] = report["pods"]
    assert pod["node"] in ("n1", "n3")  # n2, the best node without the extender, was refused
    [want] = cast(list[dict[str, Any]], expected["pods"])
    assert (pod["status"], pod["node"]) == (want["status"], want["node"])
    worker_calls = recorder.requests[dry_run_calls:]
    assert [verb for verb, _ in worker_calls] == ["filter"]
    assert json.dumps(worker_calls[0][1]["Pod"]["metadata"]["name"]) == '"p"'
