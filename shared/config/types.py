"""The kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration, as berth uses it.

Fields are the API's, in snake_case; the loader (loader.py) fills every default, so a loaded
configuration never needs further defaulting by its readers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from shared.config import decode as dec
from shared.config.plugin_args import ARGS_BY_PLUGIN, PluginArgs

API_VERSION = "kubescheduler.config.k8s.io/v1"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

A = TypeVar("A")


class ExtensionPoint(StrEnum):
    """The extension points a plugin can implement; values are the `Plugins` attribute names."""

    PRE_ENQUEUE = "pre_enqueue"
    QUEUE_SORT = "queue_sort"
    PRE_FILTER = "pre_filter"
    FILTER = "filter"
    POST_FILTER = "post_filter"
    PRE_SCORE = "pre_score"
    SCORE = "score"
    RESERVE = "reserve"
    PERMIT = "permit"
    PRE_BIND = "pre_bind"
    BIND = "bind"
    POST_BIND = "post_bind"


@dataclass(frozen=True, slots=True)
class PluginRef:
    """One entry of an enabled or disabled list (upstream `Plugin`)."""

    name: str = ""
    weight: int | None = field(default=None, metadata=dec.INT32_FORMAT)
    """Only Score uses it; None (unset) and 0 both mean 1 there."""


@dataclass(slots=True, kw_only=True)
class PluginSet:
    enabled: list[PluginRef] = field(default_factory=list)
    """Called in this order, after the defaults of the extension point."""
    disabled: list[PluginRef] = field(default_factory=list)
    """Default plugins to drop; the name "*" drops them all. Unknown names are ignored."""


@dataclass(slots=True, kw_only=True)
class Plugins:
    pre_enqueue: PluginSet = field(default_factory=PluginSet)
    queue_sort: PluginSet = field(default_factory=PluginSet)
    pre_filter: PluginSet = field(default_factory=PluginSet)
    filter: PluginSet = field(default_factory=PluginSet)
    post_filter: PluginSet = field(default_factory=PluginSet)
    pre_score: PluginSet = field(default_factory=PluginSet)
    score: PluginSet = field(default_factory=PluginSet)
    reserve: PluginSet = field(default_factory=PluginSet)
    permit: PluginSet = field(default_factory=PluginSet)
    pre_bind: PluginSet = field(default_factory=PluginSet)
    bind: PluginSet = field(default_factory=PluginSet)
    post_bind: PluginSet = field(default_factory=PluginSet)
    multi_point: PluginSet = field(default_factory=PluginSet)
    """Plugins enabled here join every extension point they implement (see expand.py)."""

    def at(self, point: ExtensionPoint | str) -> PluginSet:
        """The set of one extension point, or "multi_point"."""
        plugin_set: PluginSet = getattr(self, point)
        return plugin_set


@dataclass(slots=True, kw_only=True)
class Profile:
    """One scheduling profile. Profiles from load_config/default_config are defaulted; a bare
    Profile() has no plugins at all (use default_plugins() for upstream's set)."""

    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    """Pods whose spec.schedulerName equals this are scheduled with this profile."""
    percentage_of_nodes_to_score: int | None = None
    """Overrides the configuration-wide value when set; 0 means the adaptive default."""
    plugins: Plugins = field(default_factory=Plugins)
    """The user's plugins merged into the defaults; expand_plugins gives the per-point lists."""
    plugin_config: dict[str, PluginArgs] = field(default_factory=dict)
    """Plugin name -> args. In-tree args are typed and defaulted; others are the raw mapping."""

    def plugin_args(self, cls: type[A]) -> A:
        """The typed args of the in-tree plugin whose args type is `cls` (defaults if absent)."""
        names = [name for name, args_type in ARGS_BY_PLUGIN.items() if args_type is cls]
        if not names:
            raise TypeError(f"{cls.__name__} is not the args type of an in-tree plugin")
        args = self.plugin_config.get(names[0])
        if args is None:
            return cls()
        if not isinstance(args, cls):
            raise TypeError(f"args of {names[0]} are {type(args).__name__}, not {cls.__name__}")
        return args


@dataclass(slots=True, kw_only=True)
class ExtenderManagedResource:
    name: str = ""
    """An extended resource name, such as example.com/foo."""
    ignored_by_scheduler: bool = False
    """When true, NodeResourcesFit does not check this resource."""


@dataclass(slots=True, kw_only=True)
class ExtenderTLSConfig:
    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    cert_data: str = ""
    """PEM bytes, base64-encoded in the document (Go []byte)."""
    key_data: str = ""
    ca_data: str = ""


DEFAULT_EXTENDER_TIMEOUT_SECONDS = 5.0
"""Upstream applies this in NewHTTPExtender when httpTimeout is unset or zero."""


@dataclass(slots=True, kw_only=True)
class Extender:
    url_prefix: str = ""
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    weight: int = 0
    """Multiplier of the prioritize scores (0..10 each); must be positive with prioritizeVerb."""
    bind_verb: str = ""
    enable_https: bool = field(default=False, metadata={"json": "enableHTTPS"})
    tls_config: ExtenderTLSConfig | None = None
    http_timeout_seconds: float = field(
        default=DEFAULT_EXTENDER_TIMEOUT_SECONDS,
        metadata={"json": "httpTimeout", **dec.DURATION_FORMAT},
    )
    """Document value is a Go duration ("30s"); 0 becomes the 5 s default."""
    node_cache_capable: bool = False
    managed_resources: list[ExtenderManagedResource] = field(default_factory=list)
    """The extender sees only pods requesting one of these (all pods when empty)."""
    ignorable: bool = False
    """When true, an unreachable or failing extender does not fail scheduling."""


@dataclass(slots=True, kw_only=True)
class LeaderElection:
    """component-base LeaderElectionConfiguration, defaulted as kube-scheduler does, except
    the Lease's name: "" lets the adapter use BERTH_KUBE_LEASE_NAME or "berth-adapter"
    (kube-scheduler's own Lease is "kube-scheduler": berth must not share it)."""

    leader_elect: bool = True
    lease_duration: float = field(default=15.0, metadata=dec.DURATION_FORMAT)
    renew_deadline: float = field(default=10.0, metadata=dec.DURATION_FORMAT)
    retry_period: float = field(default=2.0, metadata=dec.DURATION_FORMAT)
    resource_lock: str = "leases"
    resource_name: str = ""
    resource_namespace: str = ""


@dataclass(slots=True, kw_only=True)
class ClientConnection:
    """component-base ClientConnectionConfiguration: the API client's rate limit (kube-
    scheduler's defaults: 50 requests a second, bursts of 100; a negative qps: no limit).
    kubeconfig and content types are accepted and unused (berth speaks JSON)."""

    kubeconfig: str = ""
    accept_content_types: str = ""
    content_type: str = ""
    qps: float = 50.0
    burst: int = field(default=100, metadata=dec.INT32_FORMAT)


@dataclass(slots=True, kw_only=True)
class SchedulerConfiguration:
    profiles: list[Profile] = field(default_factory=list)
    percentage_of_nodes_to_score: int | None = None
    """0..100; None or 0 means the adaptive default (50% - nodes/125, at least 5%)."""
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    pod_max_in_unschedulable_pods_duration_seconds: float = 300.0
    """Not part of the v1 API (upstream sets it with a command-line flag), so never read from
    the document; set it in code. Upstream's default: 5 minutes."""
    parallelism: int = 16
    extenders: list[Extender] = field(default_factory=list)
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    client_connection: ClientConnection = field(default_factory=ClientConnection)

    def profile(self, scheduler_name: str) -> Profile | None:
        """The profile a pod with this spec.schedulerName uses, if any."""
        for profile in self.profiles:
            if profile.scheduler_name == scheduler_name:
                return profile
        return None
