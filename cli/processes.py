"""Child processes of the berth command: the dev servers (cli/servers.py) and the stack's
services (cli/supervisor.py) are both a `ManagedProcess`.

What every child gets, so that none outlives the berth process that started it:

- its own session and process group (start_new_session): stop() signals the whole group, so
  helpers the child forked go too, and a Ctrl-C at the terminal reaches only berth, which then
  stops its children in order;
- a parent-death signal (Linux PR_SET_PDEATHSIG, SIGTERM) when started from the main thread:
  if berth dies without cleaning up (kill -9), the kernel stops the child. Only from the main
  thread: the signal follows the thread that forks, and only the main thread lives as long as
  the process; children started from another thread rely on stop() and the exit hooks;
- stop(): SIGTERM to the group, SIGKILL after a timeout, always reaped, then SIGKILL to the
  group again in case a helper outlived the child;
- its output (stdout and stderr) in a log file;
- exit hooks (`install_exit_hooks`): at interpreter exit every child still running is stopped,
  and SIGTERM / SIGHUP become SystemExit (when nobody else handles them) so that exit runs.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

STOP_SECONDS = 10.0
"""How long stop() waits after SIGTERM before SIGKILL (and again after SIGKILL)."""

_PR_SET_PDEATHSIG = 1


def parent_death_signal(parent_pid: int) -> Callable[[], None]:
    """preexec_fn: the kernel sends SIGTERM to the child when the starting thread dies."""
    libc = ctypes.CDLL(None, use_errno=True)

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Signal a process group that may be gone already (or not ours to signal any more)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@dataclass(slots=True, eq=False)
class ManagedProcess:
    """One child process in its own session, output to `log_path`; `start()` again restarts
    it (the supervisor does, with `restarts` and `exited_at` as its bookkeeping)."""

    name: str
    argv: list[str]
    log_path: Path
    env: Mapping[str, str] | None = None
    """None: this process's environment."""
    cwd: Path | None = None
    append_log: bool = False
    """Append to the log (a restarted service keeps one log) instead of starting it afresh
    (a server started again after a failed attempt shows that attempt's output only)."""
    stop_seconds: float = STOP_SECONDS
    restarts: int = 0
    exited_at: float | None = None
    started_at: float | None = None
    """time.monotonic() of the last start."""
    _popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        if self.alive():
            raise RuntimeError(f"{self.name} is running already (pid {self.pid})")
        install_exit_hooks()
        preexec = None
        if (
            sys.platform.startswith("linux")
            and threading.current_thread() is threading.main_thread()
        ):
            preexec = parent_death_signal(os.getpid())
        with self.log_path.open("ab" if self.append_log else "wb") as out:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
                preexec_fn=preexec,
            )
        self.exited_at = None
        self.started_at = time.monotonic()
        _LIVE.add(self)

    @property
    def popen(self) -> subprocess.Popen[bytes]:
        if self._popen is None:
            raise RuntimeError(f"{self.name} was never started")
        return self._popen

    @property
    def pid(self) -> int | None:
        return None if self._popen is None else self._popen.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once exited (negative: killed by that signal); None before."""
        return None if self._popen is None else self._popen.poll()

    def alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def send(self, sig: signal.Signals) -> None:
        """Signal the child's group, if the child still runs."""
        if self._popen is not None and self._popen.poll() is None:
            signal_group(self._popen.pid, sig)

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM the group, then SIGKILL after `timeout` (default `stop_seconds`); always
        reaps the child. Idempotent."""
        _LIVE.discard(self)
        popen = self._popen
        if popen is None:
            return
        wait = self.stop_seconds if timeout is None else timeout
        if popen.poll() is None:
            signal_group(popen.pid, signal.SIGTERM)
            try:
                popen.wait(wait)
            except subprocess.TimeoutExpired:
                signal_group(popen.pid, signal.SIGKILL)
                popen.wait(wait)
        # Helpers the child forked share its group; make sure none survive.
        signal_group(popen.pid, signal.SIGKILL)

    def log_tail(self, limit: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""


# Every child started and not yet stopped, for the exit hook.
_LIVE: set[ManagedProcess] = set()
_HOOKS_PID: int | None = None


def stop_all() -> None:
    """Stop every child still running: SIGTERM to all first, so they wind down together."""
    if os.getpid() != _HOOKS_PID:
        return  # a forked copy of this interpreter: the children are not its own
    running = list(_LIVE)
    for process in running:
        process.send(signal.SIGTERM)
    for process in running:
        process.stop()


def _exit_on_signal(signum: int, _frame: FrameType | None) -> None:
    # SystemExit unwinds finally blocks and fixtures, then atexit stops the children.
    raise SystemExit(128 + signum)


def install_exit_hooks() -> None:
    """Stop the children at interpreter exit, and make SIGTERM / SIGHUP an exit where nobody
    else decided what they do (pytest and asyncio apps may have). Idempotent."""
    global _HOOKS_PID
    if os.getpid() == _HOOKS_PID:
        return
    _HOOKS_PID = os.getpid()
    atexit.register(stop_all)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _exit_on_signal)
