"""Two kinds of click group: `LazyGroup` imports a subcommand's module only when that
subcommand runs (or its help is asked for), and `ModeGroup` keeps an older `--mode X` (or
`--X`) spelling working as an alias of the subcommand `X`."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import click


class LazyGroup(click.Group):
    """A group whose subcommands are `name -> ("module:attribute", one-line help)`: `--help`
    lists them from the table, and only the subcommand that runs is imported."""

    def __init__(self, *args: Any, lazy: Mapping[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            return self.load(cmd_name)
        return super().get_command(ctx, cmd_name)

    def load(self, name: str) -> click.Command:
        module, _, attribute = self.lazy[name][0].partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module}:{attribute} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, self.lazy[name][1]) for name in self.list_commands(ctx) if name in self.lazy]
        rows += [
            (name, command.get_short_help_str(limit=formatter.width))
            for name, command in sorted(self.commands.items())
            if not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(sorted(rows))


class ModeGroup(click.Group):
    """A group with a default subcommand and an alias flag: `GROUP --mode X ...` (or, with a
    flag that takes no value, `GROUP --X ...`) runs `GROUP X ...`, and `GROUP ...` without a
    subcommand runs the default one. `GROUP --help` is the group's own help."""

    def __init__(
        self,
        *args: Any,
        default: str,
        alias: str,
        modes: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.default = default
        self.alias = alias
        self.alias_value = bool(modes)
        # Seen only by shell completion (which does not route): `--mode <TAB>` offers the modes.
        self.params.append(
            click.Option(
                [alias],
                type=click.Choice(list(modes)) if modes else None,
                is_flag=not modes,
                hidden=True,
                expose_value=False,
            )
        )

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if ctx.resilient_parsing:  # shell completion: route what is complete, else leave it
            try:
                return super().parse_args(ctx, self.route(ctx, args))
            except click.UsageError:
                return super().parse_args(ctx, args)
        return super().parse_args(ctx, self.route(ctx, args))

    def route(self, ctx: click.Context, args: Sequence[str]) -> list[str]:
        words = list(args)
        if words and words[0] in self.commands:
            return words
        mode, rest = self.default, []
        aliased = False
        index = 0
        while index < len(words):
            word = words[index]
            if self.alias_value and word == self.alias:
                if index + 1 >= len(words):
                    raise click.BadOptionUsage(self.alias, f"{self.alias} needs a value", ctx)
                mode, aliased = words[index + 1], True
                index += 2
                continue
            if self.alias_value and word.startswith(self.alias + "="):
                mode, aliased = word.partition("=")[2], True
            elif not self.alias_value and word == self.alias:
                mode, aliased = self.alias.lstrip("-"), True
            elif word == "--":
                rest += words[index:]
                break
            else:
                rest.append(word)
            index += 1
        if mode not in self.commands:
            choices = ", ".join(repr(name) for name in self.commands)
            raise click.BadParameter(
                f"{mode!r} is not one of {choices}.", ctx, param_hint=f"'{self.alias}'"
            )
        if not aliased and (
            any(word in ("-h", "--help") for word in rest) or (ctx.resilient_parsing and not rest)
        ):
            return words  # the group's own help, or shell completion of the subcommand
        return [mode, *rest]
