"""`optax-lint check` (the default command): lint, fix, report."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import click

from optax_lint import __version__
from optax_lint.commands.common import (
    default_cache_dir,
    discover,
    early_table_cache,
    fail,
    parse_size,
    report_missing,
    split_codes,
)


@click.command("check")
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
@click.option("--verify", is_flag=True, help="Build each optimizer chain under JAX (never running your file) and measure what the rules claim; with --fix, refuse fixes that do not verify. Needs optax-lint[verify].")
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
        fail("read stdin with `optax-lint - --stdin-filename NAME`, without other paths")
    if from_stdin:
        start = Path(os.path.abspath(stdin_filename)).parent if stdin_filename else Path.cwd()
    if update_baseline and baseline_file is None:
        fail("--update-baseline needs --baseline FILE")
    overrides = {
        "select": split_codes(select),
        "ignore": split_codes(ignore),
        "extend_select": split_codes(extend_select),
        "output_format": output_format,
        "fix": fix,
        "unsafe_fixes": unsafe_fixes,
        "force_exclude": force_exclude,
        "fail_level": fail_level,
    }
    if not no_cache:  # the rule tables are read before the settings say where the cache is
        early_table_cache(cache_dir)
    try:
        settings = load_settings(config=config_file, start=start if start.exists() else Path.cwd(), overrides=overrides)
    except ConfigError as exc:
        fail(str(exc))
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
        fail(str(exc))

    found, missing = discover(paths, settings, from_stdin)
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
            fail(str(exc))
        found.files = keep_changed(found.files, changes)
    if max_file_size is not None:
        options.max_file_bytes = parse_size(max_file_size)
    if not no_cache:
        options.cache_dir = cache_dir or default_cache_dir(settings)
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
            fail(str(exc))
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
        report_missing(missing)
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
    report_missing(missing)
    if outcome.internal_errors or missing:
        sys.exit(2)
    sys.exit(0 if exit_zero or failing == 0 else 1)


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


def _load_baseline(path: Path) -> set:
    from optax_lint.run import baseline

    try:
        return baseline.load(path)  # before linting: a wrong path fails fast
    except baseline.BaselineError as exc:
        fail(str(exc))


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
            fail(str(exc))
        click.echo(f"Recorded {count} finding{'s' if count != 1 else ''} in {baseline_file}.", err=True)
        sys.exit(2 if outcome.internal_errors else 0)
    hidden = baseline.drop_known(outcome.results, outcome.sources, baseline_file, known)
    if hidden and not quiet:
        click.echo(f"{hidden} finding{'s' if hidden != 1 else ''} recorded in {baseline_file} not shown.", err=True)
