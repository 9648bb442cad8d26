"""A client of the API front door (`berth up --tokens FILE`): what StackClient does through
Redis, done over HTTP with a token, so the dashboard service decides what the token may touch
(services/dashboard/app.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from cli.client import state_env
from services.queue.client import PodRow
from shared.runtime.env import ENV_API_URL, ENV_TOKEN, StackError


class ApiError(StackError):
    """The front door refused (401, 403, ...) or could not be reached; the message says why."""


@dataclass(frozen=True, slots=True)
class ApiTarget:
    url: str
    token: str


def read_api(args: object, env: Mapping[str, str] | None = None) -> ApiTarget | None:
    """The front door to use: its URL from $BERTH_API_URL or the state file, the token from
    --token or $BERTH_TOKEN. None when the stack has none (clients use Redis directly);
    StackError when one of the two is missing."""
    env = os.environ if env is None else env
    url = env.get(ENV_API_URL) or state_env(env).get(ENV_API_URL, "")
    token = getattr(args, "token", None) or env.get(ENV_TOKEN, "")
    if url and not token:
        raise StackError(
            f"this stack's API ({url}) needs a token: give --token TOKEN or set {ENV_TOKEN}"
        )
    if token and not url:
        raise StackError(
            "a token was given but the stack has no API front door (berth up --tokens FILE); "
            f"set {ENV_API_URL} to its URL"
        )
    return ApiTarget(url if url.endswith("/") else url + "/", token) if url else None


class ApiClient:
    def __init__(self, target: ApiTarget) -> None:
        self.target = target
        self.warnings: list[str] = []
        """What the last apply warned about, one line each."""

    async def _call(
        self, method: str, path: str, *, params: Mapping[str, str] | None = None, body: str = ""
    ) -> Any:
        headers = {"Authorization": f"Bearer {self.target.token}"}
        if body:
            headers["Content-Type"] = "application/yaml"
        url = self.target.url + path
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session,
                session.request(
                    method, url, params=params, data=body.encode() or None, headers=headers
                ) as response,
            ):
                text = await response.text()
                status = response.status
        except aiohttp.ClientError as exc:
            raise ApiError(f"{self.target.url}: {exc}") from None
        try:
            data = json.loads(text)
        except ValueError:
            data = {"error": text.strip()[:200]}
        if status >= 400:
            error = data.get("error") if isinstance(data, dict) else None
            raise ApiError(f"{status}: {error or text.strip()[:200]}")
        return data

    async def apply(self, texts: Sequence[str]) -> list[str]:
        """Apply manifest texts (one document stream); "kind/key created|configured" lines."""
        data = await self._call("POST", "api/apply", body="\n---\n".join(texts))
        self.warnings = list(data.get("warnings", []))
        return list(data["lines"])

    async def delete(self, kind: str, namespace: str, name: str) -> bool:
        params = {"namespace": namespace} if namespace else None
        data = await self._call("DELETE", f"api/objects/{kind}/{name}", params=params)
        return bool(data["deleted"])

    async def pod_rows(self) -> list[PodRow]:
        data = await self._call("GET", "api/pods", params={"limit": "0"})
        rows = [PodRow.from_json(p) for p in data["pods"]]
        rows.sort(key=lambda r: (r.namespace, r.name))
        return rows

    async def node_rows(self) -> list[dict[str, Any]]:
        return list((await self._call("GET", "api/nodes"))["nodes"])

    async def queue_rows(self) -> dict[str, Any]:
        return dict(await self._call("GET", "api/queues"))

    async def pod_events(self, key: str) -> dict[str, Any]:
        """The pod's Events (newest first) and its end record, if any."""
        return dict(await self._call("GET", "api/events", params={"pod": key}))

    async def cluster_queue_rows(self) -> list[dict[str, Any]]:
        return list((await self._call("GET", "api/clusterqueues"))["clusterQueues"])
