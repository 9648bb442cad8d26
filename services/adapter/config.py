"""The adapter's own settings: where its leader-election Lease lives (shared.runtime.settings reads
them; the servers and prefixes are shared.runtime.env.StackSettings')."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from shared.runtime.env import ENV_KUBE_LEASE_NAME, ENV_KUBE_LEASE_NAMESPACE
from shared.runtime.settings import read, setting


@dataclass(frozen=True, slots=True)
class AdapterSettings:
    lease_namespace: Annotated[
        str,
        setting(
            ENV_KUBE_LEASE_NAMESPACE,
            "namespace of the adapter's leader-election Lease (unset: the configuration's, "
            "else kube-system)",
        ),
    ] = ""
    lease_name: Annotated[
        str,
        setting(
            ENV_KUBE_LEASE_NAME,
            "name of that Lease (unset: the configuration's, else berth-adapter; one per "
            "installation)",
        ),
    ] = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AdapterSettings:
        return read(cls, env)
