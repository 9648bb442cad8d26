"""The project layout never shadows the standard library, and every module says what it owns."""

import ast
import importlib
import queue
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_stdlib_queue_is_not_shadowed_by_services_queue() -> None:
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    assert Path(queue.__file__).resolve().parent == stdlib
    assert hasattr(queue, "PriorityQueue")


def test_services_is_a_regular_package() -> None:
    # A namespace package (no __init__.py) would let `services/queue` be imported as `queue`.
    assert (ROOT / "services" / "__init__.py").is_file()
    module = importlib.import_module("services.queue")
    assert module.__file__ is not None
    assert Path(module.__file__).resolve() == ROOT / "services" / "queue" / "__init__.py"


def test_console_script_entry_point_resolves() -> None:
    from importlib.metadata import entry_points

    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "berth"]
    assert script.value == "cli.main:main"
    assert callable(script.load())


def _sources() -> list[Path]:
    return [
        path
        for package in ("cli", "scheduling", "services", "shared")
        for path in sorted((ROOT / package).rglob("*.py"))
        if not path.name.startswith("test_")
    ]


def test_every_module_says_what_it_owns() -> None:
    """Each source module opens with a docstring whose first line says what it owns."""
    silent = [
        str(path.relative_to(ROOT))
        for path in _sources()
        if not (ast.get_docstring(ast.parse(path.read_text())) or "").strip()
    ]
    assert silent == []


def test_one_lua_loader() -> None:
    """Lua is loaded in one place (shared/runtime/lua.py): no script text registered inline."""
    inline = [
        str(path.relative_to(ROOT))
        for path in _sources()
        if path != ROOT / "shared" / "runtime" / "lua.py"
        and ".register_script(" in path.read_text()
    ]
    assert inline == []


def test_shared_holds_packages_only() -> None:
    """shared/ is packages that say what they hold (issue 21): no loose module beside them."""
    loose = sorted(p.name for p in (ROOT / "shared").glob("*.py") if p.name != "__init__.py")
    assert loose == []
    for package in sorted(p for p in (ROOT / "shared").iterdir() if p.is_dir()):
        if package.name in ("__pycache__",) or not any(package.glob("*.py")):
            continue
        assert (package / "__init__.py").is_file(), package.name
