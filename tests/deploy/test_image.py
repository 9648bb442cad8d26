"""The container image (Dockerfile), without a Docker engine: the Dockerfile is linted
(hadolint, from its PyPI wheel) and checked against the rules berth's image keeps, and the
image's contents are rebuilt the way the Dockerfile builds them: the same two scripts
(deploy/docker/build-wheels.sh, then install.sh into a clean virtualenv), then every entry
point is run from that virtualenv, outside the source tree."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
SERVICES = ("queue", "scheduler", "binder", "adapter", "dashboard")
VERSION = "0.1.0"
WHEELHOUSE = Path(
    os.environ.get("BERTH_TEST_WHEELHOUSE") or Path.home() / ".cache" / "berth-test-wheels"
)
"""Dependency wheels kept between runs: the first run fills it from the index (the build
stage's own command), later runs build offline from it."""


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    result = subprocess.run(
        [hadolint, "--format", "json", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert json.loads(result.stdout or "[]") == [], result.stdout
    assert result.returncode == 0


def test_the_dockerfile_keeps_the_images_rules() -> None:
    steps = instructions()
    args = {rest.split("=")[0]: rest for word, rest in steps if word == "ARG"}
    base = args["PYTHON_IMAGE"].partition("=")[2]
    # A pinned base: an exact Python patch release and Debian release, never "latest".
    assert re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", base), base
    froms = [rest for word, rest in steps if word == "FROM"]
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"]  # multi-stage
    (user,) = [rest for word, rest in steps if word == "USER"]
    uid = user.split(":")[0]
    assert uid.isdigit()
    assert int(uid) != 0  # non-root, numeric (runAsNonRoot can check it)
    values = (ROOT / "deploy" / "helm" / "berth" / "values.yaml").read_text()
    assert f"runAsUser: {uid}" in values
    (cmd,) = [json.loads(rest) for word, rest in steps if word == "CMD"]
    assert cmd[:2] == ["python", "-m"]
    assert cmd[2].startswith("services.")
    runs = " ".join(rest for word, rest in steps if word == "RUN")
    assert "build-wheels.sh /src /wheels" in runs
    assert 'install.sh /wheels /opt/berth "${BERTH_VERSION}"' in runs
    assert f"BERTH_VERSION={VERSION}" in args["BERTH_VERSION"]
    for word, rest in steps:
        if word == "COPY" and "--from" not in rest:
            source = rest.split()[0]
            assert (ROOT / source).exists(), f"COPY {source}: no such file"


def _fill_wheelhouse(env: dict[str, str]) -> None:
    """Fill the cache, again whenever pyproject.toml's dependencies change (a stamp of them
    is kept beside the wheels: a dependency added since the last fill must be fetched)."""
    stamp = WHEELHOUSE / "pyproject.sha256"
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    filled = stamp.exists() and stamp.read_text() == wanted
    if filled and any(WHEELHOUSE.glob("hatchling-*.whl")):
        return
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["sh", str(ROOT / "deploy" / "docker" / "build-wheels.sh"), str(ROOT), str(WHEELHOUSE)],
        env=env,
        check=True,
        timeout=1800,
        capture_output=True,
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(WHEELHOUSE), "hatchling"],
        env=env,
        check=True,
        timeout=600,
        capture_output=True,
    )
    for built in WHEELHOUSE.glob("berth-*.whl"):
        built.unlink()  # the source tree's wheel is built afresh by every run
    stamp.write_text(wanted)


@pytest.mark.timeout(1800)
def test_every_entry_point_runs_from_a_clean_virtualenv(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BERTH_", "PYTHON"))}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    _fill_wheelhouse(env)
    wheels, venv = tmp_path / "wheels", tmp_path / "opt-berth"
    offline = env | {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELHOUSE)}
    for script, args in (
        ("build-wheels.sh", [str(ROOT), str(wheels)]),
        ("install.sh", [str(wheels), str(venv), VERSION]),
    ):
        done = subprocess.run(
            ["sh", str(ROOT / "deploy" / "docker" / script), *args],
            env=offline,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert done.returncode == 0, f"{script}: {done.stderr[-2000:]}"
    python = venv / "bin" / "python"
    # Clean: only the virtualenv's own site-packages, nothing of the build machine's.
    paths = subprocess.run(
        [str(python), "-c", "import sys; print('\\n'.join(sys.path))"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(ROOT) not in paths
    assert "/work/main/.venv" not in paths
    helped = subprocess.run(
        [str(venv / "bin" / "berth"), "--help"], cwd=tmp_path, env=env, capture_output=True
    )
    assert helped.returncode == 0
    assert b"Traceback" not in helped.stdout + helped.stderr
    service_env = env | {
        "BERTH_REDIS_URL": "redis://127.0.0.1:1/0",
        "BERTH_KAFKA_BOOTSTRAP": "127.0.0.1:1",
        "BERTH_KUBE": str(_kubeconfig(tmp_path)),
        "BERTH_CONFIG": str(_berth_profile(tmp_path)),
        "BERTH_METRICS_PORT": "0",
    }
    for name in SERVICES:
        _runs_until_it_waits_for_redis(python, name, tmp_path, service_env)
    # Every module of the four packages imports (the lazily imported ones too: the
    # Kubernetes client, the dashboard's server), and the Lua scripts are installed.
    check = (
        "import importlib, pkgutil, pathlib\n"
        "for top in ('cli', 'scheduling', 'services', 'shared'):\n"
        "    package = importlib.import_module(top)\n"
        "    for info in pkgutil.walk_packages(package.__path__, top + '.'):\n"
        "        if '.test_' not in info.name and not info.name.endswith('__main__'):\n"
        "            importlib.import_module(info.name)\n"
        "import shared.store, services.queue\n"
        "for pkg in (shared.store, services.queue):\n"
        "    assert list(pathlib.Path(pkg.__file__).parent.glob('lua/*.lua')), pkg\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [str(python), "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.stdout.strip() == "ok", done.stderr[-3000:]


def _kubeconfig(directory: Path) -> Path:
    path = directory / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return path


def _berth_profile(directory: Path) -> Path:
    path = directory / "config.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles: [{schedulerName: berth}]\n"
    )
    return path


REACHED_REDIS = ("waiting for Redis", "cannot connect to Redis at redis://127.0.0.1:1/0")


def _runs_until_it_waits_for_redis(python: Path, name: str, cwd: Path, env: dict[str, str]) -> None:
    """The chart's command of the service starts (every module it needs imported from the
    installed wheel), reaches its first Redis call, and stops cleanly on SIGTERM."""
    values = yaml.safe_load((ROOT / "deploy" / "helm" / "berth" / "values.yaml").read_text())
    command = [a.replace("$(POD_NAME)", "image-test") for a in values[name]["command"]]
    assert command[:3] == ["python", "-m", f"services.{name}"]  # as the chart runs it
    process = subprocess.Popen(
        [str(python), *command[1:]],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        for line in process.stdout:
            lines.append(line)
            if any(mark in line for mark in (*REACHED_REDIS, "Traceback")):
                break
    finally:
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=60)
    output = "".join(lines) + rest
    assert "Traceback" not in output, f"services.{name}: {output[-3000:]}"
    assert any(mark in output for mark in REACHED_REDIS), f"services.{name}: {output[-3000:]}"
