"""The dashboard in a cluster: Kubernetes users, authenticated by the API server.

Beside the standalone tokens (services/dashboard/auth.py), a bearer token the tokens file does
not know is sent to the API server in a TokenReview (authentication.k8s.io/v1), as kubectl's
token would be. A token the server authenticates becomes an Identity whose reach RBAC
decides, through SubjectAccessReviews (authorization.k8s.io/v1), as `kubectl auth can-i`:

- it reads pods of every namespace when it may list pods cluster-wide, else of the namespaces
  (of those the store holds) where it may list pods;
- it reads cluster objects (nodes) when it may list nodes (the `admin` flag);
- it writes nothing through the dashboard: in Kubernetes mode the API server owns the objects.

Answers are cached for CACHE_SECONDS per token (as kube-apiserver's webhook authenticator and
authorizer cache theirs), so the page's polling costs no review per request.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from services.dashboard.auth import Identity, digest
from shared.kube.client import KubeApi

CACHE_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class KubeUser:
    username: str
    uid: str
    groups: tuple[str, ...]


class KubeAuthenticator:
    def __init__(
        self,
        api: KubeApi,
        namespaces: Callable[[], Awaitable[list[str]]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.namespaces = namespaces
        """The namespaces the store holds (candidates for a namespaced user)."""
        self.clock = clock
        self._cache: dict[str, tuple[float, Identity | None]] = {}
        self.reviews = 0

    async def identify(self, token: str) -> Identity | None:
        """The user's Identity, or None when the API server does not authenticate it.
        KubeUnavailableError / KubeApiError when it cannot answer (the caller says 503)."""
        key = digest(token)
        now = self.clock()
        cached = self._cache.get(key)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1]
        user = await self._review(token)
        found = None if user is None else await self._reach(user)
        self._cache[key] = (now, found)
        if len(self._cache) > 10_000:
            self._cache = {k: v for k, v in self._cache.items() if now - v[0] < CACHE_SECONDS}
        return found

    async def _review(self, token: str) -> KubeUser | None:
        self.reviews += 1
        status = await self.api.review_token(token)
        if not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        return KubeUser(
            str(user.get("username") or ""),
            str(user.get("uid") or ""),
            tuple(str(g) for g in user.get("groups") or ()),
        )

    async def _may(self, user: KubeUser, resource: str, namespace: str) -> bool:
        self.reviews += 1
        return await self.api.may(user.username, user.uid, user.groups, "list", resource, namespace)

    async def _reach(self, user: KubeUser) -> Identity:
        nodes = await self._may(user, "nodes", "")
        if await self._may(user, "pods", ""):
            return Identity(user.username, admin=nodes, namespaces=frozenset())
        allowed = [ns for ns in await self.namespaces() if await self._may(user, "pods", ns)]
        return Identity(user.username, admin=False, namespaces=frozenset(allowed))
