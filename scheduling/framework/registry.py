"""Registry: plugin name -> factory, and which extension points a plugin implements.

Port of upstream pkg/scheduler/framework/runtime/registry.go. The in-tree registry lives in
`scheduling/plugins/registry.py`; out-of-tree plugins come in through `merge`
(upstream WithFrameworkOutOfTreeRegistry). Errors:

    RegistryError              (ValueError)
    ├── DuplicatePluginError   a name registered twice
    └── UnknownPluginError     unregistering a name that is not there
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from scheduling.framework.interfaces import (
    BindPlugin,
    FilterPlugin,
    NodeFilterPlugin,
    NodeScorePlugin,
    PermitPlugin,
    PluginFactory,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from shared.config import ExtensionPoint


class RegistryError(ValueError):
    """The registry cannot be changed that way."""


class DuplicatePluginError(RegistryError):
    """Two factories for one plugin name."""


class UnknownPluginError(RegistryError):
    """No factory under that name."""


class Registry(Mapping[str, PluginFactory]):
    """Plugin name -> factory(args, handle). Names are unique; merging rejects duplicates."""

    __slots__ = ("_factories",)

    def __init__(self, factories: Mapping[str, PluginFactory] | None = None) -> None:
        self._factories: dict[str, PluginFactory] = {}
        if factories:
            self.merge(factories)

    def register(self, name: str, factory: PluginFactory) -> None:
        if name in self._factories:
            raise DuplicatePluginError(f"a plugin named {name} already exists")
        self._factories[name] = factory

    def unregister(self, name: str) -> None:
        if name not in self._factories:
            raise UnknownPluginError(f"no plugin named {name} exists")
        del self._factories[name]

    def merge(self, other: Mapping[str, PluginFactory]) -> None:
        """Add every factory of `other` (an out-of-tree registry); any shared name is an error,
        and then nothing is added."""
        shared = sorted(name for name in other if name in self._factories)
        if shared:
            raise DuplicatePluginError(f"a plugin named {shared[0]} already exists")
        for name, factory in other.items():
            self.register(name, factory)

    def __getitem__(self, name: str) -> PluginFactory:
        return self._factories[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)

    def __repr__(self) -> str:
        return f"Registry({sorted(self._factories)})"


# Order matters only for readability; each check is independent.
_PROTOCOLS: tuple[tuple[ExtensionPoint, tuple[type, ...]], ...] = (
    (ExtensionPoint.PRE_ENQUEUE, (PreEnqueuePlugin,)),
    (ExtensionPoint.QUEUE_SORT, (QueueSortPlugin,)),
    (ExtensionPoint.PRE_FILTER, (PreFilterPlugin,)),
    (ExtensionPoint.FILTER, (FilterPlugin, NodeFilterPlugin)),
    (ExtensionPoint.POST_FILTER, (PostFilterPlugin,)),
    (ExtensionPoint.PRE_SCORE, (PreScorePlugin,)),
    (ExtensionPoint.SCORE, (ScorePlugin, NodeScorePlugin)),
    (ExtensionPoint.RESERVE, (ReservePlugin,)),
    (ExtensionPoint.PERMIT, (PermitPlugin,)),
    (ExtensionPoint.PRE_BIND, (PreBindPlugin,)),
    (ExtensionPoint.BIND, (BindPlugin,)),
    (ExtensionPoint.POST_BIND, (PostBindPlugin,)),
)


def capabilities(plugin: object) -> frozenset[str]:
    """The extension points `plugin` implements (ExtensionPoint values), judged by the
    runtime-checkable Protocols: the per-node Filter/Score forms count as Filter/Score,
    since the framework adapts them."""
    return frozenset(
        point
        for point, protocols in _PROTOCOLS
        if any(isinstance(plugin, protocol) for protocol in protocols)
    )
