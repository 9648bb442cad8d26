"""Where berth finds the Kubernetes API and how hard it may press it: the kubeconfig or the
pod's service account (`load_config`), clientConnection's rate limit and timeouts
(`ClientSettings`), and client-go's token bucket that enforces the limit."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lightkube import KubeConfig


def load_config(kubeconfig: str | None = None, context: str | None = None) -> KubeConfig:
    """A kubeconfig file (KUBECONFIG-style path), or the pod's service account in a cluster.

    Raises ValueError naming what is missing when neither is available."""
    if kubeconfig:
        path = Path(kubeconfig).expanduser()
        if not path.is_file():
            raise ValueError(f"kubeconfig {path}: no such file")
        return KubeConfig.from_file(path)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return KubeConfig.from_service_account()
    raise ValueError(
        "no Kubernetes API: pass --kubeconfig PATH (or BERTH_KUBECONFIG), "
        "or run in a cluster (KUBERNETES_SERVICE_HOST)"
    )


@dataclass(frozen=True)
class ClientSettings:
    """How berth behaves as an API client (kube-scheduler's `clientConnection`, plus the
    timeouts it takes as flags).

    - qps/burst: client-side rate limit on requests (a token bucket, as client-go's);
      kube-scheduler's defaults, 50 and 100. qps < 0 turns the limiter off.
    - request_timeout: any request but a watch.
    - watch_read_timeout: a watch stream that sends nothing (no event, no BOOKMARK) for
      this long is dead (a connection lost behind a load balancer): dropped and resumed.
      Must exceed the server's bookmark interval (about a minute on kube-apiserver).
    - page_size: objects per list page (limit/continue).
    """

    qps: float = 50.0
    burst: int = 100
    request_timeout: float = 30.0
    watch_read_timeout: float = 90.0
    page_size: int = 500


class TokenBucket:
    """client-go's flowcontrol token bucket: `burst` tokens, refilled at `qps` a second;
    `take` waits for a token."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self.clock = clock
        self.tokens = float(self.burst)
        self.stamp = clock()
        self.waited = 0.0
        """Seconds spent waiting for tokens (a metric: how much the limit held us back)."""
        self._lock = asyncio.Lock()

    async def take(self) -> None:
        if self.qps < 0:
            return
        async with self._lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.qps)
            self.stamp = now
            self.tokens -= 1.0
            if self.tokens < 0:
                pause = -self.tokens / self.qps
                self.waited += pause
                await asyncio.sleep(pause)
