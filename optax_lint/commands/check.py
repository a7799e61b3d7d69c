"""`optax-lint check` (the default command): lint, fix, report."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import click

from optax_lint import __version__
from optax_lint.commands.check_run import CheckRun
from optax_lint.commands.common import (
    default_cache_dir,
    fail,
    parse_size,
    split_codes,
)

if TYPE_CHECKING:
    from optax_lint.core.config import Settings

# As core.config.OUTPUT_FORMATS and reporters.FORMATS (a test checks): neither is
# imported here, so `optax-lint --help` stays fast.
OUTPUT_FORMATS = ["full", "concise", "grouped", "json", "json-lines", "github", "sarif", "gitlab", "junit", "pylint", "rdjson", "azure"]


@click.command("check")
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--fix/--no-fix", "fix", default=None, help="Apply safe fixes.")
@click.option("--unsafe-fixes", is_flag=True, default=None, help="Also apply unsafe fixes (hyperparameter changes).")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing; exit 1 if anything would change.")
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (comma-separated), e.g. OPX1.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option("--extend-select", multiple=True, help="Codes or prefixes to enable on top of the selection.")
@click.option("--output-format", type=click.Choice(OUTPUT_FORMATS), default=None,
              help="How findings are printed: full (code frames, default), concise (one line each), grouped (by file), "
                   "json, json-lines, github (PR annotations), sarif (SARIF 2.1.0, code scanning), gitlab (Code Quality), "
                   "junit (test reports), pylint, rdjson (reviewdog), azure (Azure Pipelines).")
@click.option("--fail-level", type=click.Choice(["error", "warning", "info"]), default=None,
              help="Lowest severity that fails the run (exit 1). Default: warning, so info findings are shown but never block.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--config", "config_file", type=click.Path(path_type=Path), default=None, help="Use this optax-lint.toml or pyproject.toml.")
@click.option("--statistics", is_flag=True, help="Count findings per rule instead of listing them.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option("--force-exclude", is_flag=True, default=None, help="Apply exclusions even to paths given explicitly.")
@click.option("--show-traceback", is_flag=True, help="Show tracebacks of internal errors.")
@click.option("--jobs", "-j", type=int, default=0, help="Worker processes (0: one per core).")
@click.option("--context", "context_items", multiple=True, metavar="FIELD=VALUE,...",
              help="Declare the run context, e.g. arch=transformer,steps=50000 (overrides pragmas, config and inference).")
@click.option("--verify", is_flag=True, help="Build each optimizer chain under JAX (never running your file) and measure what the rules claim; with --fix, refuse fixes that do not verify. Needs jax and optax (the verify extra).")
@click.option("--show-context", is_flag=True, help="Print each file's run context with its provenance, and the rules it leaves silent.")
@click.option("--max-file-size", "max_file_size", default=None, metavar="SIZE",
              help="Report files larger than SIZE (bytes, or e.g. 512KB, 8MB; default 8MB) as OPX003 without reading them.")
@click.option("--file-timeout", "file_timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              envvar="OPTAX_LINT_FILE_TIMEOUT",
              help="Give up on a file after SECONDS per MB of it (at least SECONDS) and report it as OPX900 "
                   "(default 120; 0: no limit). "
                   "Not applied with --verify, whose checks have their own timeouts.")
@click.option("--no-cache", is_flag=True, envvar="OPTAX_LINT_NO_CACHE", help="Neither read nor write the result cache.")
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
              help="Result cache folder (default: .optax_lint_cache at the project root).")
# CI and editor integration: see _ci_filter and stdin.py.
@click.option("--stdin-filename", default=None, metavar="PATH", help="With PATHS `-`: the name of the file read from stdin (messages, config, per-file settings).")
@click.option("--diff-against", metavar="REF", default=None, help="Lint only files changed since git REF (its merge base with HEAD) and report only findings on changed lines.")
@click.option("--baseline", "baseline_file", type=click.Path(path_type=Path), default=None, help="Report only findings not recorded in this baseline file.")
@click.option("--update-baseline", is_flag=True, help="Record every current finding in the --baseline file, then exit 0.")
# The everyday loop (issue 23): see check_run.py and watch.py.
@click.option("--show-fixes", is_flag=True, help="With --fix: list each fixed finding (file, line, code) before the summary.")
@click.option("--add-noqa", is_flag=True,
              help="Add a `# noqa: OPXnnn` comment on the line of each current finding (merged into an existing noqa comment), "
                   "write nothing else, and say how many were added.")
@click.option("--watch", is_flag=True, help="Lint again each time a file under PATHS changes, until interrupted (Ctrl-C). Needs optax-lint[watch].")
@click.version_option(__version__, "--version", "-V", prog_name="optax-lint", help="Show the version and exit.")
def check(paths, fix, unsafe_fixes, diff, select, ignore, extend_select, output_format, exit_zero, config_file,
          statistics, quiet, force_exclude, show_traceback, jobs, context_items=(), show_context=False,
          verify=False, max_file_size=None, fail_level=None, no_cache=False, cache_dir=None, stdin_filename=None,
          diff_against=None, baseline_file=None, update_baseline=False, show_fixes=False, add_noqa=False,
          watch=False, file_timeout=None) -> None:
    """Lint PATHS (files or directories; default: the current directory; `-`: stdin)."""
    from optax_lint.run import api

    start = Path(paths[0]) if paths else Path.cwd()
    from_stdin = list(paths) == ["-"] or (stdin_filename is not None and not paths)
    if "-" in paths and not from_stdin or stdin_filename is not None and not from_stdin:
        fail("read stdin with `optax-lint - --stdin-filename NAME`, without other paths")
    if from_stdin:
        start = Path(os.path.abspath(stdin_filename)).parent if stdin_filename else Path.cwd()
    if update_baseline and baseline_file is None:
        fail("--update-baseline needs --baseline FILE")
    _reject_combinations(add_noqa, watch, {"--fix": bool(fix), "--diff": diff, "stdin (`-`)": from_stdin,
                                           "--update-baseline": update_baseline, "--show-context": show_context})
    if watch:
        from optax_lint.commands.watch import check_available

        check_available()
    overrides = {
        "select": split_codes(select),
        "ignore": split_codes(ignore),
        "extend_select": split_codes(extend_select),
        "output_format": output_format,
        "fix": False if add_noqa else fix,  # a config's `fix = true` must not also rewrite code
        "unsafe_fixes": unsafe_fixes,
        "force_exclude": force_exclude,
        "fail_level": fail_level,
    }
    from optax_lint.core.config import ConfigError
    from optax_lint.facts.context.run_context import ContextError, parse_cli

    def load() -> Settings:
        return _load_settings(config_file, start if start.exists() else Path.cwd(), overrides)

    try:
        settings = load()
        cli_context = parse_cli(context_items)
    except (ConfigError, ContextError) as exc:
        fail(str(exc))
    options = api.RunOptions(
        fix=bool(settings.fix) and not diff,
        unsafe_fixes=bool(settings.unsafe_fixes),
        diff=diff,
        show_traceback=show_traceback,
        jobs=jobs,
        with_edits=settings.output_format in ("json", "json-lines", "sarif", "rdjson"),
        context=cli_context,
    )
    run = CheckRun(paths, settings, options, diff=diff, statistics=statistics, quiet=quiet, exit_zero=exit_zero,
                   show_fixes=show_fixes, add_noqa=add_noqa, baseline_file=baseline_file)
    run.known = _load_baseline(baseline_file) if baseline_file is not None and not update_baseline else None
    if diff_against is not None:
        from optax_lint.run.gitdiff import GitError, changes_since

        try:
            run.changes = changes_since(diff_against)
        except GitError as exc:
            fail(str(exc))
    if max_file_size is not None:
        options.max_file_bytes = parse_size(max_file_size)
    if file_timeout is not None:
        options.file_timeout = file_timeout
    if not no_cache:
        options.cache_dir = cache_dir or default_cache_dir(settings)
    if show_context:
        from optax_lint.context_report import show_context as render_context

        found, _ = run.discover()
        click.echo(render_context(found.files, settings, cli_context, options.max_file_bytes), nl=False)
        for problem in found.problems:
            click.echo(f"{problem.path}: {problem.message}", err=True)
        sys.exit(2 if found.problems else 0)
    if verify:
        from optax_lint.verify.runner import VerifyUnavailable, Worker

        try:
            options.verify_worker = Worker()
        except VerifyUnavailable as exc:
            fail(str(exc))
        options.jobs = 1  # one worker, one process: jax is imported once per run
    try:
        if from_stdin:
            sys.exit(_check_stdin(run, stdin_filename))
        if watch:
            from optax_lint.commands.watch import watch_loop

            sys.exit(watch_loop(run, load))
        sys.exit(run.once())
    finally:
        if options.verify_worker is not None:
            options.verify_worker.close()


def _load_settings(config_file: Optional[Path], start: Path, overrides: dict) -> Settings:
    """The settings, their context table checked; ConfigError or ContextError."""
    from optax_lint.core.config import load_settings
    from optax_lint.facts.context.run_context import parse_config_table

    settings = load_settings(config=config_file, start=start, overrides=overrides)
    if settings.context:
        parse_config_table(settings.context, where=f"{settings.config_path.name if settings.config_path else 'config'}: [tool.optax-lint.context]")
    return settings


def _reject_combinations(add_noqa: bool, watch: bool, given: dict[str, bool]) -> None:
    """Options that ask for different kinds of run: a usage error before anything is read.
    --watch goes with --fix (each change is fixed as it is saved, as in ruff)."""
    for option, on, others in (("--add-noqa", add_noqa, {**given, "--watch": watch}),
                               ("--watch", watch, {k: v for k, v in given.items() if k != "--fix"})):
        clash = next((name for name, value in others.items() if value), None)
        if on and clash:
            fail(f"{option} cannot be combined with {clash}")


def _check_stdin(run: CheckRun, stdin_filename: Optional[str]) -> int:
    from optax_lint.run.stdin import force_excluded, read_stdin, run_stdin

    data = read_stdin(sys.stdin.buffer, run.options.max_file_bytes)
    if force_excluded(stdin_filename, run.settings):
        if run.options.fix:  # an excluded file passes through unchanged, as ruff does
            sys.stdout.buffer.write(data)
        return 0
    outcome, stdin_output = run_stdin(data, stdin_filename, run.settings, run.options)
    return run.report(outcome, stdin_output=stdin_output)


def _load_baseline(path: Path) -> set:
    from optax_lint.run import baseline

    try:
        return baseline.load(path)  # before linting: a wrong path fails fast
    except baseline.BaselineError as exc:
        fail(str(exc))
