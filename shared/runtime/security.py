"""How the services authenticate to Redis and the Kafka-API broker, and encrypt the way there.

Redis: a password (`BERTH_REDIS_PASSWORD`, or the URL's `redis://[user]:password@`, which
wins; an ACL user is the URL's user part) and TLS for `rediss://` URLs: the server is verified
against `BERTH_REDIS_CA` (else the system's CAs, never not at all), with an optional client
certificate `BERTH_REDIS_CERT` / `BERTH_REDIS_KEY`. redis-py's own URL query parameters
(`?ssl_ca_certs=...&ssl_certfile=...`) work too and win over the variables.

Kafka: `BERTH_KAFKA_SECURITY_PROTOCOL` (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL), SASL
(`BERTH_KAFKA_SASL_MECHANISM` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with
`BERTH_KAFKA_SASL_USERNAME` / `BERTH_KAFKA_SASL_PASSWORD`) and TLS (`BERTH_KAFKA_CA`, else the
system's CAs; client certificate `BERTH_KAFKA_CERT` / `BERTH_KAFKA_KEY`). The combination is
checked when it is read, so a service refuses a half-made configuration before it connects.

Errors::

    SecurityError
     ├── SecurityConfigError   a setting, or a combination of them, is wrong (names the variable)
     └── ConnectError          a server refused us: TLS, authentication, unreachable (names it,
                               the URL's password hidden)
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

from shared.messaging.message_auth import ENV_MESSAGE_KEYS, MessageKeys, MessageKeysError
from shared.runtime.settings import read, setting

log = logging.getLogger(__name__)

ENV_REDIS_PASSWORD = "BERTH_REDIS_PASSWORD"
"""The password berth authenticates to Redis with when its URL carries none; the embedded
Redis of `berth up` / the dev servers requires it (requirepass)."""
ENV_REDIS_USERNAME = "BERTH_REDIS_USERNAME"
"""The Redis ACL user (when the URL names none): one per component in the chart, so each
component holds only its own user's commands and keys (deploy/helm/berth/README.md)."""
ENV_REDIS_CA = "BERTH_REDIS_CA"
"""PEM file of the CA(s) a rediss:// server's certificate must chain to (else the system's)."""
ENV_REDIS_CERT = "BERTH_REDIS_CERT"
"""PEM client certificate for a rediss:// server that requires one (tls-auth-clients)."""
ENV_REDIS_KEY = "BERTH_REDIS_KEY"
"""The client certificate's private key (unless the certificate file holds it)."""
ENV_KAFKA_SECURITY_PROTOCOL = "BERTH_KAFKA_SECURITY_PROTOCOL"
"""PLAINTEXT (the default), SSL, SASL_PLAINTEXT or SASL_SSL."""
ENV_KAFKA_SASL_MECHANISM = "BERTH_KAFKA_SASL_MECHANISM"
"""PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (with a SASL_* protocol)."""
ENV_KAFKA_SASL_USERNAME = "BERTH_KAFKA_SASL_USERNAME"
ENV_KAFKA_SASL_PASSWORD = "BERTH_KAFKA_SASL_PASSWORD"
ENV_KAFKA_CA = "BERTH_KAFKA_CA"
"""PEM file of the CA(s) the brokers' certificates must chain to (else the system's)."""
ENV_KAFKA_CERT = "BERTH_KAFKA_CERT"
"""PEM client certificate (brokers with ssl.client.auth=required)."""
ENV_KAFKA_KEY = "BERTH_KAFKA_KEY"
"""The client certificate's private key (unless the certificate file holds it)."""

KAFKA_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SecurityError(RuntimeError):
    """Base class: berth cannot talk to a server as configured."""


class SecurityConfigError(SecurityError):
    """A security setting, or a combination of them, is wrong; the message names it."""


class ConnectError(SecurityError):
    """A server could not be reached or refused the connection (TLS, authentication)."""


def redact_url(url: str) -> str:
    """`url` with the password of its user part replaced by "***" (for output and logs):
    "redis://:s3cret@host:6379/0" -> "redis://:***@host:6379/0". Anything that is not a URL
    with a password is returned as it is."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _check_file(variable: str, path: str) -> None:
    if not os.path.isfile(path):
        raise SecurityConfigError(f"{variable}={path}: no such file")
    if not os.access(path, os.R_OK):
        raise SecurityConfigError(f"{variable}={path}: not readable")


def _tls_context(ca: str, cert: str, key: str, what: str) -> ssl.SSLContext:
    """A client context verifying the server (hostname included) against `ca`, else the
    system's CAs, presenting `cert` when given."""
    try:
        context = ssl.create_default_context(cafile=ca or None)
        if cert:
            context.load_cert_chain(cert, key or None)
    except (ssl.SSLError, OSError) as exc:
        raise SecurityConfigError(f"{what}: cannot load the TLS files: {exc}") from exc
    return context


