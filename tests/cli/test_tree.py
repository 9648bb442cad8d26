"""The `berth` command tree (cli/main.py, cli/commands/): lazy subcommands, bench and demo
split by mode with their old spellings kept, shell completion, one-line usage errors, and a
README whose commands parse against the tree."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from cli.commands import stack, stack_up
from cli.commands.groups import LazyGroup, ModeGroup
from cli.main import SUBCOMMANDS, berth, main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
HEAVY = ("numpy", "aiokafka", "matplotlib", "scheduling", "redis", "aiohttp", "yaml")


def imports_of(*argv: str, env: dict[str, str] | None = None) -> tuple[int, set[str]]:
    """Run `berth ARGV` in a fresh interpreter; its exit code and every module it loaded."""
    script = (
        "import contextlib, io, json, sys\n"
        "from cli.main import main\n"
        "out, err = io.StringIO(), io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
        f"    code = main({list(argv)!r})\n"
        "print(json.dumps([code, sorted(sys.modules)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=120,
        check=True,
    )
    code, modules = json.loads(done.stdout.strip().splitlines()[-1])
    return code, set(modules)


def tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize(
    ("argv", "cli_modules"),
    [
        pytest.param(("--help",), set(), id="berth --help"),
        pytest.param(("get", "--help"), {"cli.commands.stack"}, id="berth get --help"),
        pytest.param(("bench", "--help"), {"cli.commands.bench"}, id="berth bench --help"),
        pytest.param(
            ("bench", "--mode", "kueue", "--help"), {"cli.commands.bench"}, id="bench kueue help"
        ),
        pytest.param(("up", "--help"), {"cli.commands.stack_up"}, id="berth up --help"),
        pytest.param(
            ("completion", "bash"), {"cli.commands.completion"}, id="berth completion bash"
        ),
    ],
)
def test_help_and_completion_import_click_and_their_own_command_only(
    argv: tuple[str, ...], cli_modules: set[str]
) -> None:
    code, modules = imports_of(*argv)
    assert code == 0
    assert not tops(modules) & set(HEAVY), sorted(tops(modules) & set(HEAVY))
    assert not tops(modules) & {"services", "shared"}
    loaded = {m for m in modules if m.startswith("cli.")}
    assert loaded == {"cli.main", "cli.commands", "cli.commands.groups", *cli_modules}


def test_berth_get_loads_neither_the_framework_numpy_nor_matplotlib() -> None:
    """`berth get pods` against a Redis that is not there: it gets as far as connecting
    (exit 1, the one-line error) without the scheduling framework, numpy or matplotlib, nor
    the queue service (services/queue/__init__ imports nothing), nor Kafka's client (it reads
    Redis only; shared.runtime.retry imports aiokafka when an outage is first classified)."""
    code, modules = imports_of(
        "get",
        "pods",
        env={
            "BERTH_REDIS_URL": "redis://127.0.0.1:1/0",
            "BERTH_KAFKA_BOOTSTRAP": "127.0.0.1:1",
            "BERTH_STATE": "/nonexistent/stack.json",
        },
    )
    assert code == 1
    assert "cli.stack_commands" in modules  # it did run
    assert not tops(modules) & {"numpy", "matplotlib", "scheduling", "aiokafka"}
    assert "services.queue.service" not in modules


def test_the_lazy_table_matches_each_commands_own_help_and_name() -> None:
    assert isinstance(berth, LazyGroup)
    for name, (_, help_text) in SUBCOMMANDS.items():
        command = berth.load(name)
        assert command.name == name
        assert command.get_short_help_str(limit=200) == help_text, name


def test_help_strings_name_the_environment_the_code_reads() -> None:
    from shared.runtime.env import (
        ENV_KAFKA_BOOTSTRAP,
        ENV_REDIS_URL,
        ENV_TOKEN,
        REDIS_FSYNC_POLICIES,
    )

    assert f"${ENV_REDIS_URL} " in stack.REDIS_URL_HELP
    assert stack.KAFKA_BOOTSTRAP_HELP.endswith(f"${ENV_KAFKA_BOOTSTRAP}")
    assert f"${ENV_TOKEN};" in stack.TOKEN_HELP
    assert stack_up.REDIS_FSYNC_POLICIES == REDIS_FSYNC_POLICIES


def unparsed(ctx: click.Context) -> list[str]:
    """What a group left for its subcommand (click 8.2 renamed protected_args)."""
    protected = ctx.__dict__.get("_protected_args", ctx.__dict__.get("protected_args", []))
    return [*protected, *ctx.args]


def resolve(argv: list[str]) -> list[str]:
    """The path of commands `berth ARGV` runs (parsed, not run)."""
    with berth.make_context("berth", list(argv)) as ctx:
        path = [ctx.command.name or ""]
        while unparsed(ctx):
            assert isinstance(ctx.command, click.Group)
            name, command, rest = ctx.command.resolve_command(ctx, unparsed(ctx))
            assert command is not None
            ctx = command.make_context(name, rest, parent=ctx)
            path.append(command.name or "")
            if not isinstance(command, click.Group):
                break
        return path


@pytest.mark.parametrize(
    ("argv", "path"),
    [
        (["bench", "--mode", "queue", "--pods", "5"], ["berth", "bench", "queue"]),
        (["bench", "--mode=kueue", "--generator", "g.yaml"], ["berth", "bench", "kueue"]),
        (
            ["bench", "--nodes", "5", "--mode", "distributed", "--model"],
            ["berth", "bench", "distributed"],
        ),
        (["bench", "distributed", "--workers", "2"], ["berth", "bench", "distributed"]),
        (["bench", "--nodes", "5", "--no-reuse"], ["berth", "bench", "in-process"]),
        (["bench"], ["berth", "bench", "in-process"]),
        (["demo"], ["berth", "demo", "workload"]),
        (["demo", "--tenants", "--plot", "t.png"], ["berth", "demo", "tenants"]),
        (["demo", "--pods", "5", "-o", "json"], ["berth", "demo", "workload"]),
        (["demo", "tenants", "--job-seconds", "1"], ["berth", "demo", "tenants"]),
        (["get", "pods", "-o", "wide"], ["berth", "get"]),
    ],
)
def test_old_and_new_spellings_reach_the_same_command(argv: list[str], path: list[str]) -> None:
    assert resolve(argv) == path


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """`berth ARGV` must exit 2 with click's usage error; its `Error:` line."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, err
    return errors[0]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        # Each mode refuses the others' flags.
        (["bench", "--mode", "queue", "--workers", "2"], "--workers"),
        (["bench", "queue", "--generator", "g.yaml"], "--generator"),
        (["bench", "--mode", "in-process", "--rate", "5"], "--rate"),
        (["bench", "--tenants", "3"], "--tenants"),
        (["bench", "distributed", "--no-reuse"], "--no-reuse"),
        (["bench", "kueue", "--nodes", "5", "--generator", "g.yaml"], "--nodes"),
        (["demo", "--tenants", "--pods", "5"], "--pods"),
        (["demo", "--job-seconds", "5"], "--job-seconds"),
        # Bad values name the flag.
        (["bench", "--mode", "nope"], "'--mode'"),
        (["bench", "--mode"], "--mode"),
        (["bench", "--nodes", "many"], "'--nodes'"),
        (["bench", "distributed", "--rate", "fast"], "'--rate'"),
        (["bench", "kueue"], "'--generator'"),
        (["get", "pods", "-o", "yaml"], "'--output'"),
        (["get", "widgets"], "'KIND': 'widgets' is not one of 'pods'"),
        (["describe", "node", "n1"], "'{pod|pods}': 'node'"),
        (["node", "explode", "n1"], "'explode' is not one of 'fail'"),
        (["up", "--redis-fsync", "sometimes"], "'--redis-fsync'"),
        (["up", "--workers", "two"], "'--workers'"),
        (["up", "--kubeconfig", "k", "--in-cluster"], "--in-cluster"),
        (["schedule"], "'-f' / '--file'"),
        (["schedule", "-f", "x.yaml", "--seed", "x"], "'--seed'"),
        (["run", "-f", "x.yaml", "--timeout", "soon"], "'--timeout'"),
        (["simulate", "-f", "x.yaml", "-o", "yaml"], "'--output'"),
        (["top", "--interval", "often"], "'--interval'"),
        (["completion", "tcsh"], "'tcsh' is not one of 'bash', 'zsh', 'fish'"),
        (["dev-servers", "--redis-port", "x"], "'--redis-port'"),
        (["nope"], "'nope'"),
    ],
)
def test_bad_input_gets_one_usage_line_naming_the_flag_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    assert named in usage_error(capsys, *argv)


