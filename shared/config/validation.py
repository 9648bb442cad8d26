"""Validation of a defaulted configuration: port of ValidateKubeSchedulerConfiguration
(pkg/scheduler/apis/config/validation/validation.go), plus the plugin args checks.
"""

from __future__ import annotations

from dataclasses import fields

from shared.config import decode as dec
from shared.config.errors import InvalidConfigError, duplicate, invalid, required
from shared.config.names import is_extended_resource_name, qualified_name_errors
from shared.config.plugin_args import ARGS_BY_PLUGIN
from shared.config.types import (
    API_VERSION,
    Extender,
    ExtensionPoint,
    Plugins,
    Profile,
    SchedulerConfiguration,
)

# Plugins removed from the API by v1 (validation.go invalidPluginsByVersion).
INVALID_PLUGINS_V1 = ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")

_POINT_KEYS = {f.name: dec.json_name(f) for f in fields(Plugins)}


def validate_config(config: SchedulerConfiguration) -> None:
    """Raise InvalidConfigError listing every problem, if there is any."""
    errors = validation_errors(config)
    if errors:
        raise InvalidConfigError(errors)


def validation_errors(config: SchedulerConfiguration) -> list[str]:
    errors: list[str] = []
    if config.parallelism <= 0:
        detail = "should be an integer value greater than zero"
        errors.append(invalid("parallelism", config.parallelism, detail))
    if not config.profiles:
        errors.append(required("profiles", "at least one profile is required"))
    seen: dict[str, int] = {}
    for i, profile in enumerate(config.profiles):
        path = dec.index("profiles", i)
        errors += _profile_errors(profile, path)
        if profile.scheduler_name in seen:
            errors.append(duplicate(dec.child(path, "schedulerName"), profile.scheduler_name))
        seen.setdefault(profile.scheduler_name, i)
    errors += _common_queue_sort_errors(config.profiles)
    errors += _percentage_errors(config.percentage_of_nodes_to_score, "percentageOfNodesToScore")
    initial = config.pod_initial_backoff_seconds
    if initial <= 0:
        errors.append(invalid("podInitialBackoffSeconds", initial, "must be greater than 0"))
    if config.pod_max_backoff_seconds < initial:
        detail = "must be greater than or equal to PodInitialBackoffSeconds"
        errors.append(invalid("podMaxBackoffSeconds", config.pod_max_backoff_seconds, detail))
    errors += _extender_errors(config.extenders)
    errors += _leader_election_errors(config)
    return errors


def _leader_election_errors(config: SchedulerConfiguration) -> list[str]:
    """component-base ValidateLeaderElectionConfiguration, plus client-go's check that the
    renew deadline exceeds the jittered retry period (JitterFactor 1.2)."""
    le = config.leader_election
    if not le.leader_elect:
        return []
    errors: list[str] = []
    for key, value in (
        ("leaseDuration", le.lease_duration),
        ("renewDeadline", le.renew_deadline),
        ("retryPeriod", le.retry_period),
    ):
        if value <= 0:
            errors.append(invalid(f"leaderElection.{key}", value, "must be greater than zero"))
    if le.lease_duration <= le.renew_deadline:
        detail = "LeaseDuration must be greater than RenewDeadline"
        errors.append(invalid("leaderElection.leaseDuration", le.lease_duration, detail))
    if le.renew_deadline <= 1.2 * le.retry_period:
        detail = "RenewDeadline must be greater than RetryPeriod*1.2"
        errors.append(invalid("leaderElection.renewDeadline", le.renew_deadline, detail))
    if le.resource_lock not in ("leases", ""):
        detail = 'only "leases" is supported'
        errors.append(invalid("leaderElection.resourceLock", le.resource_lock, detail))
    if config.client_connection.burst < 0:
        detail = "must be greater than or equal to 0"
        errors.append(invalid("clientConnection.burst", config.client_connection.burst, detail))
    return errors


def _percentage_errors(value: int | None, path: str) -> list[str]:
    if value is not None and not 0 <= value <= 100:
        return [invalid(path, value, "not in valid range [0-100]")]
    return []