# ================================================================================= Redis
@dataclass(frozen=True, slots=True)
class RedisSecurity:
    """How to authenticate to Redis and verify it (see the module docstring)."""

    password: Annotated[str, setting(ENV_REDIS_PASSWORD, "Redis password (AUTH)", secret=True)] = (
        field(default="", repr=False)
    )
    ca: Annotated[str, setting(ENV_REDIS_CA, "CA file that verifies Redis (TLS)")] = ""
    cert: Annotated[str, setting(ENV_REDIS_CERT, "client certificate for Redis")] = ""
    key: Annotated[str, setting(ENV_REDIS_KEY, "its private key")] = ""
    username: Annotated[str, setting(ENV_REDIS_USERNAME, "Redis ACL user")] = ""

    @property
    def tls_files(self) -> bool:
        return bool(self.ca or self.cert or self.key)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RedisSecurity:
        return read(cls, env)

    def env(self) -> dict[str, str]:
        named = {
            ENV_REDIS_PASSWORD: self.password,
            ENV_REDIS_USERNAME: self.username,
            ENV_REDIS_CA: self.ca,
            ENV_REDIS_CERT: self.cert,
            ENV_REDIS_KEY: self.key,
        }
        return {name: value for name, value in named.items() if value}

    def validate(self, url: str) -> None:
        """Raise SecurityConfigError for settings that cannot work with `url`."""
        scheme = url.partition("://")[0].lower()
        if self.tls_files and scheme != "rediss":
            named = self.env()
            given = ", ".join(
                n for n in (ENV_REDIS_CA, ENV_REDIS_CERT, ENV_REDIS_KEY) if n in named
            )
            raise SecurityConfigError(
                f"{given} set, but Redis at {redact_url(url)} is not TLS: use a rediss:// URL"
            )
        if self.key and not self.cert:
            raise SecurityConfigError(f"{ENV_REDIS_KEY} needs {ENV_REDIS_CERT}")
        for variable, path in (
            (ENV_REDIS_CA, self.ca),
            (ENV_REDIS_CERT, self.cert),
            (ENV_REDIS_KEY, self.key),
        ):
            if path:
                _check_file(variable, path)

    def client_options(self, url: str) -> dict[str, Any]:
        """redis-py connection options for `url` (whose own query parameters win)."""
        self.validate(url)
        options: dict[str, Any] = {}
        if self.password:
            options["password"] = self.password
        if self.username:
            options["username"] = self.username
        if url.lower().startswith("rediss://"):
            options["ssl_cert_reqs"] = "required"
            options["ssl_check_hostname"] = True
            if self.ca:
                options["ssl_ca_certs"] = self.ca
            if self.cert:
                options["ssl_certfile"] = self.cert
            if self.key:
                options["ssl_keyfile"] = self.key
        return options

    def explain(self, url: str, reason: str) -> str:
        """A one-line diagnosis of a failed connection to `url` (password hidden)."""
        hint = ""
        if "CERTIFICATE_VERIFY_FAILED" in reason:
            hint = (
                f" (the server's certificate does not verify against {ENV_REDIS_CA}={self.ca})"
                if self.ca
                else f" (checked against the system's CAs: set {ENV_REDIS_CA})"
            )
        elif "NOPERM" in reason or "no permissions" in reason:
            user = self.username or urlsplit(url).username or "default"
            hint = (
                f" (Redis user {user!r} is not allowed this: each component's ACL rule is in"
                " deploy/helm/berth/files/redis-acl.yaml)"
            )
        elif any(
            word in reason for word in ("WRONGPASS", "NOAUTH", "invalid username", "password")
        ):
            hint = f" (check the URL's user and password, or {ENV_REDIS_PASSWORD})"
        return f"cannot connect to Redis at {redact_url(url)}: {reason}{hint}"