def test_the_main_wrappers_answer_bad_flags_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from cli.stack_commands import apply_main, delete_main, describe_main, get_main

    for wrapper in (apply_main, delete_main, describe_main, get_main):
        assert wrapper(["--no-such-flag"]) == 2
        assert "No such option '--no-such-flag'" in capsys.readouterr().err


def test_completion_script_names_the_program_and_its_protocol() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "completion", "bash"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=True,
    )
    assert "_BERTH_COMPLETE=bash_complete" in done.stdout
    assert "complete -o nosort -F _berth_completion berth" in done.stdout
    for shell in ("zsh", "fish"):
        assert main(["completion", shell]) == 0


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("berth ge", {"get"}),
        ("berth bench --mode ", {"in-process", "distributed", "queue", "kueue"}),
        ("berth bench --mode queue --te", {"--tenants"}),
        ("berth get ", {"pods", "nodes", "queues", "clusterqueues", "localqueues"}),
        ("berth demo --tenants --pl", {"--plot"}),
    ],
)
def test_completion_completes_through_clicks_protocol(words: str, expected: set[str]) -> None:
    """What bash's completion function does: call `berth` with COMP_WORDS/COMP_CWORD."""
    done = subprocess.run(
        [sys.executable, "-m", "cli.main"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "_BERTH_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split(" ")) - 1),
        },
        timeout=60,
    )
    offered = {line.split(",", 1)[1] for line in done.stdout.splitlines() if "," in line}
    assert expected <= offered, (done.stdout, done.stderr)


