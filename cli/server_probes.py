"""Whether a local Redis or Kafka-API broker answers: the probes the launcher (cli/servers.py)
waits on, each one round trip of the server's own protocol."""

from __future__ import annotations

import socket
import struct


def redis_ping(host: str, port: int, password: str = "") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5) as sock:
            if password:
                secret = password.encode()
                sock.sendall(b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(secret), secret))
                if not sock.recv(64).startswith(b"+OK"):
                    return False
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def kafka_api_versions(host: str, port: int) -> bool:
    """One ApiVersions v0 round trip: the broker parses requests, not just accepts sockets."""
    client_id = b"berth-launcher"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=0.5) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            header = _recv_exact(sock, 8)
            _size, correlation_id = struct.unpack(">ii", header)
            return bool(correlation_id == 7)
    except OSError:
        return False


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = b""
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("closed")
        chunks += chunk
    return chunks
