"""Secrets stay out of sight: `berth up` prints Redis URLs without their password, and the
state file the client commands read is the user's alone."""

from __future__ import annotations

import argparse
import json
import os
import stat
from pathlib import Path

import pytest

from cli.client import read_settings, write_state
from shared.env import StackSettings, redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        pytest.param("redis://:s3cret@r:6379/0", "redis://:***@r:6379/0", id="password"),
        pytest.param("rediss://berth:s3cret@r:6380/2", "rediss://berth:***@r:6380/2", id="acl"),
        pytest.param("redis://r:6379/0", "redis://r:6379/0", id="no-password"),
        pytest.param("redis://berth@r:6379", "redis://berth@r:6379", id="user-only"),
        pytest.param("127.0.0.1:9092", "127.0.0.1:9092", id="not-a-url"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "s3cret" not in redact_url(url)


def test_the_state_file_is_readable_by_its_user_only(tmp_path: Path) -> None:
    path = tmp_path / "state" / "stack.json"
    settings = StackSettings("redis://:s3cret@r:6379/0", "k:9092")
    old_umask = os.umask(0o022)  # a usual umask: would give 0644
    try:
        write_state(settings, path)
        write_state(settings, path)  # and when it exists already
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    assert json.loads(path.read_text())["env"]["BERTH_REDIS_URL"] == "redis://:s3cret@r:6379/0"
    # The client commands still find the stack through it.
    no_flags = argparse.Namespace(redis_url=None, kafka_bootstrap=None)
    read = read_settings(no_flags, {"BERTH_STATE": str(path)})
    assert read.redis_url == "redis://:s3cret@r:6379/0"
