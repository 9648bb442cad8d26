"""`berth completion bash|zsh|fish`: click's completion script for the whole tree.

eval "$(berth completion bash)"     # or: berth completion bash > /etc/bash_completion.d/berth
"""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from cli.commands import CONTEXT

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_BERTH_COMPLETE"
"""The environment variable click's completion protocol uses for a program named berth."""


@click.command(
    "completion",
    context_settings=CONTEXT,
    short_help="Print the shell completion script (bash, zsh or fish).",
    help='Print the completion script of SHELL; e.g. `eval "$(berth completion bash)"` in '
    "~/.bashrc.",
)
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> int:
    from cli.main import PROG, berth

    completer = get_completion_class(shell)
    assert completer is not None  # every name in SHELLS is one of click's
    click.echo(completer(berth, {}, PROG, COMPLETE_VAR).source())
    return 0
