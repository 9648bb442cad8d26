"""Fuzzing `berth schedule` with mutated manifests: 2,000+ seeded mutations of the bundled
examples (fields deleted, retyped, made huge, negative, fractional, badly named, deeply
nested; texts truncated or garbled). Every case must end with exit 0 (scheduled) or exit 1
with one `error:` line naming the file (and, for an object, its kind, name and field): no
traceback, no hang, nothing on stdout after an error.

`BERTH_FUZZ_CASES=N` runs N cases (default 2,100); the seed of a failing case is in its id.
"""

from __future__ import annotations

import copy
import io
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CASES = int(os.environ.get("BERTH_FUZZ_CASES", "2100"))
CASE_SECONDS = 10.0
"""Time bound of one case (a hang fails the case)."""

_BASE: list[dict[str, Any]] = [
    doc
    for name in ("cluster.yaml", "pods.yaml")
    for doc in yaml.safe_load_all((EXAMPLES / name).read_text())
    if doc
]

HOSTILE_VALUES: list[Any] = [
    None,
    "",
    -1,
    0,
    2**31,
    2**63,
    2**64 - 1,
    2**70,
    -(2**63) - 1,
    1.5,
    -0.5,
    1e308,
    True,
    [],
    {},
    [1, 2],
    {"a": 1},
    "a b",
    "example/com/aaa",
    "hugepages/2Mi",
    ".",
    "e1",
    "-",
    "1e400",
    "9" * 80,
    "x" * 300,
    "Ünïcödé",
    "\x00",
    "a/b",
    "UPPER",
    "-leading",
    "0.5",
    "1Ei",
    "NaN",
    "$(rm -rf /)",
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a document (mapping keys and list indexes)."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += _paths(child, (*prefix, index))
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        doc = doc[part]
    return doc


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"n": value}
    return value


def _mutate_docs(rng: random.Random, docs: list[dict[str, Any]]) -> str:
    for _ in range(rng.randint(1, 3)):
        doc = rng.choice(docs)
        path = rng.choice(_paths(doc))
        parent = _parent(doc, path)
        last = path[-1]
        action = rng.random()
        if action < 0.2 and isinstance(parent, dict):
            del parent[last]
        elif action < 0.3 and isinstance(parent, dict):
            parent[f"{last}Typo"] = parent[last]  # an unknown field
        elif action < 0.35:
            parent[last] = _nested(rng.choice([5, 40, 200]))
        elif action < 0.45 and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[last]))  # duplicates
        else:
            parent[last] = rng.choice(HOSTILE_VALUES)
    if rng.random() < 0.2:
        docs.append(copy.deepcopy(rng.choice(docs)))  # a duplicate object
    if rng.random() < 0.5:
        return json.dumps(docs)[1:-1].replace("}, {", "}\n---\n{")
    return yaml.safe_dump_all(docs, sort_keys=False)


def _mutate_text(rng: random.Random, text: str) -> str:
    action = rng.random()
    if action < 0.3:
        return text[: rng.randrange(len(text))]
    if action < 0.5:
        at = rng.randrange(len(text))
        junk = rng.choice(["{", "[", ":", "- ", "\t", '"', "'", "&a", "*a", "!!"])
        return text[:at] + junk + text[at:]
    if action < 0.6:
        return "[" * rng.randint(100, 20000) + "]" * rng.randint(0, 3)
    if action < 0.7:
        return "".join(" " * (2 * i) + "k:\n" for i in range(rng.randint(60, 3000)))
    if action < 0.8:
        return text.replace("cpu: ", "cpu: " + "9" * rng.choice([100, 4301, 6000]), 1)
    if action < 0.9:
        return "kind: Pod\nvalue: " + "9" * rng.choice([4300, 4301, 10000]) + "\n"
    return text + "\n---\n" + rng.choice(["null", "42", "[1, 2]", "kind: List", "&x [*x]"])


def _case(seed: int, tmp: Path) -> Path:
    rng = random.Random(seed)
    docs = copy.deepcopy(_BASE)
    text = _mutate_docs(rng, docs)
    if rng.random() < 0.35:
        text = _mutate_text(rng, text)
    path = tmp / f"case-{seed}.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


def _run(path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["schedule", "-f", str(path), "-o", "json"])
    return code, out.getvalue(), err.getvalue()


_OBJECT_ERROR = re.compile(r"^error: [A-Za-z]+ \S+: \S+")


def _check(seed: int, tmp: Path, run: Callable[[Path], tuple[int, str, str]]) -> None:
    path = _case(seed, tmp)
    started = time.monotonic()
    code, out, err = run(path)
    elapsed = time.monotonic() - started
    assert elapsed < CASE_SECONDS, f"case {seed} took {elapsed:.1f}s"
    assert "Traceback" not in err
    if code == 0:
        assert json.loads(out)["pods"] is not None
        return
    assert code == 1, (code, err)
    assert out == ""
    lines = [line for line in err.splitlines() if not line.startswith("warning:")]
    assert len(lines) == 1, err
    [line] = lines
    assert line.startswith("error: ")
    # Names the file, or the object and the field (object errors carry the file too).
    assert str(path) in line or _OBJECT_ERROR.match(line), line


BATCH = 100


@pytest.mark.parametrize("batch", range((CASES + BATCH - 1) // BATCH))
def test_mutated_manifests_never_crash_berth_schedule(batch: int, tmp_path: Path) -> None:
    for seed in range(batch * BATCH, min(CASES, (batch + 1) * BATCH)):
        _check(seed, tmp_path, _run)


def _subprocess_run(path: Path) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "schedule", "-f", str(path), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=CASE_SECONDS * 3,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("seed", [56, 77, 133, 140, 7])
def test_nasty_cases_in_a_real_process(seed: int, tmp_path: Path) -> None:
    """A few cases in a process of their own: a crash in C (deep recursion in a parser)
    would kill the process rather than raise, which only a subprocess shows."""
    _check(seed, tmp_path, _subprocess_run)
