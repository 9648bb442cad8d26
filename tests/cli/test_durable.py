"""Durable state on the launcher's side: the embedded Redis's AOF configuration (one 0600
file), its restart on the same port with its data (cli/server_watch.py), growing pauses for
servers and services that keep dying, the data directory's lock, and the client commands'
one-line error while Redis is away."""

from __future__ import annotations

import logging
import os
import re
import signal
import stat
import sys
import time
from pathlib import Path

import pytest
import redis as redis_client

from cli.processes import ManagedProcess
from cli.redis_conf import redis_config, redis_fsync_policy
from cli.server_watch import ServerEvent, ServerWatch
from cli.servers import DevServers, Endpoints, LocalServer, free_port, start_dev_servers
from cli.stack_commands import apply_main, delete_main, get_main
from cli.supervisor import Stack
from cli.up_command import _lock_data_dir, data_dir_of
from shared.runtime.env import (
    ENV_KAFKA_BOOTSTRAP,
    ENV_REDIS_FSYNC,
    ENV_REDIS_PASSWORD,
    StackError,
    StackSettings,
)


@pytest.mark.parametrize("policy", ["everysec", "always", "no"])
def test_the_redis_config_turns_the_aof_on_with_the_policy(policy: str, tmp_path: Path) -> None:
    text = redis_config(6380, tmp_path / 'my "data"', policy, password="pw")
    lines = text.splitlines()
    assert "appendonly yes" in lines
    assert f"appendfsync {policy}" in lines
    assert 'save ""' in lines  # the AOF is the only copy: no RDB snapshots beside it
    assert "port 6380" in lines
    assert "bind 127.0.0.1" in lines
    assert f'dir "{tmp_path}/my \\"data\\""' in lines
    assert 'requirepass "pw"' in lines


def test_an_unknown_fsync_policy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="BERTH_REDIS_FSYNC='sometimes': must be one of"):
        redis_config(6380, tmp_path, "sometimes")


@pytest.mark.parametrize(
    ("env", "override", "expected"),
    [
        pytest.param({}, None, "everysec", id="default"),
        pytest.param({ENV_REDIS_FSYNC: "always"}, None, "always", id="env"),
        pytest.param({ENV_REDIS_FSYNC: "always"}, "no", "no", id="flag-wins"),
    ],
)
def test_fsync_policy_precedence(env: dict[str, str], override: str | None, expected: str) -> None:
    assert redis_fsync_policy(env, override) == expected


def _wait_for(watch: ServerWatch, what: str, seconds: float) -> list[ServerEvent]:
    seen: list[ServerEvent] = []
    deadline = time.monotonic() + seconds
    while not any(event.what == what for event in seen):
        assert time.monotonic() < deadline, f"no {what!r} event: {seen}"
        seen += watch.poll()
        time.sleep(0.02)
    return seen


def test_a_killed_redis_comes_back_on_its_port_with_its_data(
    dev_servers: DevServers, tmp_path: Path
) -> None:
    env = {ENV_KAFKA_BOOTSTRAP: dev_servers.kafka_bootstrap, ENV_REDIS_PASSWORD: "s3cret"}
    data = tmp_path / "data"
    servers = start_dev_servers(env, containers=False, redis_data_dir=data)
    try:
        [redis] = servers.local
        config = Path(redis.process.argv[1])
        # Everything in one private file: no port, password or directory on the command line.
        assert redis.process.argv == [redis.process.argv[0], str(config)]
        assert stat.S_IMODE(config.stat().st_mode) == 0o600
        client = redis_client.Redis.from_url(servers.redis_url, decode_responses=True)
        settings = client.config_get("append*")
        assert (settings["appendonly"], settings["appendfsync"]) == ("yes", "everysec")
        assert client.config_get("dir")["dir"] == str(data)
        client.set("k", "acknowledged")
        pid = redis.process.pid
        time.sleep(1.2)  # everysec: on disk within a second, even if the machine went down
        redis.process.send(signal.SIGKILL)
        watch = ServerWatch(servers)
        events = _wait_for(watch, "back", 20.0)
        assert [(e.what, e.server) for e in events] == [("died", redis), ("back", redis)]
        assert redis.process.pid != pid
        assert watch.restarts == {redis.name: 1}
        assert client.get("k") == "acknowledged"  # same URL: same port, same password
        client.close()
    finally:
        servers.stop()
    # The data directory outlives the servers: the next start resumes from it.
    assert any(data.glob("appendonly*"))
    again = start_dev_servers(env, containers=False, redis_data_dir=data)
    try:
        client = redis_client.Redis.from_url(again.redis_url, decode_responses=True)
        assert client.get("k") == "acknowledged"
        client.close()
    finally:
        again.stop()


