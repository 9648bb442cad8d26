"""Resource name classes, as upstream v1helper / schedutil define them.

They decide which requested resources NodeResourcesFit checks and which resources the scoring
strategies can score at all: cpu, memory and ephemeral-storage always; every other name only if
it is a "scalar" resource (extended, hugepages-*, *kubernetes.io/*, attachable-volumes-*).
A name such as "foo" (no domain, not native) is dropped by upstream's Resource.SetMaxResource,
so it is neither checked nor scored; "pods" is counted separately ("Too many pods").
"""

from __future__ import annotations

from functools import lru_cache

from shared.config.names import qualified_name_errors

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

_DEFAULT_NAMESPACE_PREFIX = "kubernetes.io/"
_REQUESTS_PREFIX = "requests."
_HUGE_PAGES_PREFIX = "hugepages-"
_ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"


def is_prefixed_native_resource(name: str) -> bool:
    return _DEFAULT_NAMESPACE_PREFIX in name


def is_native_resource(name: str) -> bool:
    return "/" not in name or is_prefixed_native_resource(name)


@lru_cache(maxsize=1024)
def is_extended_resource_name(name: str) -> bool:
    """A domain-prefixed name outside kubernetes.io that is a valid quota name."""
    if is_native_resource(name) or name.startswith(_REQUESTS_PREFIX):
        return False
    return not qualified_name_errors(_REQUESTS_PREFIX + name)


def is_scalar_resource_name(name: str) -> bool:
    return (
        is_extended_resource_name(name)
        or name.startswith(_HUGE_PAGES_PREFIX)
        or is_prefixed_native_resource(name)
        or name.startswith(_ATTACHABLE_VOLUMES_PREFIX)
    )


def is_tracked_resource(name: str) -> bool:
    """A resource upstream's framework.Resource keeps: the three core ones and scalars."""
    return name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource_name(name)
