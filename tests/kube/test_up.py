"""`berth up --kubeconfig PATH`: the whole local stack in Kubernetes mode, as a user runs it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from cli.up_command import up_main
from shared.config import load_config
from shared.runtime.env import StackSettings, profile_refusal
from tests.kube.conftest import ApiServer
from tests.kube.test_adapter import eventually, node, pod

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_second_scheduler_example_takes_only_pods_that_ask_for_berth() -> None:
    config = load_config(str(EXAMPLES / "second-scheduler.yaml"))
    assert [p.scheduler_name for p in config.profiles] == ["berth"]
    settings = StackSettings(
        "redis://r", "k:9092", config_path=str(EXAMPLES / "second-scheduler.yaml")
    )
    assert settings.scheduler_names() == frozenset({"berth"})


def test_a_missing_kubeconfig_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.yaml"
    assert up_main(["--kubeconfig", str(missing)]) == 2
    assert (
        capsys.readouterr().err.strip() == f"error: {missing}: kubeconfig {missing}: no such file"
    )


def test_a_default_scheduler_profile_is_refused_unless_opted_in(
    api_server: ApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kubernetes mode with upstream's default profile would take kube-scheduler's pods:
    `berth up` refuses before starting anything, in one line; the adapter refuses the same
    way (profile_refusal), and the chart fails to render (tests/deploy)."""
    assert up_main(["--kubeconfig", str(api_server.kubeconfig)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith('error: a profile is named "default-scheduler"')
    assert "--take-default-scheduler" in line
    assert profile_refusal(frozenset({"berth"}), False) == ""
    assert profile_refusal(frozenset({"default-scheduler"}), True) == ""
    assert "BERTH_KUBE_TAKE_DEFAULT_SCHEDULER=1" in profile_refusal(
        frozenset({"berth", "default-scheduler"}), False
    )


async def test_the_adapter_refuses_to_start_with_a_default_scheduler_profile(
    api_server: ApiServer,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
    env.update(BERTH_REDIS_URL="redis://127.0.0.1:1", BERTH_KAFKA_BOOTSTRAP="127.0.0.1:1")
    env["BERTH_KUBE"] = str(api_server.kubeconfig)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.adapter",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode != 0
    # Logs are JSON lines off a terminal (shared/observability/logs.py): the refusal is one line's
    # msg.
    lines = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    assert any('a profile is named "default-scheduler"' in line["msg"] for line in lines), out
    assert "Traceback" not in out.decode()


async def _berth(env: dict[str, str], *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from cli.main import main; raise SystemExit(main())",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode()


async def test_berth_up_with_a_kubeconfig_schedules_that_clusters_pods(
    api_server: ApiServer, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
    env["BERTH_STATE"] = str(tmp_path / "state.json")
    up = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from cli.main import main; main()",
        "up",
        "--kubeconfig",
        str(api_server.kubeconfig),
        "--take-default-scheduler",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    assert up.stdout is not None
    lines: list[str] = []

    async def read() -> None:
        assert up.stdout is not None
        async for raw in up.stdout:
            lines.append(raw.decode().rstrip())

    reader = asyncio.create_task(read())
    try:

        async def ready() -> bool:
            """berth up printed ready"""
            if up.returncode is not None:
                raise AssertionError("\n".join(lines))
            return any(line.startswith("ready:") for line in lines)

        await eventually(ready, 120)
        assert f"kubernetes: {api_server.url} (pods with schedulerName default-scheduler)" in lines
        assert any(line.startswith("adapter-0") for line in lines)
        assert any("`kubectl apply -f FILE`" in line for line in lines)

        api_server.emulator.upsert(node("n1"))
        api_server.emulator.upsert(pod("hello"))

        async def scheduled() -> bool:
            """hello is bound to n1 through the API"""
            obj = api_server.emulator.object("pods", "default", "hello") or {}
            return bool(obj.get("spec", {}).get("nodeName") == "n1")

        await eventually(scheduled, 60)

        # The API server owns the objects: berth apply refuses instead of being overwritten.
        manifest = tmp_path / "pod.yaml"
        manifest.write_text(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n"
            "spec: {containers: [{name: c, image: busybox}]}\n"
        )
        code, out = await _berth(env, "apply", "-f", str(manifest))
        assert code == 1
        assert "use `kubectl apply -f` instead" in out
        code, out = await _berth(env, "get", "nodes")
        assert code == 0
        assert "n1" in out
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGINT)
            await asyncio.wait_for(up.wait(), 60)
        reader.cancel()
