"""The import walls of the layout (CONTRIBUTING.md), checked on every module's imports.

- `shared` (models, config, store, wire messages, keys, settings) knows no service, no CLI and
  no scheduling library.
- `scheduling` (framework, plugins, cache, dry run) knows no service and no CLI.
- The framework knows plugins only through the registry it is given: nothing under
  `scheduling/framework` imports `scheduling.plugins`.
- A service imports no other service and no CLI, except another service's public client module
  (`services/<name>/client.py`): services talk through the message types in `shared` and those
  clients.
- Every Redis key has one owner: no module outside a service imports the modules that know its
  key layout (`KEY_LAYOUT`); the CLI reads a service's state through its client too.
- The binder imports no plugin module directly: from `scheduling/plugins` it takes the registry,
  the plugin names and `scheduling/plugins/binding.py` (every plugin rule it re-checks, in one
  place).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cli", "scheduling", "services", "shared")


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[str]:
    """Every module the file imports (absolute names; relative imports resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    package = _module(path).rsplit(".", 1)[0] if path.name != "__init__.py" else _module(path)
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            out.append(base)
            out += [f"{base}.{alias.name}" for alias in node.names]
    return out


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _service(name: str) -> str | None:
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "services" and len(parts) > 1 else None


KEY_LAYOUT = {
    "services.queue": (
        "services.queue.keys",
        "services.queue.state",
        "services.queue.views",
        "services.queue.lease",
        "services.queue.scripts",
        "services.queue.wire",
        "services.queue.store",
        "services.queue.quota.status",
        "services.queue.quota.scripts",
    ),
}
"""Per service, the modules that name its Redis keys or decode its records."""

PLUGIN_DOORS = (
    "scheduling.plugins.registry",
    "scheduling.plugins.names",
    "scheduling.plugins.binding",
)
"""What the binder may import from scheduling/plugins."""


def _plugin_module(name: str) -> bool:
    return _within(name, "scheduling.plugins") and name != "scheduling.plugins"


def violation(module: str, imported: str) -> str | None:
    """Why `module` may not import `imported` (None: it may)."""
    for owner, layout in KEY_LAYOUT.items():
        if not _within(module, owner) and any(_within(imported, m) for m in layout):
            return f"only {owner} reads its keys (others use {owner}.client)"
    if (
        _within(module, "services.binder")
        and _plugin_module(imported)
        and not any(_within(imported, door) for door in PLUGIN_DOORS)
    ):
        return "the binder reaches plugins through the registry, names and plugins.binding"
    if _within(module, "shared") and any(
        _within(imported, p) for p in ("cli", "scheduling", "services")
    ):
        return "shared knows no service, CLI or scheduling library"
    if _within(module, "scheduling") and any(_within(imported, p) for p in ("cli", "services")):
        return "the scheduling library knows no service and no CLI"
    if _within(module, "scheduling.framework") and _within(imported, "scheduling.plugins"):
        return "the framework knows plugins only through the registry it is given"
    if _within(module, "services"):
        if _within(imported, "cli"):
            return "a service does not import the CLI"
        own, other = _service(module), _service(imported)
        if (
            other is not None
            and other not in (own, "services.__init__")
            and not _within(imported, f"{other}.client")
            and imported != other  # `from services.queue import client` names the package first
        ):
            return "a service imports no other service but its client module"
    return None


def _sources() -> list[Path]:
    return sorted(
        path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if not path.name.startswith("test_")
    )


def test_every_module_keeps_to_its_walls() -> None:
    broken = [
        f"{_module(path)} imports {imported}: {why}"
        for path in _sources()
        for imported in _imports(path)
        if (why := violation(_module(path), imported)) is not None
    ]
    assert broken == []


@pytest.mark.parametrize(
    ("module", "imported", "allowed"),
    [
        pytest.param("shared.store.store", "shared.models", True, id="shared-within-shared"),
        pytest.param(
            "shared.messaging.messages", "services.binder.service", False, id="shared-to-service"
        ),
        pytest.param("shared.runtime.env", "cli.servers", False, id="shared-to-cli"),
        pytest.param("scheduling.cache.cache", "services.binder", False, id="library-to-service"),
        pytest.param(
            "scheduling.framework.runtime",
            "scheduling.plugins.defaultpreemption",
            False,
            id="framework-to-plugin",
        ),
        pytest.param(
            "scheduling.plugins.nodeports.node_ports",
            "scheduling.framework.interfaces",
            True,
            id="plugin-to-framework",
        ),
        pytest.param("services.scheduler.service", "services.binder.config", False, id="x-svc"),
        pytest.param("services.binder.main", "services.binder.service", True, id="own-service"),
        pytest.param("services.queue.main", "cli.servers", False, id="service-to-cli"),
        pytest.param("cli.main", "services.queue.config", True, id="cli-to-service"),
        pytest.param("cli.client", "services.queue.store", False, id="cli-to-queue-store"),
        pytest.param("cli.run", "services.queue.views", False, id="cli-to-queue-views"),
        pytest.param("services.dashboard.data", "services.queue.keys", False, id="queue-keys"),
        pytest.param("services.binder.binder", "services.queue.client", True, id="client"),
        pytest.param(
            "services.binder.binder", "services.queue.client.QueueClient", True, id="client-name"
        ),
        pytest.param("services.binder.binder", "services.queue.lease", False, id="lease"),
        pytest.param("shared.store.store", "services.queue.state", False, id="shared-to-state"),
        pytest.param("services.queue.service", "services.queue.keys", True, id="queue-own-keys"),
        pytest.param(
            "services.binder.checks",
            "scheduling.plugins.noderesources.fit",
            False,
            id="binder-to-plugin",
        ),
        pytest.param(
            "services.binder.checks", "scheduling.plugins.binding", True, id="binder-door"
        ),
        pytest.param("services.binder.checks", "scheduling.plugins.names", True, id="names"),
        pytest.param(
            "services.scheduler.service",
            "scheduling.plugins.coscheduling",
            True,
            id="worker-to-plugin",
        ),
    ],
)
def test_the_rules_themselves(module: str, imported: str, allowed: bool) -> None:
    assert (violation(module, imported) is None) is allowed


def test_modules_stay_small() -> None:
    """No source module over 600 lines without a reason (listed here; a new entry needs one
    as concrete)."""
    reasons: dict[str, str] = {}
    long = [
        f"{path.relative_to(ROOT)}: {count}"
        for path in _sources()
        if (count := len(path.read_text().splitlines())) > 600
        and str(path.relative_to(ROOT)) not in reasons
    ]
    assert long == []
    # An exemption whose module shrank below the cap is stale: drop it.
    for path in reasons:
        assert len((ROOT / path).read_text().splitlines()) > 600, f"{path} no longer needs one"
