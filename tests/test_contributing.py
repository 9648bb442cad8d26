"""CONTRIBUTING.md's recipes ("add a plugin", "add a service", "add a metric") stay true: the
paths they name exist, the names they tell you to edit are defined where they say, the
commands they show run the modules and flags that exist, and what a recipe asks of every
plugin, service and metric holds for the ones already there."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
import typing
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from scheduling.plugins import names
from scheduling.plugins.registry import IN_TREE_FACTORIES
from shared.observability.metrics import BerthMetrics
from shared.runtime.settings import fields
from tests.settings.catalog import OWN

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "CONTRIBUTING.md").read_text()
UPSTREAM = ("pkg/", "kubernetes/kubernetes", "/", ".venv/", "test-artifacts/")
"""Backticked paths that are not this repository's: upstream's, absolute, made by `make`."""


def _section(title: str) -> str:
    start = GUIDE.index(f"## {title}\n")
    end = GUIDE.find("\n## ", start + 1)
    return GUIDE[start : end if end > 0 else None]


def _named_paths() -> list[str]:
    out = []
    for item in re.findall(r"`([^`\s]+)`", GUIDE):
        if "/" not in item.rstrip("/") or item.startswith(UPSTREAM) or "://" in item:
            continue  # not a path, a folder relative to something else, or not ours
        looks_like_path = item.endswith((".py", ".md", ".yaml", ".lua", "/"))
        if looks_like_path or re.fullmatch(r"[a-z_]+(/[a-z_<>]+)+", item):
            out.append(item)
    return sorted(set(out))


@pytest.mark.parametrize("path", _named_paths())
def test_every_path_the_guide_names_exists(path: str) -> None:
    """A placeholder (`services/<name>/`) must have its fixed part: `services/`."""
    fixed = path.split("<", 1)[0].rstrip("/")
    if "<" in path:
        fixed = fixed.rpartition("/")[0] if not fixed.endswith("/") else fixed
    assert (ROOT / fixed).exists(), f"CONTRIBUTING.md names {path}: {fixed} does not exist"


def test_the_path_check_sees_the_recipes() -> None:
    named = _named_paths()
    for path in (
        "scheduling/plugins/registry.py",
        "shared/config/plugin_args.py",
        "shared/runtime/settings.py",
        "tests/settings/catalog.py",
        "shared/observability/metrics.py",
        "services/<name>/",
    ):
        assert path in named


def _defines(path: str, name: str) -> bool:
    """`name` is assigned, defined or a class in `path` (top level or in a class)."""
    tree = ast.parse((ROOT / path).read_text())
    for node in ast.walk(tree):
        definition = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        if isinstance(node, definition) and node.name == name:
            return True
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id == name:
                return True
            if isinstance(target, ast.Attribute) and target.attr == name:
                return True
    return False


DEFINED = [
    # Add a plugin
    ("IN_TREE_FACTORIES", "scheduling/plugins/registry.py"),
    ("ARGS_BY_PLUGIN", "shared/config/plugin_args.py"),
    ("NODE_LOCAL", "scheduling/framework/signature.py"),
    ("WHEN_SKIPPED", "scheduling/framework/signature.py"),
    ("pod_signature", "scheduling/framework/signature.py"),
    ("new", "scheduling/plugins/nodename/node_name.py"),
    # Add a service
    ("from_argv", "shared/runtime/service.py"),
    ("environment", "shared/runtime/service.py"),
    ("configured", "shared/runtime/service.py"),
    ("wait_for_servers", "shared/runtime/service.py"),
    ("ready_until_stopped", "shared/runtime/service.py"),
    ("from_env", "shared/runtime/env.py"),
    ("read", "shared/runtime/settings.py"),
    ("setting", "shared/runtime/settings.py"),
    ("OWN", "tests/settings/catalog.py"),
    ("KEY_LAYOUT", "tests/test_import_walls.py"),
    ("Stack", "cli/supervisor.py"),
    ("COMPONENTS", "tests/deploy/chart.py"),
    ("SERVICES", "tests/deploy/test_image.py"),
    # Add a message
    ("WireMessage", "shared/messaging/wire.py"),
    ("BatchedMessage", "shared/messaging/wire.py"),
    ("WireBody", "shared/messaging/wire.py"),
    ("wire", "shared/messaging/wire.py"),
    ("_FULL", "tests/binder/test_proposal_wire.py"),
    # Add a metric
    ("BerthMetrics", "shared/observability/metrics.py"),
    ("default_metrics", "shared/observability/metrics.py"),
    ("conflict", "shared/observability/metrics.py"),
]


@pytest.mark.parametrize(("name", "path"), DEFINED, ids=[f"{p}:{n}" for n, p in DEFINED])
def test_the_names_a_recipe_says_to_edit_are_where_it_says(name: str, path: str) -> None:
    assert f"`{name}" in GUIDE or f" {name}(" in GUIDE or f"{name}(" in GUIDE, name
    assert _defines(path, name), f"CONTRIBUTING.md: {name} is not defined in {path}"


def test_make_targets() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in re.findall(r"^\s+make (\w+)", GUIDE, re.MULTILINE):
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), f"make {target}"


def _service_flags(service: str) -> set[str]:
    flags = {"--name"} if service != "scheduler" else set()
    for model in OWN[service]:
        flags |= {f.spec.flag for f in fields(model) if f.spec.flag}
    return flags


def test_the_commands_shown_run_modules_and_flags_that_exist() -> None:
    commands = re.findall(r"python -m ([\w.]+)((?: --?[\w-]+(?: [^\s#-][^\s#]*)?)*)", GUIDE)
    assert len(commands) >= 5
    for module, rest in commands:
        assert importlib.util.find_spec(module) is not None, module
        service = module.removeprefix("services.")
        if service in OWN:
            given = set(re.findall(r"(--[\w-]+)", rest))
            assert given <= _service_flags(service), f"{module}: {given - _service_flags(service)}"
    cli_sources = "\n".join(p.read_text() for p in (ROOT / "cli").rglob("*.py"))
    shown = re.findall(r"`berth ([a-z][a-z-]+)", GUIDE)
    shown += re.findall(r"^\s+\.venv/bin/berth ([a-z][a-z-]+)", GUIDE, re.MULTILINE)
    assert {"up", "schedule", "dev-servers"} <= set(shown)
    for sub in shown:
        assert f'"{sub}"' in cli_sources, f"berth {sub}: no such subcommand in cli/"


def test_every_service_follows_the_service_recipe() -> None:
    services = sorted(p.name for p in (ROOT / "services").iterdir() if (p / "main.py").exists())
    assert services == sorted(OWN)
    for service in services:
        package = ROOT / "services" / service
        assert (package / "__main__.py").exists()
        assert "ServiceRunner" in (package / "main.py").read_text()
        assert (ROOT / "deploy" / "helm" / "berth" / "templates" / service).is_dir(), service
        assert (
            f"## {service} (`python -m services.{service}`)"
            in (ROOT / "docs" / "settings.md").read_text()
        )


def test_every_registered_plugin_follows_the_plugin_recipe() -> None:
    declared = {v for k, v in vars(names).items() if k.isupper() and isinstance(v, str)}
    assert set(IN_TREE_FACTORIES) <= declared
    for name, factory in IN_TREE_FACTORIES.items():
        module = factory.__module__
        assert module.startswith("scheduling.plugins."), (name, module)
        assert (ROOT / Path(*module.split(".")[:3])).is_dir(), (name, module)


def test_every_metric_family_is_listed_in_the_readme() -> None:
    """The metric recipe's last step."""
    registry = CollectorRegistry()
    BerthMetrics(registry)
    families = sorted({family.name for family in registry.collect()})
    assert len(families) > 40
    readme = (ROOT / "README.md").read_text()
    missing = [name for name in families if name not in readme]
    assert not missing, f"metric families missing from README.md: {missing}"


def _messages() -> list[type]:
    """Every message class in shared/messaging (a WireBody subclass defined there)."""
    from shared.messaging.wire import BatchedMessage, WireBody, WireMessage

    found = []
    for path in sorted((ROOT / "shared" / "messaging").glob("*.py")):
        module = importlib.import_module(f"shared.messaging.{path.stem}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, WireBody)
                and value not in (WireBody, WireMessage, BatchedMessage)
                and value.__module__ == module.__name__
            ):
                found.append(value)
    return found


def test_every_message_follows_the_message_recipe() -> None:
    from tests.binder.test_proposal_wire import _FULL

    messages = _messages()
    assert messages, "no message found: the recipe's path is wrong"
    pinned = {type(message) for message, _ in _FULL}
    for cls in messages:
        for field in dataclasses.fields(cls):
            assert "json" in field.metadata, f"{cls.__name__}.{field.name} has no wire(...) name"
        # A part of a message (a proposal's Victim) is pinned inside the message that holds it.
        parts = {arg for m in pinned for hint in typing.get_type_hints(m).values()
                 for arg in typing.get_args(hint)}  # fmt: skip
        assert cls in pinned | parts, f"{cls.__name__} is not in _FULL"
