"""docs/settings.md is what tests/settings/catalog.py renders from the settings classes, and
the process-wide table names variables the modules it names really read."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from shared.runtime.service import PROCESS_SETTINGS
from tests.settings.catalog import DOC, OWN, render

ROOT = Path(__file__).resolve().parents[2]


def test_the_settings_doc_is_current() -> None:
    assert DOC.read_text() == render(), "run: python -m tests.settings.catalog"


def test_every_process_wide_variable_is_read_where_the_table_says() -> None:
    for name, path, _ in PROCESS_SETTINGS:
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        constants = {v for k, v in vars(module).items() if k.startswith("ENV_")}
        assert name in constants, f"{path} has no ENV_* constant naming {name}"


def test_every_service_has_a_section() -> None:
    text = DOC.read_text()
    for service in OWN:
        assert f"## {service} (`python -m services.{service}`)" in text
    assert set(OWN) == {p.name for p in (ROOT / "services").iterdir() if (p / "main.py").exists()}


def test_every_table_row_has_five_cells() -> None:
    """A `|` in a type or a meaning must be escaped, or the row falls apart."""
    for line in DOC.read_text().splitlines():
        if line.startswith("| `BERTH_") and "| Read by |" not in line:
            cells = re.split(r"(?<!\\)\|", line)[1:-1]
            assert len(cells) in (3, 5), line
