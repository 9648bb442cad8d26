"""`berth up` as a real foreground process, driven by `berth apply / get / delete`; Ctrl-C
(and kill -9 of `berth up` itself) leaves no process behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from cli.stack_commands import apply_main, delete_main, get_main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is as good as gone.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def _wait(predicate: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Up:
    def __init__(self, state: Path, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
        env["BERTH_STATE"] = str(state)
        self.state = state
        self.log = state.with_suffix(".log")
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-c", "from cli.main import main; main()", "up", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        _wait(lambda: state.exists() or self.process.poll() is not None, 90, "berth up")
        assert self.process.poll() is None, self.log.read_text()

    def output(self) -> str:
        return self.log.read_text()

    def servers_started(self) -> list[str]:
        """The command lines of every Redis and broker process under `berth up` (its
        descendants, whatever ports they use)."""
        parents: dict[int, int] = {}
        commands: dict[int, str] = {}
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                stat = (proc / "stat").read_text()
                commands[int(proc.name)] = (
                    (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                )
            except OSError:
                continue
            parents[int(proc.name)] = int(stat.rsplit(")", 1)[1].split()[1])

        def under_up(pid: int) -> bool:
            while pid > 1:
                if pid == self.process.pid:
                    return True
                pid = parents.get(pid, 0)
            return False

        return [
            command
            for pid, command in commands.items()
            if ("redis-server" in command or "tansu" in command) and under_up(pid)
        ]

    def pids(self) -> list[int]:
        """The service processes, and the servers (from the state and their ports)."""
        pids = [int(p) for p in re.findall(r"pid (\d+)", self.output())]
        ports = re.findall(r"127\.0\.0\.1:(\d+)", self.output())
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if ("redis-server" in cmdline or "tansu" in cmdline) and any(
                port in cmdline for port in ports
            ):
                pids.append(int(proc.name))
        return pids


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "stack.json"
    for name in list(os.environ):
        if name.startswith("BERTH_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("BERTH_STATE", str(path))
    return path


def _pods(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    assert get_main(["pods", "-o", "json"]) == 0
    return {f"{p['namespace']}/{p['name']}": p for p in json.loads(capsys.readouterr().out)["pods"]}


def test_up_apply_get_delete_and_ctrl_c(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    up = Up(state, "--workers", "2")
    try:
        pids = up.pids()
        # queue, binder, 2 workers, node agent, dashboard, Redis, broker
        assert len(pids) == 8, up.output()
        # Each server once: no spare Redis or broker beside the ones the stack uses (issue 19).
        started = up.servers_started()
        assert len(started) == 2, started
        assert (
            apply_main(["-f", str(EXAMPLES / "cluster.yaml"), "-f", str(EXAMPLES / "pods.yaml")])
            == 0
        )
        assert "pod/team-a/etl-1 created" in capsys.readouterr().out

        def placed() -> bool:
            pods = _pods(capsys)
            return (
                pods["team-a/etl-1"]["status"] == "Bound"
                and pods["team-a/huge-1"]["queue"] == "unschedulable"
            )

        _wait(placed, 60, "the examples to be scheduled")
        pods = _pods(capsys)
        assert pods["team-a/gated-1"]["status"] == "Gated"
        assert pods["team-c/other-1"]["status"] == "Skipped"
        huge = pods["team-a/huge-1"]
        # Node events may reach the queue after the pod's first attempt and wake it once more.
        assert huge["status"] == "Pending"
        assert huge["attempts"] in (1, 2)
        assert "Insufficient cpu" in str(huge["message"])
        assert huge["reason"] == "unschedulable"

        # The dashboard `berth up` printed answers with the same pods.
        (url,) = re.findall(r"^dashboard: (http://127\.0\.0\.1:\d+/)$", up.output(), re.M)
        with urllib.request.urlopen(url + "api/pods?q=huge-1", timeout=10) as response:
            (shown,) = json.load(response)["pods"]
        assert (shown["name"], shown["reason"]) == ("huge-1", "unschedulable")

        assert get_main(["nodes"]) == 0
        assert "zone-c-1     SchedulingDisabled" in capsys.readouterr().out
        assert get_main(["queues", "-o", "json"]) == 0
        queues = json.loads(capsys.readouterr().out)
        assert queues["tenants"]["team-a"]["unschedulable"] == 1
        assert sorted(queues["workers"]) == ["worker-0", "worker-1"]

        assert delete_main(["pod", "etl-1", "-n", "team-a"]) == 0
        assert capsys.readouterr().out == "pod/team-a/etl-1 deleted\n"
        assert "team-a/etl-1" not in _pods(capsys)
        assert delete_main(["pod", "etl-1", "-n", "team-a"]) == 1
    finally:
        up.process.send_signal(signal.SIGINT)
        assert up.process.wait(30) == 0, up.output()
    _wait(lambda: not any(_alive(pid) for pid in pids), 10, "every process to stop")
    assert not state.exists()


def test_clients_without_a_stack_say_so(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert get_main(["pods"]) == 1
    assert "no running stack" in capsys.readouterr().err


def test_kill_9_of_berth_up_takes_its_children_along(state: Path) -> None:
    up = Up(state)
    pids = up.pids()
    assert len(pids) == 7, up.output()  # queue, binder, worker, agent, dashboard, servers
    up.process.kill()
    up.process.wait(10)
    _wait(lambda: not any(_alive(pid) for pid in pids), 20, "the orphans to die")


def _redis_pid(up: Up) -> int:
    port = re.search(r"redis:\s+redis://127\.0\.0\.1:(\d+)/0", up.output())
    assert port is not None, up.output()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "redis-server" in cmdline and f":{port.group(1)}" in cmdline:
                return int(proc.name)
    raise AssertionError(f"no redis-server on port {port.group(1)}")


def test_berth_up_keeps_the_cluster_through_a_redis_crash_and_a_restart(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The local Redis keeps its AOF beside the state file: killed with -9 it is restarted
    on the same port with every binding, and the next `berth up` resumes the cluster."""
    up = Up(state, "--redis-fsync", "always")
    try:
        assert f"AOF appendfsync always in {state.parent / 'stack-data'})" in up.output()
        files = ["-f", str(EXAMPLES / "cluster.yaml"), "-f", str(EXAMPLES / "pods.yaml")]
        assert apply_main(files) == 0
        capsys.readouterr()
        _wait(lambda: _pods(capsys)["team-a/etl-1"]["status"] == "Bound", 60, "a binding")
        bound = {key: p["node"] for key, p in _pods(capsys).items() if p["status"] == "Bound"}
        os.kill(_redis_pid(up), signal.SIGKILL)
        _wait(lambda: "restarted redis:" in up.output(), 20, "Redis to be restarted")
        now = {key: p["node"] for key, p in _pods(capsys).items() if p["status"] == "Bound"}
        assert {key: now.get(key) for key in bound} == bound
    finally:
        up.process.send_signal(signal.SIGINT)
        assert up.process.wait(30) == 0, up.output()
    up = Up(state)
    try:
        assert f"AOF appendfsync everysec in {state.parent / 'stack-data'}, resumed)" in (
            up.output()
        )
        again = {key: p["node"] for key, p in _pods(capsys).items() if p["status"] == "Bound"}
        assert {key: again.get(key) for key in bound} == bound
    finally:
        up.process.send_signal(signal.SIGINT)
        assert up.process.wait(30) == 0, up.output()


def test_up_with_tokens_is_the_api_front_door(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("short: {admin: true}\n")
    refused = subprocess.run(
        [
            sys.executable,
            "-c",
            "from cli.main import main; raise SystemExit(main())",
            "up",
            "--tokens",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1
    assert "16+ characters" in refused.stderr
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("admin-token-0123456789ab: {admin: true}\n")
    up = Up(state, "--tokens", str(tokens))
    try:
        (url,) = re.findall(r"^api: +(http://127\.0\.0\.1:\d+/)", up.output(), re.M)
        assert json.loads(state.read_text())["env"]["BERTH_API_URL"] == url
        assert get_main(["pods"]) == 1
        assert "needs a token" in capsys.readouterr().err
        assert get_main(["pods", "--token", "admin-token-0123456789ab", "-o", "json"]) == 0
        assert json.loads(capsys.readouterr().out) == {"pods": []}
    finally:
        up.process.send_signal(signal.SIGINT)
        assert up.process.wait(30) == 0, up.output()