def _profile_errors(profile: Profile, path: str) -> list[str]:
    errors = []
    if not profile.scheduler_name:
        errors.append(required(dec.child(path, "schedulerName")))
    percentage_path = dec.child(path, "percentageOfNodesToScore")
    errors += _percentage_errors(profile.percentage_of_nodes_to_score, percentage_path)
    for point in ExtensionPoint:
        enabled_path = dec.child(
            dec.child(dec.child(path, "plugins"), _POINT_KEYS[point]), "enabled"
        )
        for j, plugin in enumerate(profile.plugins.at(point).enabled):
            if plugin.name in INVALID_PLUGINS_V1:
                errors.append(_invalid_plugin(dec.index(enabled_path, j), plugin.name))
    for j, (name, args) in enumerate(profile.plugin_config.items()):
        config_path = dec.index(dec.child(path, "pluginConfig"), j)
        if name in INVALID_PLUGINS_V1:
            errors.append(_invalid_plugin(config_path, name))
            continue
        args_type = ARGS_BY_PLUGIN.get(name)
        if args_type is None:
            continue
        args_path = dec.child(config_path, "args")
        if not isinstance(args, args_type):
            errors.append(f"{args_path}: has to match plugin args")
            continue
        suffix = f' (profile "{profile.scheduler_name}", plugin {name})'
        errors += [error + suffix for error in args.validate(args_path)]
    return errors


def _invalid_plugin(path: str, name: str) -> str:
    detail = (
        f'was invalid in version "{API_VERSION}" '
        f'(KubeSchedulerConfiguration is version "{API_VERSION}")'
    )
    return invalid(path, name, detail)


def _common_queue_sort_errors(profiles: list[Profile]) -> list[str]:
    """validateCommonQueueSort: every profile's merged queueSort set and its args must match
    the first profile's. (A queue sort changed only through multiPoint is caught later, by
    expand_profiles, as in upstream profile.NewMap.)"""
    if not profiles:
        return []
    errors = []
    canon = profiles[0].plugins.queue_sort
    if len(canon.enabled) > 1:
        errors.append(
            invalid(
                "profiles[0].plugins.queueSort.enabled",
                len(canon.enabled),
                "only one queue sort plugin can be enabled",
            )
        )
    name = canon.enabled[0].name if canon.enabled else ""
    args = profiles[0].plugin_config.get(name)
    for i, profile in enumerate(profiles[1:], start=1):
        path = dec.index("profiles", i)
        if profile.plugins.queue_sort != canon:
            errors.append(
                f"{path}.plugins.queueSort: Invalid value: must be the same for all profiles"
            )
        if name and name in profile.plugin_config and profile.plugin_config[name] != args:
            detail = "queueSort must be the same for all profiles"
            errors.append(f"{path}.pluginConfig.args: Invalid value: {detail}")
    return errors


def _extender_errors(extenders: list[Extender]) -> list[str]:
    errors = []
    binders = 0
    managed: set[str] = set()
    for i, extender in enumerate(extenders):
        path = dec.index("extenders", i)
        if extender.prioritize_verb and extender.weight <= 0:
            detail = "must have a positive weight applied to it"
            errors.append(invalid(dec.child(path, "weight"), extender.weight, detail))
        if extender.bind_verb:
            binders += 1
        for j, resource in enumerate(extender.managed_resources):
            name_path = dec.child(dec.index(dec.child(path, "managedResources"), j), "name")
            name_errors = qualified_name_errors(resource.name)
            errors += [invalid(name_path, resource.name, error) for error in name_errors]
            if not name_errors and not is_extended_resource_name(resource.name):
                errors.append(
                    invalid(name_path, resource.name, "is an invalid extended resource name")
                )
            if resource.name in managed:
                detail = "duplicate extender managed resource name"
                errors.append(invalid(name_path, resource.name, detail))
            managed.add(resource.name)
    if binders > 1:
        detail = "only one extender can implement bind"
        errors.append(invalid("extenders", f"found {binders} extenders implementing bind", detail))
    return errors
