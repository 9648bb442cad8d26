"""Extenders over HTTPS verify the server's certificate: against the configured CA, else the
system's; only an explicit `tlsConfig.insecure: true` turns verification off (a real TLS
server with a CA made here by openssl)."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from scheduling.framework.extender import ExtenderError, find_nodes_that_pass_extenders
from shared.config.types import ExtenderTLSConfig
from tests.extender.test_extender import NODES, POD, extender


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, and a server certificate for 127.0.0.1 signed by it."""
    path = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
             "ca.crt", "-days", "1", "-subj", "/CN=berth-test-ca", cwd=path)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
             "server.csr", "-subj", "/CN=127.0.0.1", cwd=path)  # fmt: skip
    (path / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.crt", "-days", "1", "-extfile", "san.ext",
             cwd=path)  # fmt: skip
    return path


@pytest.fixture
def https_url(pki: Path) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"null")
            data = json.dumps({"Nodes": body["Nodes"]}).encode()  # every node fits
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki / "server.crt", pki / "server.key")
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}/scheduler"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def _filter(url: str, tls: ExtenderTLSConfig | None) -> list[str]:
    ext = extender(url, enable_https=True, tls_config=tls, prioritize_verb="")
    kept = find_nodes_that_pass_extenders([ext], POD, NODES, {})
    return [n.metadata.name for n in kept]


def test_the_configured_ca_verifies_the_server(https_url: str, pki: Path) -> None:
    assert _filter(https_url, ExtenderTLSConfig(ca_file=str(pki / "ca.crt"))) == [
        "n1",
        "n2",
        "n3",
    ]
    ca_data = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
    assert _filter(https_url, ExtenderTLSConfig(ca_data=ca_data)) == ["n1", "n2", "n3"]


def test_enable_https_without_a_ca_still_verifies(https_url: str) -> None:
    """Upstream turns verification off here; berth checks against the system's CAs, which
    do not know this server's: the call fails, naming the reason."""
    with pytest.raises(ExtenderError, match="CERTIFICATE_VERIFY_FAILED"):
        _filter(https_url, None)


def test_only_an_explicit_insecure_skips_verification(https_url: str) -> None:
    assert _filter(https_url, ExtenderTLSConfig(insecure=True)) == ["n1", "n2", "n3"]
