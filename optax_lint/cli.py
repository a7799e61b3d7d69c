"""The `optax-lint` command line (click): the group and its default command.

`optax-lint [PATHS]...` lints (the implicit `check` command, as in ruff);
`optax-lint rule CODE` documents a rule. Exit codes: 0 clean, 1 findings remain
(or --diff would change something), 2 usage/config/internal error. A user error
never shows a traceback. Each command lives in its own module of
`optax_lint.commands`.
"""

from __future__ import annotations

import os

import click

from optax_lint.commands.check import check
from optax_lint.commands.clean import clean
from optax_lint.commands.common import fail
from optax_lint.commands.recommend import recommend
from optax_lint.commands.rule import rule, server
from optax_lint.commands.schedule import schedule

# Words users type for a command that is spelled differently (or is an option here).
_COMMAND_ALIASES = {"help": "optax-lint --help", "version": "optax-lint --version"}


class _DefaultToCheck(click.Group):
    """Runs `check` unless the first argument names another subcommand, so
    `optax-lint train.py --fix` and `optax-lint rule OPX101` both work as typed."""

    def parse_args(self, ctx, args):
        if not args or args[0] not in self.commands:
            if args and args[0] in ("--help", "-h") and len(args) == 1:
                return super().parse_args(ctx, args)
            if args and not args[0].startswith("-"):
                _reject_mistyped_command(args, list(self.commands))
            args = ["check", *args]
        return super().parse_args(ctx, args)

    def format_usage(self, ctx, formatter):
        formatter.write_usage(ctx.command_path, "[OPTIONS] [PATHS]...")
        formatter.write_usage(ctx.command_path, "COMMAND [ARGS]...", prefix="       ")

    def format_options(self, ctx, formatter):
        """Top-level help lists the lint options: `optax-lint [OPTIONS] [PATHS]` is `check`."""
        check = self.commands["check"]
        sub = click.Context(check, info_name="check", parent=ctx)
        rows = [r for p in check.get_params(sub) if isinstance(p, click.Option) and (r := p.get_help_record(sub))]
        with formatter.section("Options (linting, the default command `check`)"):
            formatter.write_dl(rows)
        self.format_commands(ctx, formatter)


def _reject_mistyped_command(args: list[str], commands: list[str]) -> None:
    """`optax-lint rules X` would lint paths named `rules` and `X`: when the first word
    looks like a command and it (or the word after it) is no existing path, say which
    command was meant (exit 2). A word that exists as a path is linted as usual."""
    word = args[0]
    if "/" in word or os.sep in word or "." in word:
        return  # spelled as a path
    suggestion = _COMMAND_ALIASES.get(word.lower())
    if suggestion is None:
        import difflib  # only for a word that looks like a command

        close = difflib.get_close_matches(word.lower(), commands, n=1, cutoff=0.6)
        suggestion = f"optax-lint {close[0]}" if close else None
    if suggestion is None:
        return
    if not os.path.exists(word):
        fail(f"{word!r} is neither a file, a directory nor a command; did you mean `{suggestion}`?")
    if len(args) > 1 and not args[1].startswith("-") and not os.path.exists(args[1]):
        fail(f"{args[1]!r} is neither a file nor a directory, and {word!r} is not a command; did you mean `{suggestion}`?")


@click.group(cls=_DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """optax-lint: find silent mistakes in JAX/Optax training code.

    \b
    optax-lint train.py            lint a file (or directories; default: .)
    optax-lint train.py --fix      apply safe fixes
    optax-lint rule OPX101         explain a rule
    optax-lint schedule train.py   draw the learning-rate schedules
    """


for _command in (check, clean, schedule, recommend, rule, server):
    main.add_command(_command)
