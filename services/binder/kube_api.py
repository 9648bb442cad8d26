"""The binder's calls to the Kubernetes API in Kubernetes mode: bind and evict.

In Kubernetes mode the API server is the truth about where a pod runs, so the binder binds
through `pods/binding` *before* it records the binding in the store (the adapter's watch then
confirms it); a binding the server refuses is never recorded. Victims of preemption are
evicted through the policy/v1 Eviction API, which enforces PodDisruptionBudgets on the server;
the adapter removes them from the store when the server deletes them (they hold their
resources while they terminate, as in kube-scheduler's cache).

How answers map to outcomes (`bind_answer`, `evict_answer`, tested table-driven):

| API answer | bind | evict |
|---|---|---|
| 201/200 | ok | ok (a `Preempted` Event on the victim) |
| 409 Conflict (already assigned, uid precondition) | conflict | - |
| 404 Not Found | gone (the pod was deleted) | ok (the victim is gone already) |
| 429 Too Many Requests (a PDB, or rate limiting) | retried, then error | retried, then refused |
| 5xx, unreachable | retried, then error | retried, then error |
| other 4xx (403 Forbidden, 422 Invalid) | error | error |
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from shared.kube.client import KubeApi, KubeApiError, KubeUnavailableError
from shared.kube.events import preempted_event
from shared.models import Pod
from shared.runtime.retry import Backoff

log = logging.getLogger(__name__)

Answer = Literal["ok", "conflict", "gone", "refused", "error", "retry"]

RETRY_INITIAL_SECONDS = 0.2
RETRY_MAX_SECONDS = 2.0
RETRIES = 4
"""Waits between tries of a bind or an eviction the server asked to retry (429, 5xx, down);
kubectl drain waits 5 s between eviction tries; a binder holds the node's reservation
meanwhile, so it gives up sooner and the pod is retried through the queue."""


@dataclass(frozen=True, slots=True)
class ApiAnswer:
    result: Answer
    message: str = ""


def bind_answer(error: Exception | None) -> ApiAnswer:
    if error is None:
        return ApiAnswer("ok")
    if isinstance(error, KubeUnavailableError):
        return ApiAnswer("retry", f"API server unreachable: {error}")
    assert isinstance(error, KubeApiError)
    text = f"binding refused by the API server ({error.code} {error.reason}): {error.message}"
    if error.code == 409:
        return ApiAnswer("conflict", text)
    if error.code == 404:
        return ApiAnswer("gone", "the pod was deleted from the API server")
    if error.code == 429 or error.code >= 500:
        return ApiAnswer("retry", text)
    return ApiAnswer("error", text)


def evict_answer(error: Exception | None) -> ApiAnswer:
    if error is None:
        return ApiAnswer("ok")
    if isinstance(error, KubeUnavailableError):
        return ApiAnswer("retry", f"API server unreachable: {error}")
    assert isinstance(error, KubeApiError)
    if error.code == 404:
        return ApiAnswer("ok", "the victim is gone already")
    text = f"eviction refused ({error.code} {error.reason}): {error.message}"
    if error.code == 429 or error.code >= 500:
        return ApiAnswer("retry", text)
    return ApiAnswer("error", text)


class KubeWriter:
    """Binds and evicts through the API (see the module docstring)."""

    def __init__(self, api: KubeApi, instance: str) -> None:
        self.api = api
        self.instance = instance

    async def bind(self, pod_key: str, uid: str, node: str) -> ApiAnswer:
        namespace, _, name = pod_key.partition("/")

        async def call() -> None:
            await self.api.bind(namespace, name, uid, node)

        answer = await _tries(call, bind_answer)
        return ApiAnswer("error", answer.message) if answer.result == "retry" else answer

    async def evict(self, victim: Pod, preemptor: Pod, node: str) -> ApiAnswer:
        meta = victim.metadata

        async def call() -> None:
            await self.api.evict(meta.namespace, meta.name, meta.uid)

        answer = await _tries(call, evict_answer)
        if answer.result == "retry":
            return ApiAnswer("refused", answer.message)
        if answer.result == "ok" and not answer.message:
            event = preempted_event(victim, preemptor, node, self.instance)
            try:
                await self.api.create_event(event)
            except (KubeApiError, KubeUnavailableError) as e:
                log.warning("no Preempted event for %s: %s", victim.key, e)
        return answer


async def _tries(
    call: Callable[[], Awaitable[None]], judge: Callable[[Exception | None], ApiAnswer]
) -> ApiAnswer:
    """`call`, again up to RETRIES times (shared.runtime.retry.Backoff pauses) while `judge` says
    "retry"."""
    answer = ApiAnswer("error", "not tried")
    backoff = Backoff(initial=RETRY_INITIAL_SECONDS, maximum=RETRY_MAX_SECONDS)
    for tries_left in range(RETRIES, -1, -1):
        try:
            await call()
            error: Exception | None = None
        except (KubeApiError, KubeUnavailableError) as e:
            error = e
        answer = judge(error)
        if answer.result != "retry" or not tries_left:
            return answer
        delay = backoff.next()
        log.info("%s; trying again in %.1fs", answer.message, delay)
        await asyncio.sleep(delay)
    return answer
