"""load_config: YAML (or a parsed mapping) -> a defaulted, validated SchedulerConfiguration.

Steps, as upstream: strict decode, defaults (SetDefaults_KubeSchedulerConfiguration: one
"default-scheduler" profile when none is given, plugins merged into the defaults, default
args for every enabled in-tree plugin without args), then validation.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from shared.config import decode as dec
from shared.config.args_decoding import decode_args
from shared.config.defaults import default_plugins, merge_plugins
from shared.config.errors import KIND, ConfigError, InvalidConfigError, not_supported, required
from shared.config.plugin_args import ARGS_BY_PLUGIN, PluginArgs
from shared.config.types import (
    API_VERSION,
    DEFAULT_EXTENDER_TIMEOUT_SECONDS,
    DEFAULT_SCHEDULER_NAME,
    ClientConnection,
    Extender,
    LeaderElection,
    Plugins,
    Profile,
    SchedulerConfiguration,
)
from shared.config.validation import validate_config


@dataclass(slots=True, kw_only=True)
class _Document:
    """The top level of the v1 document, before defaulting."""

    api_version: str = ""
    kind: str = ""
    parallelism: int = field(default=16, metadata=dec.INT32_FORMAT)
    percentage_of_nodes_to_score: int | None = field(default=None, metadata=dec.INT32_FORMAT)
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    profiles: list[Any] | None = None
    """None when absent (one default profile); [] is an error."""
    extenders: list[Extender] = field(default_factory=list)
    leader_election: LeaderElection | None = None
    client_connection: ClientConnection | None = None
    # Upstream fields with no meaning for berth: type-checked, then dropped.
    enable_profiling: bool | None = None
    enable_contention_profiling: bool | None = None
    delay_cache_until_active: bool = False


@dataclass(slots=True, kw_only=True)
class _ProfileDocument:
    scheduler_name: str | None = None
    percentage_of_nodes_to_score: int | None = field(default=None, metadata=dec.INT32_FORMAT)
    plugins: Plugins | None = None
    plugin_config: list[_PluginConfigDocument] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class _PluginConfigDocument:
    name: str = ""
    args: Any = None


def load_config(source: str | os.PathLike[str] | Mapping[str, Any]) -> SchedulerConfiguration:
    """Load a KubeSchedulerConfiguration from a file path, YAML text, or a parsed mapping.

    A str is read as a file path when it is one line naming an existing file, else parsed as
    YAML. Raises InvalidConfigError (a ConfigError) naming each offending field path.
    """
    if isinstance(source, Mapping):
        raw: object = source
    elif isinstance(source, str) and ("\n" in source or not os.path.isfile(source)):
        raw = dec.parse_yaml(source)
        if isinstance(raw, str):
            raise InvalidConfigError([f"no such file, and not a YAML mapping: {source}"])
    else:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as err:
            raise ConfigError(f"reading {os.fspath(source)}: {err.strerror or err}") from err
        raw = dec.parse_yaml(text)
    document = dec.expect_mapping(raw, "")
    _check_type_meta(document)
    config = _default(dec.decode(_Document, document, ""))
    validate_config(config)
    return config


def default_config() -> SchedulerConfiguration:
    """The configuration kube-scheduler runs with when given none, minus berth's omissions
    (volume plugins), plus Coscheduling (see shared/config/defaults.py)."""
    return load_config({"apiVersion": API_VERSION, "kind": KIND})


def _check_type_meta(document: Mapping[str, Any]) -> None:
    for key, want in (("apiVersion", API_VERSION), ("kind", KIND)):
        value = document.get(key)
        if value is None or value == "":
            raise InvalidConfigError([required(key)])
        if value != want:
            raise InvalidConfigError([not_supported(key, value, [want])])


def _default(document: _Document) -> SchedulerConfiguration:
    raw_profiles = document.profiles if document.profiles is not None else [{}]
    profiles = [
        _profile(raw, dec.index("profiles", i), only=len(raw_profiles) == 1)
        for i, raw in enumerate(raw_profiles)
    ]
    for extender in document.extenders:
        if extender.http_timeout_seconds == 0:
            extender.http_timeout_seconds = DEFAULT_EXTENDER_TIMEOUT_SECONDS
    return SchedulerConfiguration(
        profiles=profiles,
        percentage_of_nodes_to_score=document.percentage_of_nodes_to_score,
        pod_initial_backoff_seconds=document.pod_initial_backoff_seconds,
        pod_max_backoff_seconds=document.pod_max_backoff_seconds,
        parallelism=document.parallelism,
        extenders=document.extenders,
        leader_election=document.leader_election or LeaderElection(),
        client_connection=_client_connection(document.client_connection),
    )


def _client_connection(document: ClientConnection | None) -> ClientConnection:
    """SetDefaults_ClientConnectionConfiguration: a zero qps or burst takes the default."""
    out = document or ClientConnection()
    if out.qps == 0:
        out.qps = ClientConnection().qps
    if out.burst == 0:
        out.burst = ClientConnection().burst
    return out


def _profile(raw: object, path: str, *, only: bool) -> Profile:
    document = dec.decode(_ProfileDocument, raw if raw is not None else {}, path)
    name = document.scheduler_name
    if name is None:
        # Upstream names a lone unnamed profile; with several, validation requires names.
        name = DEFAULT_SCHEDULER_NAME if only else ""
    plugins = merge_plugins(default_plugins(), document.plugins)
    plugin_config: dict[str, PluginArgs] = {}
    for j, entry in enumerate(document.plugin_config):
        entry_path = dec.index(dec.child(path, "pluginConfig"), j)
        if entry.name in plugin_config:
            dec.fail(f'{dec.child(entry_path, "name")}: Duplicate value: "{entry.name}"')
        plugin_config[entry.name] = _plugin_args(entry, dec.child(entry_path, "args"), name)
    for plugin in _enabled_names(plugins):
        if plugin in ARGS_BY_PLUGIN and plugin not in plugin_config:
            plugin_config[plugin] = ARGS_BY_PLUGIN[plugin]()
    return Profile(
        scheduler_name=name,
        percentage_of_nodes_to_score=document.percentage_of_nodes_to_score,
        plugins=plugins,
        plugin_config=plugin_config,
    )


def _plugin_args(entry: _PluginConfigDocument, path: str, profile: str) -> PluginArgs:
    args = dec.expect_mapping(entry.args if entry.args is not None else {}, path)
    if entry.name not in ARGS_BY_PLUGIN:
        return dict(args)
    try:
        return decode_args(entry.name, args, path)
    except InvalidConfigError as err:
        suffix = f' (profile "{profile}", plugin {entry.name})'
        raise InvalidConfigError([error + suffix for error in err.errors]) from None


def _enabled_names(plugins: Plugins) -> list[str]:
    """pluginsNames: every plugin enabled anywhere, sorted (upstream appends default args in
    this order)."""
    return sorted({plugin.name for f in fields(Plugins) for plugin in plugins.at(f.name).enabled})
