"""Redis clients for the berth services: redis-py asyncio, with hiredis doing the protocol work.

redis-py's asyncio connection packs commands in pure Python (~2 us per argument); the queue
sends scripts with tens of thousands of arguments, so `FastConnection` packs with
`hiredis.pack_command` (C) instead. Replies are parsed by hiredis whenever it is installed.

Every client is made by `connect` (redis:// and rediss:// alike, with the password and TLS
settings of shared.runtime.security); `open_redis` also checks that the server answers, and turns a
refusal (certificate, password, nothing listening) into one line naming the URL.
"""

from __future__ import annotations

from typing import Any

import hiredis
from redis.asyncio import Connection, ConnectionPool, Redis, SSLConnection
from redis.asyncio.connection import parse_url
from redis.exceptions import AuthenticationError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from shared.runtime.security import ConnectError, RedisSecurity


class _HiredisPacking:
    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0]
        # Multi-word command names ("CONFIG GET") must be split: leave those to redis-py.
        if (isinstance(first, str) and " " in first) or (
            isinstance(first, bytes) and b" " in first
        ):
            packed: list[bytes] = super().pack_command(*args)  # type: ignore[misc]
            return packed
        return [hiredis.pack_command(args)]


class FastConnection(_HiredisPacking, Connection):
    """redis:// with hiredis packing."""


class FastSSLConnection(_HiredisPacking, SSLConnection):
    """rediss:// with hiredis packing (the TLS handshake and verification are SSLConnection's)."""


def connect(url: str, security: RedisSecurity | None = None, **options: Any) -> Redis:
    """An asyncio client for `url` (redis://[user:password@]host:port/db, or rediss:// for
    TLS), authenticating and verifying as `security` says. No I/O until the first command.

    redis-py's `from_url` lets the URL's scheme pick the connection class (SSLConnection for
    rediss://) over one given as an option, so the pool is built here from the parsed URL:
    URL query parameters still win over `security` and `options`, as in redis-py."""
    security = security or RedisSecurity()
    kwargs: dict[str, Any] = {**security.client_options(url), **options}
    kwargs.update(parse_url(url))
    if "connection_class" not in options:
        chosen = kwargs.get("connection_class", Connection)
        if chosen is SSLConnection:
            kwargs["connection_class"] = FastSSLConnection
        elif chosen is Connection:
            kwargs["connection_class"] = FastConnection
    return Redis.from_pool(ConnectionPool(**kwargs))


async def check_redis(redis: Redis, url: str, security: RedisSecurity | None = None) -> None:
    """PING `redis`; ConnectError with a one-line reason (URL password hidden) if it fails."""
    security = security or RedisSecurity()
    try:
        await redis.ping()
    except (RedisConnectionError, RedisTimeoutError, AuthenticationError, ResponseError) as exc:
        raise ConnectError(security.explain(url, str(exc) or type(exc).__name__)) from None


async def open_redis(url: str, security: RedisSecurity | None = None, **options: Any) -> Redis:
    """`connect`, then `check_redis` (the client is closed if the check fails)."""
    redis = connect(url, security, **options)
    try:
        await check_redis(redis, url, security)
    except BaseException:
        await redis.aclose()
        raise
    return redis


async def ping_or_refuse(redis: Redis, url: str, security: RedisSecurity | None = None) -> bool:
    """PING `redis`. An outage (refused, timed out, Redis loading its data) is raised as is,
    for the caller to retry; a refusal no retry can fix (a certificate that does not verify,
    a wrong password or user) is a ConnectError with the one-line diagnosis."""
    security = security or RedisSecurity()
    try:
        return bool(await redis.ping())
    except (AuthenticationError, ResponseError) as exc:
        raise ConnectError(security.explain(url, str(exc) or type(exc).__name__)) from None
    except RedisConnectionError as exc:
        if any(word in str(exc) for word in ("CERTIFICATE", "SSL", "certificate")):
            raise ConnectError(security.explain(url, str(exc))) from None
        raise