# ================================================================================= Kafka
@dataclass(frozen=True, slots=True)
class KafkaSecurity:
    """How to authenticate to the brokers and verify them (see the module docstring)."""

    protocol: Annotated[
        str,
        setting(
            ENV_KAFKA_SECURITY_PROTOCOL,
            "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (any case)",
            parse=str.upper,
        ),
    ] = "PLAINTEXT"
    sasl_mechanism: Annotated[
        str,
        setting(ENV_KAFKA_SASL_MECHANISM, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", parse=str.upper),
    ] = ""
    sasl_username: Annotated[str, setting(ENV_KAFKA_SASL_USERNAME, "SASL user")] = ""
    sasl_password: Annotated[
        str, setting(ENV_KAFKA_SASL_PASSWORD, "SASL password", secret=True)
    ] = field(default="", repr=False)
    ca: Annotated[str, setting(ENV_KAFKA_CA, "CA file that verifies the brokers (TLS)")] = ""
    cert: Annotated[str, setting(ENV_KAFKA_CERT, "client certificate for the brokers")] = ""
    key: Annotated[str, setting(ENV_KAFKA_KEY, "its private key")] = ""
    message_keys: Annotated[
        str,
        setting(ENV_MESSAGE_KEYS, "the message-signing keys file (unset: messages unsigned)"),
    ] = ""
    """The message keys file (BERTH_MESSAGE_KEYS, shared.messaging.message_auth): "" signs
    nothing."""

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def keys(self) -> MessageKeys | None:
        """The message keys (None when no file is named); MessageKeysError if unreadable."""
        return MessageKeys.load(self.message_keys) if self.message_keys else None

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> KafkaSecurity:
        """The settings in `env`, validated (SecurityConfigError names what is wrong)."""
        security = read(cls, env)
        security.validate()
        return security

    def env(self) -> dict[str, str]:
        named = {
            ENV_KAFKA_SECURITY_PROTOCOL: "" if self.protocol == "PLAINTEXT" else self.protocol,
            ENV_KAFKA_SASL_MECHANISM: self.sasl_mechanism,
            ENV_KAFKA_SASL_USERNAME: self.sasl_username,
            ENV_KAFKA_SASL_PASSWORD: self.sasl_password,
            ENV_KAFKA_CA: self.ca,
            ENV_KAFKA_CERT: self.cert,
            ENV_KAFKA_KEY: self.key,
            ENV_MESSAGE_KEYS: self.message_keys,
        }
        return {name: value for name, value in named.items() if value}

    def validate(self) -> None:
        """Raise SecurityConfigError for a setting or combination that cannot work."""
        protocol = f"{ENV_KAFKA_SECURITY_PROTOCOL}={self.protocol}"
        try:
            self.keys()
        except MessageKeysError as exc:
            raise SecurityConfigError(str(exc)) from exc
        if self.protocol not in KAFKA_PROTOCOLS:
            raise SecurityConfigError(f"{protocol}: not one of {', '.join(KAFKA_PROTOCOLS)}")
        given = self.env()
        sasl_set = [
            name
            for name in (ENV_KAFKA_SASL_MECHANISM, ENV_KAFKA_SASL_USERNAME, ENV_KAFKA_SASL_PASSWORD)
            if name in given
        ]
        tls_set = [name for name in (ENV_KAFKA_CA, ENV_KAFKA_CERT, ENV_KAFKA_KEY) if name in given]
        if not self.sasl and sasl_set:
            raise SecurityConfigError(
                f"{', '.join(sasl_set)} set, but {protocol} does not authenticate with SASL "
                f"(use SASL_SSL, or SASL_PLAINTEXT)"
            )
        if not self.tls and tls_set:
            raise SecurityConfigError(
                f"{', '.join(tls_set)} set, but {protocol} does not use TLS (use SSL or SASL_SSL)"
            )
        if self.sasl:
            if not self.sasl_mechanism:
                raise SecurityConfigError(
                    f"{protocol} needs {ENV_KAFKA_SASL_MECHANISM} ({', '.join(SASL_MECHANISMS)})"
                )
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise SecurityConfigError(
                    f"{ENV_KAFKA_SASL_MECHANISM}={self.sasl_mechanism}: not one of "
                    f"{', '.join(SASL_MECHANISMS)}"
                )
            missing = [
                name
                for name, value in (
                    (ENV_KAFKA_SASL_USERNAME, self.sasl_username),
                    (ENV_KAFKA_SASL_PASSWORD, self.sasl_password),
                )
                if not value
            ]
            if missing:
                raise SecurityConfigError(
                    f"SASL {self.sasl_mechanism} needs {' and '.join(missing)}"
                )
            if self.protocol == "SASL_PLAINTEXT" and self.sasl_mechanism == "PLAIN":
                log.warning(
                    "SASL PLAIN over SASL_PLAINTEXT sends the Kafka password unencrypted; "
                    "use SASL_SSL"
                )
        if self.key and not self.cert:
            raise SecurityConfigError(f"{ENV_KAFKA_KEY} needs {ENV_KAFKA_CERT}")
        for variable, path in (
            (ENV_KAFKA_CA, self.ca),
            (ENV_KAFKA_CERT, self.cert),
            (ENV_KAFKA_KEY, self.key),
        ):
            if path:
                _check_file(variable, path)

    def ssl_context(self) -> ssl.SSLContext:
        return _tls_context(self.ca, self.cert, self.key, f"{ENV_KAFKA_CA}/{ENV_KAFKA_CERT}")

    def client_options(self) -> dict[str, Any]:
        """aiokafka options (producer, consumer and admin client alike)."""
        if self.protocol == "PLAINTEXT":
            return {}
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            options["ssl_context"] = self.ssl_context()
        if self.sasl:
            options["sasl_mechanism"] = self.sasl_mechanism
            options["sasl_plain_username"] = self.sasl_username
            options["sasl_plain_password"] = self.sasl_password
        return options