# --------------------------------------------------------------------------- README

_PROGRAM = re.compile(r"^(?:\w+=\S*\s+)*(?:\S*/)?berth\s+(.*)$")


def readme_commands(doc: Path = README) -> list[tuple[int, str]]:
    """Every `berth ...` command line in a document's code blocks (fenced or indented), with
    continuation lines joined and the trailing comment dropped: (line number, the words after
    `berth`)."""
    found: list[tuple[int, str]] = []
    fenced = False
    lines = doc.read_text().splitlines()
    index = 0
    while index < len(lines):
        line, number = lines[index], index + 1
        index += 1
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not (fenced or line.startswith("    ")):
            continue
        code = line.split(" #", 1)[0].strip()
        while code.endswith("\\") or (index < len(lines) and lines[index].strip().startswith("[")):
            code = code.rstrip("\\") + " " + lines[index].split(" #", 1)[0].strip()
            index += 1
        for segment in re.split(r"\s*(?:&&|;)\s*", code):
            match = _PROGRAM.match(segment.strip())
            if match and match.group(1) and not match.group(1).startswith(("-", "deploy/")):
                found.append((number, match.group(1)))
    return found


def check_words(words: list[str]) -> str:
    """'' when `berth WORDS` names commands and flags the tree has, else what is wrong.
    Placeholders stay placeholders: `[...]` is optional, `a|b` means a (each is checked where
    it is its own example), values are not converted."""
    command: click.Command = berth
    ctx = click.Context(berth, info_name="berth")
    rest = list(words)
    positionals: list[str] = []
    while rest:
        word = rest.pop(0)
        if isinstance(command, click.Group):
            if isinstance(command, ModeGroup):
                try:
                    rest = command.route(ctx, [word, *rest])
                except click.UsageError as exc:
                    return exc.format_message()
                word = rest.pop(0)
            found = command.get_command(ctx, word)
            if found is None:
                return f"no subcommand {word!r} of {ctx.command_path}"
            command = found
            ctx = click.Context(command, info_name=word, parent=ctx)
            continue
        if word.startswith("-") and word != "-":
            name = word.split("=", 1)[0]
            option = next(
                (
                    p
                    for p in command.params
                    if isinstance(p, click.Option) and name in (*p.opts, *p.secondary_opts)
                ),
                None,
            )
            if option is None:
                return f"no option {name} of {ctx.command_path}"
            if not option.is_flag and "=" not in word and rest:
                rest.pop(0)
            continue
        if word != "...":
            positionals.append(word)
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    if len(positionals) > len(arguments):
        return f"{ctx.command_path} takes {len(arguments)} arguments, not {positionals}"
    for argument, value in zip(arguments, positionals, strict=False):
        if isinstance(argument.type, click.Choice) and value not in argument.type.choices:
            return f"{ctx.command_path}: {value!r} is not one of {argument.type.choices}"
    return ""


