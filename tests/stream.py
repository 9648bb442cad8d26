"""Reading the store's change stream in tests: every change after a version, up to the
store's version when the read began."""

from __future__ import annotations

from shared.store import Change, ClusterStore


async def follow_all(store: ClusterStore, after: int, **options: object) -> list[Change]:
    target = await store.resource_version()
    out: list[Change] = []
    async for batch in store.follow_batches(after, block_ms=100, **options):  # type: ignore[arg-type]
        out.extend(batch)
        if out[-1].resource_version >= target:
            break
    return out
