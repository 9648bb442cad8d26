"""Decoding a plugin's args from a KubeSchedulerConfiguration's pluginConfig: strict about
keys and TypeMeta, the models' own decoder for the objects args hold (NodeAffinity,
TopologySpreadConstraint), then upstream's defaults (the types: plugin_args.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from shared.config import decode as dec
from shared.config.errors import not_supported
from shared.config.plugin_args import (
    ARGS_API_VERSION,
    ARGS_BY_PLUGIN,
    NodeAffinityArgs,
    PodTopologySpreadArgs,
    TypedPluginArgs,
)
from shared.models import NodeAffinity, TopologySpreadConstraint
from shared.models.decoding import FieldError, Mode, object_decoder

M = TypeVar("M")


def decode_args(plugin: str, raw: Mapping[str, Any], path: str) -> TypedPluginArgs:
    """Strictly decode the args of an in-tree plugin (TypeMeta fields allowed) and default them."""
    args_type = ARGS_BY_PLUGIN[plugin]
    body = dict(raw)
    api_version = body.pop("apiVersion", None)
    kind = body.pop("kind", None)
    if api_version is not None and api_version != ARGS_API_VERSION:
        dec.fail(not_supported(dec.child(path, "apiVersion"), api_version, [ARGS_API_VERSION]))
    if kind is not None and kind != f"{plugin}Args":
        dec.fail(f"{path}: args for plugin {plugin} were not of type {plugin}Args, got {kind}")
    if args_type is NodeAffinityArgs:
        args: TypedPluginArgs = _decode_node_affinity_args(body, path)
    elif args_type is PodTopologySpreadArgs:
        args = _decode_pod_topology_spread_args(body, path)
    else:
        args = dec.decode(args_type, body, path)
    args.set_defaults()
    return args


def _decode_node_affinity_args(raw: Mapping[str, Any], path: str) -> NodeAffinityArgs:
    dec.decode(_NodeAffinityArgsKeys, raw, path)  # strict about the top-level keys
    affinity = raw.get("addedAffinity")
    if affinity is None:
        return NodeAffinityArgs()
    return NodeAffinityArgs(
        added_affinity=decode_model(NodeAffinity, affinity, dec.child(path, "addedAffinity"))
    )


def _decode_pod_topology_spread_args(raw: Mapping[str, Any], path: str) -> PodTopologySpreadArgs:
    keys = dec.decode(_PodTopologySpreadArgsKeys, raw, path)
    constraints_path = dec.child(path, "defaultConstraints")
    constraints = []
    for i, item in enumerate(keys.default_constraints):
        item_path = dec.index(constraints_path, i)
        constraint = decode_model(TopologySpreadConstraint, item, item_path)
        # The model defaults maxSkew to 1 and whenUnsatisfiable to DoNotSchedule, but in
        # args an absent value is Go's zero value, which validation then rejects.
        if "maxSkew" not in item:
            constraint.max_skew = 0
        if "whenUnsatisfiable" not in item:
            constraint.when_unsatisfiable = ""
        constraints.append(constraint)
    return PodTopologySpreadArgs(
        default_constraints=constraints, defaulting_type=keys.defaulting_type
    )


@dataclass(slots=True, kw_only=True)
class _NodeAffinityArgsKeys:
    added_affinity: Any = None


@dataclass(slots=True, kw_only=True)
class _PodTopologySpreadArgsKeys:
    default_constraints: list[Any] = field(default_factory=list)
    defaulting_type: str = ""


def decode_model(cls: type[M], raw: object, path: str) -> M:
    """Decode a shared.models object (NodeAffinity, TopologySpreadConstraint) with the models'
    own strict manifest decoder, re-rooting its error path under `path`."""
    try:
        model: M = object_decoder(cast(Any, cls), Mode.MANIFEST)(raw)
    except FieldError as err:
        dec.fail(f"{dec.join(path, err.path)}: {err.reason}")
    return model