def words_of(text: str) -> list[list[str]]:
    """The alternatives of a synopsis line as word lists: `[` `]` dropped, `a|b` -> a, a lone
    `|` starts another alternative of the same command, `&` dropped."""
    try:
        tokens = shlex.split(text)
    except ValueError:
        tokens = text.split()
    alternatives: list[list[str]] = [[]]
    for token in tokens:
        if token == "|":
            alternatives.append([])
            continue
        word = token.replace("[", "").replace("]", "").split("|")[0]
        if word and word != "&" and not word.startswith((">", "2>")):
            alternatives[-1].append(word)
    # A later alternative repeats the first one's subcommand(s): `delete -f FILE | KIND NAME`.
    head = [w for w in alternatives[0][:2] if not w.startswith("-")][:1]
    return [alternatives[0], *([*head, *alt] for alt in alternatives[1:])]


def test_readme_shows_commands_and_finds_some() -> None:
    shown = readme_commands()
    assert len(shown) >= 20
    assert any(text.startswith("bench --mode kueue") for _, text in shown)


@pytest.mark.parametrize(
    ("text", "wrong"),
    [
        ("bench --mode distributed --workers 2 --nodes 5", ""),
        ("bench --mode queue --workers 2", "no option --workers"),
        ("get widgets", "'widgets' is not one of"),
        ("gte pods", "no subcommand 'gte'"),
        ("up --no-such-flag", "no option --no-such-flag"),
        ("delete -f FILE | KIND NAME [-n NAMESPACE]", ""),
        ("describe pod NAME extra", "takes 2 arguments"),
    ],
)
def test_the_readme_checker_catches_what_it_should(text: str, wrong: str) -> None:
    problems = [check_words(words) for words in words_of(text)]
    if wrong:
        assert any(wrong in p for p in problems), problems
    else:
        assert problems == ["" for _ in problems]


@pytest.mark.parametrize("doc", [README, CONTRIBUTING], ids=lambda p: p.name)
def test_every_command_the_docs_show_parses_against_the_tree(doc: Path) -> None:
    problems = [
        f"{doc.name}:{number}: berth {text}: {problem}"
        for number, text in readme_commands(doc)
        for words in words_of(text)
        if (problem := check_words(words))
    ]
    assert not problems, "\n".join(problems)


def test_every_top_level_subcommand_is_in_the_readme() -> None:
    text = README.read_text()
    missing = [name for name in SUBCOMMANDS if not re.search(rf"berth {re.escape(name)}\b", text)]
    assert not missing
