"""cli.processes.ManagedProcess, the one child-process abstraction of the dev servers and the
stack's services: own session, log file, SIGTERM then SIGKILL, always reaped, restartable, and
no orphans when the parent is killed, terminated or interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cli.processes import ManagedProcess
from tests.cli.test_servers import REPO, _pid_alive, _wait_dead

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

# Ignores SIGTERM (and so does its background child, which inherits the disposition), prints
# both pids, and waits.
STUBBORN = """trap '' TERM; sleep 60 & echo "$$ $!"; wait"""


def _wait_for_line(path: Path, timeout: float = 5.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text.endswith("\n"):
            return text
        time.sleep(0.01)
    raise AssertionError(f"no output in {path}")


def test_stop_escalates_to_sigkill_reaps_and_takes_the_group(tmp_path: Path) -> None:
    process = ManagedProcess("stubborn", ["sh", "-c", STUBBORN], tmp_path / "s.log")
    process.start()
    shell, helper = (int(pid) for pid in _wait_for_line(process.log_path).split())
    assert shell == process.pid
    assert os.getsid(shell) == shell  # its own session (and process group)
    started = time.monotonic()
    process.stop(timeout=0.3)
    assert time.monotonic() - started < 3
    assert process.returncode == -signal.SIGKILL  # SIGTERM was ignored
    assert not process.alive()
    assert _wait_dead([shell, helper]) == []  # reaped (no zombie), the helper gone too
    process.stop()  # idempotent


def test_restart_appends_to_one_log_or_starts_it_afresh(tmp_path: Path) -> None:
    for append, expected in ((True, "one\ntwo\n"), (False, "two\n")):
        log = tmp_path / f"{append}.log"
        process = ManagedProcess("echo", ["echo", "one"], log, append_log=append)
        process.start()
        process.popen.wait(5)
        first = process.pid
        process.argv = ["echo", "two"]
        process.start()  # a restart, as the supervisor does once the service exited
        process.popen.wait(5)
        assert process.pid != first
        assert log.read_text() == expected
        process.stop()


def test_start_refuses_a_running_process_and_send_ignores_an_exited_one(tmp_path: Path) -> None:
    process = ManagedProcess("sleep", ["sleep", "60"], tmp_path / "s.log", stop_seconds=2)
    with pytest.raises(RuntimeError, match="never started"):
        _ = process.popen
    process.start()
    try:
        with pytest.raises(RuntimeError, match="running already"):
            process.start()
    finally:
        process.stop()
    assert process.returncode == -signal.SIGTERM
    process.send(signal.SIGTERM)  # gone: nothing to signal, no error


def _parent(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_kill_9_of_the_parent_takes_the_child_down(tmp_path: Path) -> None:
    parent = _parent(
        f"""
        import os, signal
        from pathlib import Path
        from cli.processes import ManagedProcess
        p = ManagedProcess("sleep", ["sleep", "60"], Path({str(tmp_path / "s.log")!r}))
        p.start()
        print(p.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    out, err = parent.communicate(timeout=30)
    assert parent.returncode == -signal.SIGKILL, err
    assert _wait_dead([int(out)]) == []  # the kernel's parent-death signal


# Started from a worker thread, the child has no parent-death signal: only the exit hooks
# (installed from the main thread first, as cli.servers does) can stop it.
_THREADED_PARENT = """
    import threading, time
    from pathlib import Path
    from cli.processes import ManagedProcess, install_exit_hooks
    install_exit_hooks()
    p = ManagedProcess("sleep", ["sleep", "60"], Path({log!r}), stop_seconds=2)
    t = threading.Thread(target=p.start)
    t.start(); t.join()
    print(p.pid, flush=True)
    time.sleep(30)
    """


@pytest.mark.parametrize(
    ("sig", "returncode"),
    [
        pytest.param(signal.SIGTERM, 128 + signal.SIGTERM, id="sigterm"),
        # Python exits by SIGINT after an uncaught KeyboardInterrupt (atexit hooks run first).
        pytest.param(signal.SIGINT, -signal.SIGINT, id="ctrl-c"),
    ],
)
def test_the_exit_hooks_stop_children_on_sigterm_and_ctrl_c(
    tmp_path: Path, sig: signal.Signals, returncode: int
) -> None:
    parent = _parent(_THREADED_PARENT.format(log=str(tmp_path / "s.log")))
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _pid_alive(child)
        parent.send_signal(sig)
        parent.wait(timeout=15)
    finally:
        parent.kill()
        parent.communicate()
    assert parent.returncode == returncode
    assert _wait_dead([child], timeout=1.0) == []
