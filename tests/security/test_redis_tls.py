"""Redis over TLS (rediss://) with an ACL user, its password from BERTH_REDIS_PASSWORD and a
client certificate: the right CA connects, anything else is one clear line naming the URL
(password hidden), from the library, the `berth` client commands and a service process.
What serves the TLS (redis-server itself or a proxy in front of it) is in tls.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli.stack_commands import get_main
from shared.runtime.redisconn import open_redis
from shared.runtime.security import ConnectError, RedisSecurity
from tests.security.tls import REDIS_PASSWORD, TLSRedis

ROOT = Path(__file__).resolve().parents[2]


def _security(pki: Path, **changes: str) -> RedisSecurity:
    files = {
        "password": REDIS_PASSWORD,
        "ca": str(pki / "ca.crt"),
        "cert": str(pki / "client.crt"),
        "key": str(pki / "client.key"),
    }
    return RedisSecurity(**(files | changes))


async def test_the_right_ca_and_client_certificate_connect(redis_tls: TLSRedis, pki: Path) -> None:
    redis = await open_redis(redis_tls.url(), _security(pki))
    try:
        assert await redis.acl_whoami() == "berth"
        await redis.set("berth-tls-test", "1", ex=10)
        assert await redis.get("berth-tls-test") == b"1"
        # Large commands go through hiredis packing over TLS as over plain TCP.
        values = [str(i) for i in range(20_000)]
        await redis.rpush("berth-tls-list", *values)
        assert await redis.llen("berth-tls-list") == 20_000
        await redis.delete("berth-tls-list", "berth-tls-test")
    finally:
        await redis.aclose()


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        pytest.param(
            {"ca": "other-ca.crt"},
            "CERTIFICATE_VERIFY_FAILED",
            id="wrong-ca",
        ),
        pytest.param(
            {"ca": ""},
            "(checked against the system's CAs: set BERTH_REDIS_CA)",
            id="no-ca-means-system-cas-not-no-verification",
        ),
        pytest.param({"cert": "", "key": ""}, "", id="no-client-certificate"),
        pytest.param(
            {"password": "wrong"},
            "(check the URL's user and password, or BERTH_REDIS_PASSWORD)",
            id="wrong-password",
        ),
    ],
)
async def test_a_refused_connection_is_one_line_naming_the_url(
    redis_tls: TLSRedis, pki: Path, changes: dict[str, str], reason: str
) -> None:
    if changes.get("ca"):
        changes = changes | {"ca": str(pki / changes["ca"])}
    url = redis_tls.url(password="password" not in changes)
    security = _security(pki, **changes)
    with pytest.raises(ConnectError) as caught:
        await open_redis(url, security)
    # redis-py raises before the TLS connection it drops has finished closing (through the
    # proxy, when one serves the TLS): let it, before this test's event loop closes.
    await asyncio.sleep(0.2)
    message = str(caught.value)
    shown = url.replace(":s3cret%20pw@", ":***@")
    assert message.startswith(f"cannot connect to Redis at {shown}: ")
    assert reason in message
    assert "s3cret" not in message
    assert "\n" not in message


def _env(redis_tls: TLSRedis, pki: Path, ca: str, tmp_path: Path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("BERTH_")},
        "BERTH_REDIS_URL": redis_tls.url(password=True),
        "BERTH_KAFKA_BOOTSTRAP": "127.0.0.1:9",  # not reached: Redis comes first
        "BERTH_REDIS_CA": str(pki / ca),
        "BERTH_REDIS_CERT": str(pki / "client.crt"),
        "BERTH_REDIS_KEY": str(pki / "client.key"),
        "BERTH_STATE": str(tmp_path / "no-state.json"),
    }


def test_berth_get_with_the_wrong_ca_prints_one_line(
    redis_tls: TLSRedis, pki: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = _env(redis_tls, pki, "other-ca.crt", tmp_path)
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        assert get_main(["pods"]) == 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: cannot connect to Redis at rediss://berth:***@127.0.0.1:{redis_tls.port}/0: "
    )
    assert "CERTIFICATE_VERIFY_FAILED" in err
    assert f"does not verify against BERTH_REDIS_CA={pki / 'other-ca.crt'}" in err
    assert "Traceback" not in err
    assert "s3cret" not in err


def test_a_service_with_the_wrong_ca_exits_with_one_line(
    redis_tls: TLSRedis, pki: Path, tmp_path: Path
) -> None:
    env = _env(redis_tls, pki, "other-ca.crt", tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "services.binder", "--name", "b"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "s3cret" not in done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "ERROR" in line]
    assert f"cannot connect to Redis at rediss://berth:***@127.0.0.1:{redis_tls.port}/0" in line
    assert "CERTIFICATE_VERIFY_FAILED" in line
