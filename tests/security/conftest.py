"""Fixtures of the secured-connection tests: a PKI, Redis and the broker behind TLS (see
tests/security/tls.py for what serves the TLS)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _pytest.terminal import TerminalReporter

from tests.security.tls import TLSProxy, TLSRedis, make_pki, tls_redis, tls_tansu


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki"))


SERVED: dict[str, str] = {}
"""What served TLS in this run, for the summary."""


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    for what, by in SERVED.items():
        terminalreporter.write_line(f"{what} TLS: {by}")


@pytest.fixture(scope="session")
def redis_tls(pki: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSRedis]:
    with tls_redis(pki, tmp_path_factory.mktemp("redis-tls")) as server:
        SERVED["Redis"] = server.terminator
        yield server


@pytest.fixture(scope="session")
def kafka_tls(
    pki: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, TLSProxy]]:
    with tls_tansu(pki, tmp_path_factory.mktemp("kafka-tls")) as found:
        SERVED["Kafka"] = "TLS proxy in front of the Tansu broker (it has no TLS listener)"
        yield found
