"""The Kubernetes API for Kubernetes-mode tests: kmock's server with berth's extensions
(tests/kube/emulator.py), and a kubeconfig pointing at it (for the services and kubectl)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import kmock
import pytest
import yaml

from tests.kube.emulator import ApiEmulator


@dataclass
class ApiServer:
    emulator: ApiEmulator
    url: str
    kubeconfig: Path


def write_kubeconfig(path: Path, server: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulator", "cluster": {"server": server}}],
        "users": [{"name": "berth", "user": {"token": "emulator-token"}}],
        "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "berth"}}],
        "current-context": "emulator",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
async def api_server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    async with ApiEmulator() as emulator, kmock.Server(emulator) as server:
        url = str(server.url).rstrip("/")
        yield ApiServer(emulator, url, write_kubeconfig(tmp_path / "kubeconfig", url))
