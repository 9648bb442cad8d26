"""shared/runtime/settings.py: flag, else variable, else the settings file, else the default; one
line naming the setting and its value for every refused value; and a service given a bad
value exits 2 with that line, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import pytest
from msgspec import Meta

from services.queue.config import FAIR_SHARING_STRATEGIES, QueueSettings
from services.queue.quota.fair_preemption import STRATEGIES
from shared.runtime.env import StackError, StackSettings
from shared.runtime.settings import (
    ENV_SETTINGS_FILE,
    SettingsError,
    add_flags,
    fields,
    read,
    setting,
    with_settings_file,
)

ROOT = Path(__file__).resolve().parents[2]


def _double(raw: str) -> int:
    return 2 * int(raw)


@dataclass(frozen=True, slots=True)
class Sample:
    port: Annotated[int, Meta(ge=0, le=65535), setting("BERTH_T_PORT", "a port", flag="--port")] = (
        80
    )
    ratio: Annotated[float | None, setting("BERTH_T_RATIO", "a ratio")] = None
    on: Annotated[bool, setting("BERTH_T_ON", "a switch", flag="--on")] = False
    mode: Annotated[Literal["a", "b"], setting("BERTH_T_MODE", "a mode", flag="--mode")] = "a"
    doubled: Annotated[int, setting("BERTH_T_DOUBLED", "doubled", parse=_double)] = 0
    secret: Annotated[int, setting("BERTH_T_SECRET", "hidden", secret=True)] = 0
    plain: int = 7
    """Not a setting: never read."""


@pytest.mark.parametrize(
    ("env", "flags", "want"),
    [
        ({}, {}, Sample()),
        ({"BERTH_T_PORT": "8080"}, {}, Sample(port=8080)),
        ({"BERTH_T_PORT": "8080"}, {"port": "9090"}, Sample(port=9090)),
        ({"BERTH_T_PORT": ""}, {"port": None}, Sample()),
        ({"BERTH_T_PORT": " 81 "}, {}, Sample(port=81)),
        ({"BERTH_T_RATIO": "0.5"}, {}, Sample(ratio=0.5)),
        ({"BERTH_T_ON": "1"}, {}, Sample(on=True)),
        ({"BERTH_T_ON": "true"}, {}, Sample(on=True)),
        ({"BERTH_T_ON": "0"}, {"on": None}, Sample(on=False)),
        ({"BERTH_T_ON": "0"}, {"on": True}, Sample(on=True)),
        ({"BERTH_T_MODE": "b"}, {}, Sample(mode="b")),
        ({"BERTH_T_DOUBLED": "4"}, {}, Sample(doubled=8)),
        ({"plain": "9"}, {"plain": 9}, Sample()),
    ],
)
def test_flag_then_variable_then_default(
    env: dict[str, str], flags: dict[str, object], want: Sample
) -> None:
    assert read(Sample, env, flags) == want


@pytest.mark.parametrize(
    ("env", "flags", "message"),
    [
        ({"BERTH_T_PORT": "x"}, {}, "BERTH_T_PORT='x': expected `int`, got `str`"),
        ({"BERTH_T_PORT": "70000"}, {}, "BERTH_T_PORT='70000': expected `int` <= 65535"),
        ({}, {"port": "-1"}, "--port='-1': expected `int` >= 0"),
        ({"BERTH_T_RATIO": "half"}, {}, "BERTH_T_RATIO='half': expected `float`, got `str`"),
        ({"BERTH_T_ON": "maybe"}, {}, "BERTH_T_ON='maybe': expected `bool`, got `str`"),
        ({"BERTH_T_MODE": "c"}, {}, "BERTH_T_MODE='c': expected one of a, b"),
        (
            {"BERTH_T_DOUBLED": "two"},
            {},
            "BERTH_T_DOUBLED='two': invalid literal for int() with base 10: 'two'",
        ),
        ({"BERTH_T_SECRET": "hunter2"}, {}, "BERTH_T_SECRET=<secret>: expected `int`, got `str`"),
    ],
)
def test_a_refused_value_is_one_line_naming_it(
    env: dict[str, str], flags: dict[str, object], message: str
) -> None:
    with pytest.raises(SettingsError) as info:
        read(Sample, env, flags)
    assert str(info.value) == message
    assert isinstance(info.value, StackError)  # every service exits 2 on it


def test_flags_come_from_the_class() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_flags(parser, Sample)
    args = parser.parse_args(["--port", "1", "--on", "--mode", "b"])
    assert read(Sample, {}, vars(args)) == Sample(port=1, on=True, mode="b")
    assert vars(parser.parse_args([])) == {"port": None, "on": None, "mode": None}
    with pytest.raises(SystemExit):
        parser.parse_args(["--mode", "c"])


def test_the_settings_file_is_below_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text("BERTH_T_PORT: 81\nBERTH_T_ON: true\nBERTH_T_MODE: b\n")
    env = {ENV_SETTINGS_FILE: str(path), "BERTH_T_MODE": "a"}
    with_settings_file(env, {"BERTH_T_PORT", "BERTH_T_ON", "BERTH_T_MODE"})
    assert read(Sample, env) == Sample(port=81, on=True, mode="a")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("BERTH_T_PORTT: 81\n", "BERTH_T_PORTT: not a setting this service reads"),
        ("PATH: /bin\n", "PATH: not a setting this service reads"),
        ("BERTH_T_PORT: [1, 2]\n", "BERTH_T_PORT: expected a scalar"),
        ("- 1\n", "expected a map of BERTH_* settings"),
        ("a: [\n", "not YAML"),
    ],
)
def test_a_bad_settings_file_is_refused_naming_it(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text(text)
    with pytest.raises(SettingsError) as info:
        with_settings_file({ENV_SETTINGS_FILE: str(path)}, {"BERTH_T_PORT"})
    assert str(info.value).startswith(f"{ENV_SETTINGS_FILE}={str(path)!r}: {reason}")


def test_stack_settings_refuse_bad_values() -> None:
    servers = {"BERTH_REDIS_URL": "redis://r:6379/0", "BERTH_KAFKA_BOOTSTRAP": "k:9092"}
    assert StackSettings.from_env(servers | {"BERTH_ORDERED": "1"}).ordered
    with pytest.raises(SettingsError, match=r"^BERTH_SESSION_MS='-5': expected `int` >= 0$"):
        StackSettings.from_env(servers | {"BERTH_SESSION_MS": "-5"})
    with pytest.raises(SettingsError, match=r"^BERTH_SEED='seven': expected `int`, got `str`$"):
        StackSettings.from_env(servers | {"BERTH_SEED": "seven"})


def test_the_queue_names_the_fair_sharing_strategies_quota_admission_knows() -> None:
    """services/queue/config.py cannot import quota admission (it would bring the quota
    package into every config reader): the two lists are kept equal here."""
    assert FAIR_SHARING_STRATEGIES == STRATEGIES
    assert {f.spec.flag for f in fields(QueueSettings)} >= {"--fair-sharing", "--kueue-mode"}


@pytest.mark.parametrize(
    ("service", "env", "argv", "line"),
    [
        (
            "dashboard",
            {"BERTH_DASHBOARD_PORT": "eighty"},
            [],
            "BERTH_DASHBOARD_PORT='eighty': expected `int`, got `str`",
        ),
        (
            "queue",
            {"BERTH_KUEUE_MODE": "both"},
            [],
            "BERTH_KUEUE_MODE='both': expected one of berth, kueue",
        ),
        (
            "queue",
            {},
            ["--tenant-weight", "a=many"],
            "--tenant-weight='a=many': 'a=many' is not TENANT=WEIGHT",
        ),
        ("agent", {"BERTH_AGENT_SEED": "x"}, [], "BERTH_AGENT_SEED='x': expected `int`, got `str`"),
        (
            "binder",
            {"BERTH_SESSION_MS": "soon"},
            [],
            "BERTH_SESSION_MS='soon': expected `int`, got `str`",
        ),
        ("scheduler", {}, ["--seed", "x"], "--seed='x': expected `int`, got `str`"),
        ("adapter", {"BERTH_SEED": "1.5"}, [], "BERTH_SEED='1.5': expected `int`, got `str`"),
    ],
)
def test_a_service_given_a_bad_value_exits_2_with_one_line(
    service: str, env: dict[str, str], argv: list[str], line: str
) -> None:
    """Before any server is contacted (the servers named here do not exist)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")} | {
        "BERTH_REDIS_URL": "redis://127.0.0.1:1/0",
        "BERTH_KAFKA_BOOTSTRAP": "127.0.0.1:1",
        "PYTHONPATH": str(ROOT),
        **env,
    }
    done = subprocess.run(
        [sys.executable, "-m", f"services.{service}", *argv],
        env=full,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (printed,) = done.stderr.strip().splitlines()
    assert printed.endswith(line), printed


@pytest.mark.parametrize(
    "settings",
    [
        StackSettings("redis://r:6379/0", "k:9092"),
        StackSettings(
            "redis://r:6379/0",
            "k:9092",
            cluster="c",
            store_prefix="s:",
            queue_prefix="q:",
            topic_suffix="blue",
            seed=7,
            single_tenant="all",
            ordered=True,
            kube="in-cluster",
            take_default_scheduler=True,
            session_ms=3000,
        ),
    ],
)
def test_stack_settings_round_trip_through_the_environment(settings: StackSettings) -> None:
    """What `berth up` writes for its children is what each child reads back; an unset
    setting is written empty, so a child never inherits a stale value from its parent."""
    env = settings.env()
    assert StackSettings.from_env(env) == settings
    assert env["BERTH_SEED"] == ("7" if settings.seed else "")
    stale = {"BERTH_TOPIC_SUFFIX": "stale", "BERTH_SEED": "99"}
    assert StackSettings.from_env(stale | env) == settings


def test_paths_are_written_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = StackSettings("redis://r", "k:1", config_path="sched.yaml", kube="kubeconfig")
    env = settings.env()
    assert env["BERTH_CONFIG"] == str(tmp_path / "sched.yaml")
    assert env["BERTH_KUBE"] == str(tmp_path / "kubeconfig")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("BERTH_DASHBOARD_PORT: eighty\n", "BERTH_DASHBOARD_PORT='eighty': expected `int`"),
        ("BERTH_KUEUE_MODE: kueue\n", "BERTH_KUEUE_MODE: not a setting this service reads"),
    ],
)
def test_a_service_reads_its_settings_file(tmp_path: Path, text: str, line: str) -> None:
    path = tmp_path / "dashboard.yaml"
    path.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")} | {
        "BERTH_REDIS_URL": "redis://127.0.0.1:1/0",
        "BERTH_KAFKA_BOOTSTRAP": "127.0.0.1:1",
        "PYTHONPATH": str(ROOT),
        ENV_SETTINGS_FILE: str(path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "services.dashboard"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    (printed,) = done.stderr.strip().splitlines()
    assert line in printed


def test_secrets_are_taken_as_given_and_never_printed() -> None:
    from shared.runtime.security import KafkaSecurity, RedisSecurity

    assert RedisSecurity.from_env({"BERTH_REDIS_PASSWORD": " pw "}).password == " pw "
    assert RedisSecurity.from_env({"BERTH_REDIS_CA": " /ca.pem "}).ca == "/ca.pem"
    kafka = KafkaSecurity.from_env({"BERTH_KAFKA_SECURITY_PROTOCOL": "ssl"})
    assert kafka.protocol == "SSL"
    assert KafkaSecurity.from_env({}).protocol == "PLAINTEXT"