def _pauses(caplog: pytest.LogCaptureFixture, pattern: str) -> list[float]:
    return [
        float(match.group(1))
        for record in caplog.records
        if (match := re.search(pattern, record.getMessage()))
    ]


def test_a_server_that_keeps_dying_waits_longer_each_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    process = ManagedProcess(
        "redis:1", [sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "crash.log"
    )
    server = LocalServer("redis", process, 1, lambda: False, timeout=5.0)
    process.start()
    servers = DevServers(Endpoints("", ""), "local", "local", 0.0, local=[server])
    watch = ServerWatch(servers)
    events: list[ServerEvent] = []
    caplog.set_level(logging.WARNING, logger="cli.server_watch")
    deadline = time.monotonic() + 4.0
    try:
        while time.monotonic() < deadline:
            events += watch.poll()
            time.sleep(0.02)
    finally:
        process.stop()
    # Noticed once, restarted at once, then each failed start waits longer (0.5 s, 1 s,
    # 2 s ... less up to 20% jitter).
    assert [e.what for e in events] == ["died"]
    pauses = _pauses(caplog, r"failed to restart \(exit 3: .*\); next attempt in ([\d.]+)s")
    assert len(pauses) >= 2
    assert pauses == sorted(pauses)
    assert pauses[0] <= 0.5 < pauses[1] <= 1.0
    assert watch.restarts == {"redis:1": 0}


def test_a_service_that_keeps_exiting_waits_longer_each_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stack = Stack(StackSettings("redis://127.0.0.1:1/0", "127.0.0.1:2"), tmp_path, workers=0)
    stack.processes = {"queue-0": stack.processes["queue-0"]}
    stack.processes["queue-0"].argv = [sys.executable, "-c", "print('bad config'); exit(2)"]
    caplog.set_level(logging.WARNING, logger="cli.supervisor")
    stack.start()
    deadline = time.monotonic() + 3.5
    try:
        while time.monotonic() < deadline:
            stack.poll()
            time.sleep(0.02)
    finally:
        stack.stop()
    pauses = _pauses(caplog, r"queue-0 exited \(2: bad config\); restarting it in ([\d.]+)s")
    assert len(pauses) >= 2
    assert 0.8 <= pauses[0] <= 1.0 < 1.6 <= pauses[1] <= 2.0


def test_two_stacks_never_share_a_data_directory(tmp_path: Path) -> None:
    assert data_dir_of(tmp_path / "stack.json") == tmp_path / "stack-data"
    first = _lock_data_dir(tmp_path / "stack-data")
    try:
        with pytest.raises(StackError, match="another `berth up` uses"):
            _lock_data_dir(tmp_path / "stack-data")
    finally:
        first.close()
    _lock_data_dir(tmp_path / "stack-data").close()  # free again once the first one is gone
    assert stat.S_IMODE((tmp_path / "stack-data").stat().st_mode) == 0o700


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(lambda flags, manifest: get_main(["pods", *flags]), id="get"),
        pytest.param(lambda flags, manifest: apply_main(["-f", manifest, *flags]), id="apply"),
        pytest.param(lambda flags, manifest: delete_main(["pod", "p", *flags]), id="delete"),
    ],
)
def test_clients_say_in_one_line_that_redis_is_not_answering(
    command, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("BERTH_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("BERTH_STATE", str(tmp_path / "none.json"))
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec: {containers: [{name: c, image: busybox}]}\n"
    )
    port = free_port()  # nobody listens there: a Redis that is down
    url = f"redis://:s3cret@127.0.0.1:{port}/0"
    flags = ["--redis-url", url, "--kafka-bootstrap", "127.0.0.1:1"]
    assert command(flags, str(manifest)) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"error: cannot talk to Redis at redis://:***@127.0.0.1:{port}/0 (")
    assert "s3cret" not in err
    assert "Traceback" not in err
