"""The `berth` command tree's parts: click commands that import only click at module level
(each imports its work when it runs), the argument carrier and the one way to run a command."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any, TypeVar

import click

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
"""Every command's context settings: -h beside --help, help wide enough for flag names."""


class Args(SimpleNamespace):
    """A command's parsed flags and arguments by parameter name (repeatable ones as lists):
    what the commands' work functions read, e.g. `args.redis_url`."""

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> Args:
        return cls(**{k: list(v) if isinstance(v, tuple) else v for k, v in params.items()})


def invoke(command: click.Command, argv: Sequence[str] | None, prog: str) -> int:
    """Run `command` on `argv` (None: sys.argv[1:]) and return its exit code: the command's
    own, 2 with click's one-line usage error for bad input, 0 after --help."""
    try:
        result = command.main(
            args=None if argv is None else list(argv), prog_name=prog, standalone_mode=False
        )
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        print("Aborted!", file=sys.stderr)
        return 1
    return result if isinstance(result, int) else 0


F = TypeVar("F", bound=Callable[..., Any])


def output_option(*choices: str, default: str) -> Callable[[F], F]:
    """-o/--output, one of `choices`."""
    return click.option(
        "-o", "--output", type=click.Choice(choices), default=default, show_default=True
    )


def files_option(required: bool = True, help: str = "") -> Callable[[F], F]:
    """-f/--file, repeatable."""
    return click.option(
        "-f", "--file", multiple=True, required=required, metavar="FILE", help=help or None
    )
