"""The `optax-lint` command line (click).

`optax-lint [PATHS]...` lints (the implicit `check` command, as in ruff);
`optax-lint rule CODE` documents a rule. Exit codes: 0 clean, 1 findings remain
(or --diff would change something), 2 usage/config/internal error. A user error
never shows a traceback.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import click

from optax_lint import __version__

if TYPE_CHECKING:
    from optax_lint.run.discovery import Discovery

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
        close = difflib.get_close_matches(word.lower(), commands, n=1, cutoff=0.6)
        suggestion = f"optax-lint {close[0]}" if close else None
    if suggestion is None:
        return
    if not os.path.exists(word):
        _fail(f"{word!r} is neither a file, a directory nor a command; did you mean `{suggestion}`?")
    if len(args) > 1 and not args[1].startswith("-") and not os.path.exists(args[1]):
        _fail(f"{args[1]!r} is neither a file nor a directory, and {word!r} is not a command; did you mean `{suggestion}`?")


def _split_codes(values: tuple[str, ...]) -> Optional[list[str]]:
    if not values:
        return None
    out = []
    for value in values:
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return out


def _parse_size(text: str) -> int:
    """`8MB`, `512KB`, `1048576` -> bytes (KB/MB are 1024-based, as the messages print them)."""
    match = re.fullmatch(r"\s*(\d+)\s*(b|kb|k|mb|m)?\s*", text.lower())
    if not match or int(match.group(1)) == 0:
        _fail(f"--max-file-size: expected a positive size such as 8MB or 512KB, got {text!r}")
    scale = {"kb": 1024, "k": 1024, "mb": 1024**2, "m": 1024**2}.get(match.group(2) or "b", 1)
    return int(match.group(1)) * scale


def _fail(message: str) -> "NoReturn":  # noqa: F821
    click.echo(f"optax-lint: error: {message}", err=True)
    sys.exit(2)


@click.group(cls=_DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """optax-lint: find silent mistakes in JAX/Optax training code.

    \b
    optax-lint train.py            lint a file (or directories; default: .)
    optax-lint train.py --fix      apply safe fixes
    optax-lint rule OPX101         explain a rule
    optax-lint schedule train.py   draw the learning-rate schedules
    """


@main.command("check")
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--fix/--no-fix", "fix", default=None, help="Apply safe fixes.")
@click.option("--unsafe-fixes", is_flag=True, default=None, help="Also apply unsafe fixes (hyperparameter changes).")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing; exit 1 if anything would change.")
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (comma-separated), e.g. OPX1.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option("--extend-select", multiple=True, help="Codes or prefixes to enable on top of the selection.")
@click.option("--output-format", type=click.Choice(["full", "concise", "json", "github", "sarif", "gitlab", "junit"]), default=None,
              help="How findings are printed: full (code frames, default), concise (one line each), json, github (PR annotations), "
                   "sarif (SARIF 2.1.0, code scanning), gitlab (Code Quality), junit (test reports).")
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
@click.option("--no-cache", is_flag=True, envvar="OPTAX_LINT_NO_CACHE", help="Neither read nor write the result cache.")
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
              help="Result cache folder (default: .optax_lint_cache at the project root).")
# CI and editor integration: see _ci_filter and stdin.py.
@click.option("--stdin-filename", default=None, metavar="PATH", help="With PATHS `-`: the name of the file read from stdin (messages, config, per-file settings).")
@click.option("--diff-against", metavar="REF", default=None, help="Lint only files changed since git REF (its merge base with HEAD) and report only findings on changed lines.")
@click.option("--baseline", "baseline_file", type=click.Path(path_type=Path), default=None, help="Report only findings not recorded in this baseline file.")
@click.option("--update-baseline", is_flag=True, help="Record every current finding in the --baseline file, then exit 0.")
@click.version_option(__version__, "--version", "-V", prog_name="optax-lint", help="Show the version and exit.")
def check(paths, fix, unsafe_fixes, diff, select, ignore, extend_select, output_format, exit_zero, config_file,
          statistics, quiet, force_exclude, show_traceback, jobs, context_items=(), show_context=False,
          verify=False, max_file_size=None, fail_level=None, no_cache=False, cache_dir=None, stdin_filename=None,
          diff_against=None, baseline_file=None, update_baseline=False) -> None:
    """Lint PATHS (files or directories; default: the current directory; `-`: stdin)."""
    from optax_lint.core.config import ConfigError, load_settings
    from optax_lint.reporters import ReportOptions, render, use_color
    from optax_lint.run import api

    start = Path(paths[0]) if paths else Path.cwd()
    from_stdin = list(paths) == ["-"] or (stdin_filename is not None and not paths)
    if "-" in paths and not from_stdin or stdin_filename is not None and not from_stdin:
        _fail("read stdin with `optax-lint - --stdin-filename NAME`, without other paths")
    if from_stdin:
        start = Path(os.path.abspath(stdin_filename)).parent if stdin_filename else Path.cwd()
    if update_baseline and baseline_file is None:
        _fail("--update-baseline needs --baseline FILE")
    overrides = {
        "select": _split_codes(select),
        "ignore": _split_codes(ignore),
        "extend_select": _split_codes(extend_select),
        "output_format": output_format,
        "fix": fix,
        "unsafe_fixes": unsafe_fixes,
        "force_exclude": force_exclude,
        "fail_level": fail_level,
    }
    if not no_cache:  # the rule tables are read before the settings say where the cache is
        _early_table_cache(cache_dir)
    try:
        settings = load_settings(config=config_file, start=start if start.exists() else Path.cwd(), overrides=overrides)
    except ConfigError as exc:
        _fail(str(exc))
    from optax_lint.facts.context.run_context import (
        ContextError,
        parse_cli,
        parse_config_table,
    )

    try:
        cli_context = parse_cli(context_items)
        if settings.context:
            parse_config_table(settings.context, where=f"{settings.config_path.name if settings.config_path else 'config'}: [tool.optax-lint.context]")
    except ContextError as exc:
        _fail(str(exc))

    found, missing = _discover(paths, settings, from_stdin)
    options = api.RunOptions(
        fix=bool(settings.fix) and not diff,
        unsafe_fixes=bool(settings.unsafe_fixes),
        diff=diff,
        show_traceback=show_traceback,
        jobs=jobs,
        with_edits=settings.output_format in ("json", "sarif"),
        context=cli_context,
    )
    known = _load_baseline(baseline_file) if baseline_file is not None and not update_baseline else None
    changes = None
    if diff_against is not None:
        from optax_lint.run.gitdiff import GitError, changes_since, keep_changed

        try:
            changes = changes_since(diff_against)
        except GitError as exc:
            _fail(str(exc))
        found.files = keep_changed(found.files, changes)
    if max_file_size is not None:
        options.max_file_bytes = _parse_size(max_file_size)
    if not no_cache:
        options.cache_dir = cache_dir or _default_cache_dir(settings)
    if show_context:
        from optax_lint.context_report import show_context as render_context

        click.echo(render_context(found.files, settings, cli_context, options.max_file_bytes), nl=False)
        for problem in found.problems:
            click.echo(f"{problem.path}: {problem.message}", err=True)
        sys.exit(2 if found.problems else 0)
    worker = None
    if verify:
        from optax_lint.verify.runner import VerifyUnavailable, Worker

        try:
            worker = Worker()
        except VerifyUnavailable as exc:
            _fail(str(exc))
        options.verify_worker = worker
        options.jobs = 1  # one worker, one process: jax is imported once per run
    if from_stdin:
        from optax_lint.run.stdin import force_excluded, read_stdin, run_stdin

        data = read_stdin(sys.stdin.buffer, options.max_file_bytes)
        if force_excluded(stdin_filename, settings):
            if options.fix:  # an excluded file passes through unchanged, as ruff does
                sys.stdout.buffer.write(data)
            sys.exit(0)
        outcome, stdin_output = run_stdin(data, stdin_filename, settings, options)
    else:
        from optax_lint.run.progress import progress_bar

        with progress_bar(len(found.files)) as options.progress:
            outcome = api.run(found.files, settings, options)
    from optax_lint.core import meta

    for problem in found.problems:
        if problem.path in missing:
            continue  # a usage error, reported below, not a finding
        result = api.FileResult(problem.path)
        result.findings.append(meta.meta_finding(meta.IO_ERROR, problem.path, problem.message))
        outcome.results.append(result)

    _ci_filter(outcome, changes, baseline_file, known, quiet)
    fmt = settings.output_format
    report = ReportOptions(
        color=use_color(sys.stdout),
        unsafe_fixes=options.unsafe_fixes,
        statistics=statistics,
        quiet=quiet,
        fixed_total=outcome.fixed if options.fix else 0,
        fail_level=settings.fail_level,
    )
    if worker is not None:
        worker.close()
    if diff:
        diffs = [r.diff for r in sorted(outcome.results, key=lambda r: r.path) if r.diff]
        if diffs:
            click.echo("".join(diffs), nl=False)
        unreadable = _report_unfixable(outcome.findings)
        if not quiet and not unreadable:
            would = sum(r.fixed for r in outcome.results)
            click.echo(f"Would fix {would} problem{'s' if would != 1 else ''}." if would else "No fixes available.", err=True)
        _report_missing(missing)
        if outcome.internal_errors or missing:
            sys.exit(2)
        sys.exit(1 if (diffs or unreadable) and not exit_zero else 0)
    text = render(outcome.results, fmt, sources=outcome.sources, options=report)
    to_stderr = from_stdin and options.fix  # stdout carries the fixed text, as with ruff
    if to_stderr:
        sys.stdout.buffer.write(stdin_output)
        sys.stdout.flush()
    if verify and fmt == "json":
        # With --verify, JSON carries the findings and the per-pipeline evidence.
        text = json.dumps({"findings": json.loads(text or "[]"), "verification": [r.to_dict() for r in outcome.verification]}, indent=2) + "\n"
    if text:
        click.echo(text, nl=not text.endswith("\n"), err=to_stderr, color=report.color)  # FORCE_COLOR survives a pipe
    if verify and fmt != "json" and outcome.verification:
        from optax_lint.verify.report import render as render_verification

        click.echo("\nVerification (chains built under JAX from the extracted spec; your file was not run):")
        click.echo(render_verification(outcome.verification), nl=False)
    failing = sum(1 for r in outcome.results for f in r.findings if settings.fails(f.severity))
    _report_missing(missing)
    if outcome.internal_errors or missing:
        sys.exit(2)
    sys.exit(0 if exit_zero or failing == 0 else 1)


def _discover(paths: tuple[str, ...], settings, from_stdin: bool = False) -> tuple[Discovery, set[str]]:
    """The files under `paths`, and the paths that do not exist (a usage error, exit 2,
    as in ruff). Warns on stderr when nothing to lint was found."""
    from optax_lint.run import discovery

    if from_stdin:
        return discovery.Discovery(), set()
    missing = {p for p in paths if not os.path.exists(p)}
    found = discovery.discover(
        list(paths) or ["."],
        root=settings.root,
        exclude=settings.exclude if settings.exclude is not None else discovery.DEFAULT_EXCLUDE,
        extend_exclude=settings.extend_exclude,
        force_exclude=settings.force_exclude,
        respect_gitignore=settings.respect_gitignore,
    )
    if not found.files and not found.problems:
        where = ", ".join(paths) if paths else "the current directory"
        click.echo(f"optax-lint: warning: no Python files found in {where}", err=True)
    return found, missing


def _report_missing(missing: set[str]) -> None:
    for path in sorted(missing):
        click.echo(f"optax-lint: error: {path}: no such file or directory", err=True)


def _report_unfixable(findings) -> int:
    """--diff: files that could not be read or parsed get no diff; say so (stderr)."""
    from optax_lint.core import meta
    from optax_lint.reporters import ReportOptions, use_color
    from optax_lint.reporters.concise import header

    blocked = [f for f in findings if f.code in (meta.SYNTAX_ERROR, meta.IO_ERROR)]
    options = ReportOptions(color=use_color(sys.stderr))
    for finding in blocked:
        click.echo(header(finding, options), err=True)
    if blocked:
        files = len({f.path for f in blocked})
        click.echo(f"optax-lint: error: {files} file{'s' if files != 1 else ''} could not be read or parsed; no fixes computed for {'them' if files != 1 else 'it'}.", err=True)
    return len(blocked)


def _default_cache_dir(settings) -> Path:
    """`.optax_lint_cache` beside the config file, or in the current directory without one."""
    from optax_lint.run.cache import CACHE_DIR_NAME

    return (settings.root if settings.config_path is not None else Path.cwd()) / CACHE_DIR_NAME


def _early_table_cache(cache_dir: Optional[Path]) -> None:
    """Parsed rule tables from --cache-dir, or from a cache already in the current
    directory (where pre-commit and most runs start), before the config is found."""
    from optax_lint.core.catalogue import use_table_cache
    from optax_lint.run.cache import CACHE_DIR_NAME, is_cache_dir

    guess = cache_dir or Path.cwd() / CACHE_DIR_NAME
    if cache_dir is not None or is_cache_dir(guess):
        use_table_cache(guess)


@main.command("clean")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
              help="The cache folder to delete (default: the project's .optax_lint_cache).")
def clean(path: Optional[Path], cache_dir: Optional[Path]) -> None:
    """Delete the result cache of the project holding PATH (default: the current directory)."""
    from optax_lint.core.config import ConfigError, load_settings
    from optax_lint.run.cache import clean as remove_cache

    if cache_dir is None:
        try:
            settings = load_settings(start=path if path is not None and path.exists() else Path.cwd())
        except ConfigError as exc:
            _fail(str(exc))
        cache_dir = _default_cache_dir(settings)
    if not cache_dir.exists():
        click.echo(f"No cache at {cache_dir}", err=True)
        return
    if not remove_cache(cache_dir):
        _fail(f"{cache_dir} holds no optax-lint CACHEDIR.TAG; not deleting it")
    click.echo(f"Removed {cache_dir}" if not cache_dir.exists() else f"Could not remove {cache_dir}", err=True)


def _load_baseline(path: Path) -> set:
    from optax_lint.run import baseline

    try:
        return baseline.load(path)  # before linting: a wrong path fails fast
    except baseline.BaselineError as exc:
        _fail(str(exc))


def _ci_filter(outcome, changes, baseline_file: Optional[Path], known: Optional[set], quiet: bool) -> None:
    """--diff-against keeps findings on changed lines; --baseline drops the recorded ones
    (`known`), or with --update-baseline (`known` None) records what is left and exits."""
    if changes is not None:
        for result in outcome.results:
            result.findings = [f for f in result.findings if changes.covers(f)]
    if baseline_file is None:
        return
    from optax_lint.run import baseline

    if known is None:
        try:
            count = baseline.write(baseline_file, outcome.findings, outcome.sources)
        except baseline.BaselineError as exc:
            _fail(str(exc))
        click.echo(f"Recorded {count} finding{'s' if count != 1 else ''} in {baseline_file}.", err=True)
        sys.exit(2 if outcome.internal_errors else 0)
    hidden = baseline.drop_known(outcome.results, outcome.sources, baseline_file, known)
    if hidden and not quiet:
        click.echo(f"{hidden} finding{'s' if hidden != 1 else ''} recorded in {baseline_file} not shown.", err=True)


@main.command("schedule")
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--png", "png", type=click.Path(path_type=Path), default=None,
              help="Also draw the schedules into this PNG file (with matplotlib, which the verify extra installs).")
@click.option("--steps", type=int, default=None, help="Training length in optimizer steps (marks the training end).")
@click.option("--width", type=int, default=72, show_default=True, help="Chart width in terminal columns.")
@click.option("--height", type=int, default=12, show_default=True, help="Chart height in terminal rows.")
@click.option("--config", "config_file", type=click.Path(path_type=Path), default=None, help="Use this optax-lint.toml or pyproject.toml (for excludes).")
def schedule(paths: tuple[str, ...], png: Optional[Path], steps: Optional[int], width: int, height: int,
             config_file: Optional[Path] = None) -> None:
    """Draw each learning-rate schedule in PATHS (files or directories; default: .),
    sampled with real optax from the extracted arguments; your files are never run.
    Needs jax and optax (the verify extra)."""
    from optax_lint.core.config import ConfigError, load_settings
    from optax_lint.reporters import ReportOptions, use_color
    from optax_lint.reporters.concise import header
    from optax_lint.run import api
    from optax_lint.verify.plot import (
        plot_text,
        png_unavailable,
        render_chart,
        write_png,
    )
    from optax_lint.verify.runner import VerifyUnavailable, Worker, check_available

    try:
        check_available("`optax-lint schedule` (it samples each schedule with real optax)")
    except VerifyUnavailable as exc:
        _fail(str(exc))
    if png is not None and png_unavailable():
        _fail(png_unavailable())
    start = Path(paths[0]) if paths else Path.cwd()
    try:
        # Only OPX001/OPX003 run: a file that cannot be read or parsed is reported as `check` reports it.
        settings = load_settings(config=config_file, start=start if start.exists() else Path.cwd(), overrides={"select": ["OPX001"]})
    except ConfigError as exc:
        _fail(str(exc))
    found, missing = _discover(paths, settings)
    from optax_lint.core.meta import IO_ERROR, meta_finding

    broken = [meta_finding(IO_ERROR, p.path, p.message) for p in found.problems if p.path not in missing]
    shown = ReportOptions(color=use_color(sys.stdout))
    series, problems, unreadable = [], [], 0
    try:
        with Worker() as worker:
            for path in found.files:
                result, text, _ = api.lint_file(path, settings, api.RunOptions())
                if result.findings or text is None:
                    for finding in result.findings:
                        click.echo(header(finding, shown))
                    unreadable += 1
                    continue
                total = steps if steps is not None else _context_steps(text, result.path)
                try:
                    drawn, undrawable = plot_text(text, result.path, worker, total_steps=total)
                except Exception as exc:  # never a traceback: say which file, and go on
                    drawn, undrawable = [], [f"{result.path}: not drawable: {type(exc).__name__}: {exc}"]
                series.extend(drawn)
                problems.extend(undrawable)
    except VerifyUnavailable as exc:
        _fail(str(exc))
    for finding in broken:
        click.echo(header(finding, shown))
    for item in series:
        click.echo(render_chart(item, width=max(20, width), height=max(4, height)))
    for problem in problems:
        click.echo(problem)
    if found.files and not series and not problems and not unreadable:
        click.echo(f"no optax schedule found in {', '.join(paths) if paths else 'the current directory'}")
    if png is not None and series:
        error = write_png(series, str(png))
        if error:
            _fail(error)
        click.echo(f"wrote {png}")
    _report_missing(missing)
    if missing:
        sys.exit(2)
    sys.exit(1 if unreadable or broken or (problems and not series) else 0)


def _context_steps(text: str, path: str) -> Optional[int]:
    """The run's length from the file's run context, when known."""
    try:
        import libcst as cst

        from optax_lint.facts.module import ModuleFacts

        value = ModuleFacts(cst.parse_module(text), path, text=text).run_context.value("steps")
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    except Exception:
        return None


@main.command("recommend")
@click.option("--arch", help="transformer, cnn, mlp or rnn.")
@click.option("--params", help="Parameter count (1.3e9, 1.3B, 350M).")
@click.option("--steps", help="Training length in optimizer updates (50000, 50k).")
@click.option("--batch", help="Batch size per device.")
@click.option("--devices", help="Data-parallel (pmap) devices [default: 1].")
@click.option("--dataset-size", help="Training examples (for epochs and overfitting risk).")
@click.option("--fine-tune", is_flag=True, help="Fine-tuning a pretrained model.")
@click.option("--from-scratch", is_flag=True, help="Training from random initialisation (contradicts --fine-tune).")
@click.option("--issue", "issues", multiple=True, metavar="ISSUE",
              help="Known issue (repeatable): gradient-explosion, gradient-noise, slow-convergence, overfitting, unstable-early.")
@click.option("--memory-constrained", is_flag=True, help="Optimizer state must be small.")
@click.option("--sparse-gradients", is_flag=True, help="Mostly-zero gradients (embeddings): factored second moments.")
@click.option("--base-lr", help="A learning rate you tuned (with --base-batch): scaled from there instead of the protocol's.")
@click.option("--base-batch", help="The global batch --base-lr was tuned at.")
@click.option("--device-memory", help="GB one device holds, for the memory verdict [default: 80].")
@click.option("--output-format", type=click.Choice(["text", "python", "json"]), default="text", show_default=True,
              help="text: the decision trace, code, schedule and advice; python: a runnable module; json: structured, for tools.")
@click.option("--verify", is_flag=True, help="Build and step the chain under JAX and check the schedule's numbers (needs jax and optax: the verify extra).")
@click.option("-o", "--output", "output", type=click.Path(path_type=Path), default=None, help="Write to FILE instead of stdout.")
@click.option("--from", "from_path", type=click.Path(path_type=Path), default=None,
              help="Take the run context from a training script and compare its chain with the recommendation.")
def recommend(output: Optional[Path], **values) -> None:
    """Recommend an optimizer chain, schedule and gradient processing (the decision protocol run forwards)."""
    from optax_lint.core.config import ConfigError, load_settings
    from optax_lint.recommend.command import Options, run
    from optax_lint.recommend.request import RequestError
    from optax_lint.verify.runner import VerifyUnavailable

    start = values["from_path"] if values["from_path"] is not None and values["from_path"].exists() else Path.cwd()
    try:
        settings = load_settings(start=start)  # the project's rule options move the protocol's thresholds
    except ConfigError as exc:
        _fail(str(exc))
    try:
        text, code = run(Options(**values), settings)
    except (RequestError, VerifyUnavailable) as exc:
        _fail(str(exc))
    if output is None:
        click.echo(text, nl=False)
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            _fail(f"-o {output}: {exc.strerror or exc}")
        click.echo(f"wrote {output}", err=True)
    sys.exit(code)


@main.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", help="text (the documentation as Markdown) or json.")
def rule(code: Optional[str], show_all: bool, output_format: str) -> None:
    """Explain a rule (by code or name), or list them all with --all."""
    from optax_lint.core.catalogue import load_catalogue

    catalogue = load_catalogue()
    if show_all:
        if output_format == "json":
            click.echo(json.dumps([spec.to_dict() for spec in catalogue.values()], indent=2))
            return
        for spec in catalogue.values():
            fix = spec.fix.value if spec.fix else "-"
            click.echo(f"{spec.code}  {spec.name:<38} {spec.severity.value:<8} fix:{fix:<13} {spec.summary}")
        return
    if not code:
        _fail("give a rule code (e.g. `optax-lint rule OPX101`) or --all")
    wanted = code.strip()
    spec = catalogue.get(wanted.upper()) or next((s for s in catalogue.values() if s.name == wanted), None)
    if spec is None:
        _fail(f"unknown rule {code!r}; `optax-lint rule --all` lists them")
    if output_format == "json":
        click.echo(json.dumps({**spec.to_dict(), "doc": spec.doc}, indent=2))
    else:
        click.echo(spec.render_doc(), nl=False)


@main.command("server")
def server() -> None:
    """Run the Language Server over stdio, for editors (needs pygls: the lsp extra)."""
    try:
        from optax_lint.lsp import run
    except ImportError as exc:
        from optax_lint.core.install import install_hint

        _fail(f"`optax-lint server` needs pygls ({exc}); install the lsp extra {install_hint('lsp')}")
    run()
