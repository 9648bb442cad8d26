"""shared.runtime.retry's outage classification: which errors mean a server is away, and Kafka's
client loaded only when an outage is first classified (a Redis-only process never loads it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka.errors import KafkaConnectionError, KafkaError
from redis.exceptions import BusyLoadingError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from shared.runtime.retry import is_outage, is_redis_outage, outage_errors

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("exc", "outage", "redis"),
    [
        (RedisConnectionError("gone"), True, True),
        (BusyLoadingError("loading"), True, True),
        (RedisTimeoutError("slow"), True, True),
        (KafkaConnectionError("no broker"), True, False),
        (KafkaError("any"), True, False),
        (ConnectionRefusedError(), True, False),
        (TimeoutError(), True, False),
        (ResponseError("WRONGTYPE"), False, False),
        (ValueError("bug"), False, False),
    ],
)
def test_outages(exc: BaseException, outage: bool, redis: bool) -> None:
    assert is_outage(exc) is outage
    assert is_redis_outage(exc) is redis
    try:
        raise exc
    except outage_errors():
        caught = True
    except BaseException:  # noqa: BLE001 (what the table says is not an outage)
        caught = False
    assert caught is outage


def test_kafkas_client_is_loaded_when_an_outage_is_first_classified() -> None:
    script = (
        "import json, sys\n"
        "import shared.runtime.retry as r\n"
        "before = 'aiokafka' in sys.modules\n"
        "r.is_outage(ValueError())\n"
        "print(json.dumps([before, 'aiokafka' in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == [False, True]
