"""The `optax-lint` command line (click).

`optax-lint [PATHS]...` lints (the implicit `check` command, as in ruff);
`optax-lint rule CODE` documents a rule. Exit codes: 0 clean, 1 findings remain
(or --diff would change something), 2 usage/config/internal error. A user error
never shows a traceback.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Optional

import click

from . import __version__

_SUBCOMMANDS = ("check", "rule", "schedule")


class _DefaultToCheck(click.Group):
    """Runs `check` unless the first argument names another subcommand, so
    `optax-lint train.py --fix` and `optax-lint rule OPX101` both work as typed."""

    def parse_args(self, ctx, args):
        if not args or args[0] not in self.commands:
            if args and args[0] in ("--help", "-h") and len(args) == 1:
                return super().parse_args(ctx, args)
            args = ["check", *args]
        return super().parse_args(ctx, args)


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
    """


@main.command("check")
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--fix/--no-fix", "fix", default=None, help="Apply safe fixes.")
@click.option("--unsafe-fixes", is_flag=True, default=None, help="Also apply unsafe fixes (hyperparameter changes).")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing; exit 1 if anything would change.")
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (comma-separated), e.g. OPX1.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option("--extend-select", multiple=True, help="Codes or prefixes to enable on top of the selection.")
@click.option("--output-format", type=click.Choice(["full", "concise", "json", "github"]), default=None)
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
@click.version_option(__version__, "--version", prog_name="optax-lint")
def check(paths, fix, unsafe_fixes, diff, select, ignore, extend_select, output_format, exit_zero, config_file,
          statistics, quiet, force_exclude, show_traceback, jobs, context_items=(), show_context=False,
          verify=False, max_file_size=None) -> None:
    """Lint PATHS (files or directories; default: the current directory)."""
    from . import api, discovery
    from .config import ConfigError, load_settings
    from .reporters import ReportOptions, render, use_color

    start = Path(paths[0]) if paths else Path.cwd()
    overrides = {
        "select": _split_codes(select),
        "ignore": _split_codes(ignore),
        "extend_select": _split_codes(extend_select),
        "output_format": output_format,
        "fix": fix,
        "unsafe_fixes": unsafe_fixes,
        "force_exclude": force_exclude,
    }
    try:
        settings = load_settings(config=config_file, start=start if start.exists() else Path.cwd(), overrides=overrides)
    except ConfigError as exc:
        _fail(str(exc))
    from .extract.context import ContextError, parse_cli, parse_config_table

    try:
        cli_context = parse_cli(context_items)
        if settings.context:
            parse_config_table(settings.context, where=f"{settings.config_path.name if settings.config_path else 'config'}: [tool.optax-lint.context]")
    except ContextError as exc:
        _fail(str(exc))

    found = discovery.discover(
        list(paths) or ["."],
        root=settings.root,
        exclude=settings.exclude if settings.exclude is not None else discovery.DEFAULT_EXCLUDE,
        extend_exclude=settings.extend_exclude,
        force_exclude=settings.force_exclude,
        respect_gitignore=settings.respect_gitignore,
    )
    options = api.RunOptions(
        fix=bool(settings.fix) and not diff,
        unsafe_fixes=bool(settings.unsafe_fixes),
        diff=diff,
        show_traceback=show_traceback,
        jobs=jobs,
        with_edits=settings.output_format == "json",
        context=cli_context,
    )
    if max_file_size is not None:
        options.max_file_bytes = _parse_size(max_file_size)
    if show_context:
        from .context_report import show_context as render_context

        click.echo(render_context(found.files, settings, cli_context, options.max_file_bytes), nl=False)
        for problem in found.problems:
            click.echo(f"{problem.path}: {problem.message}", err=True)
        sys.exit(2 if found.problems else 0)
    worker = None
    if verify:
        from .verify.runner import VerifyUnavailable, Worker

        try:
            worker = Worker()
        except VerifyUnavailable as exc:
            _fail(str(exc))
        options.verify_worker = worker
        options.jobs = 1  # one worker, one process: jax is imported once per run
    outcome = api.run(found.files, settings, options)
    from . import engine
    for problem in found.problems:
        result = api.FileResult(problem.path)
        result.findings.append(engine.meta_finding(engine.IO_ERROR, problem.path, problem.message))
        outcome.results.append(result)

    fmt = settings.output_format
    report = ReportOptions(
        color=use_color(sys.stdout),
        unsafe_fixes=options.unsafe_fixes,
        statistics=statistics,
        quiet=quiet,
        fixed_total=outcome.fixed if options.fix else 0,
    )
    if diff:
        diffs = [r.diff for r in sorted(outcome.results, key=lambda r: r.path) if r.diff]
        if diffs:
            click.echo("".join(diffs), nl=False)
        if not quiet:
            would = sum(r.fixed for r in outcome.results)
            click.echo(f"Would fix {would} problem{'s' if would != 1 else ''}." if would else "No fixes available.", err=True)
        sys.exit(2 if outcome.internal_errors else (1 if diffs and not exit_zero else 0))
    if worker is not None:
        worker.close()
    text = render(outcome.results, fmt, sources=outcome.sources, options=report)
    if verify and fmt == "json":
        # With --verify, JSON carries the findings and the per-pipeline evidence.
        text = json.dumps({"findings": json.loads(text or "[]"), "verification": [r.to_dict() for r in outcome.verification]}, indent=2) + "\n"
    if text:
        click.echo(text, nl=not text.endswith("\n"))
    if verify and fmt != "json" and outcome.verification:
        from .verify.report import render as render_verification

        click.echo("\nVerification (chains built under JAX from the extracted spec; your file was not run):")
        click.echo(render_verification(outcome.verification), nl=False)
    remaining = sum(1 for r in outcome.results for f in r.findings)
    if outcome.internal_errors:
        sys.exit(2)
    sys.exit(0 if exit_zero or remaining == 0 else 1)


@main.command("schedule")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--png", "png", type=click.Path(path_type=Path), default=None, help="Also write a matplotlib figure.")
@click.option("--steps", type=int, default=None, help="Training length in optimizer steps (marks the training end).")
@click.option("--width", type=int, default=72, show_default=True)
@click.option("--height", type=int, default=12, show_default=True)
def schedule(path: Path, png: Optional[Path], steps: Optional[int], width: int, height: int) -> None:
    """Draw each learning-rate schedule in PATH (sampled with real optax; PATH is never run)."""
    from .source import SourceError, read_source
    from .verify.plot import plot_text, render_chart, write_png
    from .verify.runner import VerifyUnavailable, Worker

    try:
        source = read_source(path)
    except SourceError as exc:
        _fail(f"{path}: {exc}")
    try:
        with Worker() as worker:
            total = steps
            if total is None:
                total = _context_steps(source.text, str(path))
            series, problems = plot_text(source.text, str(path), worker, total_steps=total)
    except VerifyUnavailable as exc:
        _fail(str(exc))
    except Exception as exc:  # a parse error in the file, reported without a traceback
        _fail(f"{path}: {exc}")
    for item in series:
        click.echo(render_chart(item, width=max(20, width), height=max(4, height)))
    for problem in problems:
        click.echo(problem)
    if not series and not problems:
        click.echo(f"{path}: no optax schedule found")
    if png is not None and series:
        error = write_png(series, str(png))
        if error:
            _fail(error)
        click.echo(f"wrote {png}")
    sys.exit(0 if series or not problems else 1)


def _context_steps(text: str, path: str) -> Optional[int]:
    """The run's length from the file's run context, when known."""
    try:
        import libcst as cst

        from .extract.facts import ModuleFacts

        value = ModuleFacts(cst.parse_module(text), path, text=text).run_context.value("steps")
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    except Exception:
        return None


@main.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
def rule(code: Optional[str], show_all: bool, output_format: str) -> None:
    """Explain a rule (by code or name), or list them all with --all."""
    from .catalogue import load_catalogue

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
    """Run the Language Server over stdio, for editors (needs optax-lint[lsp])."""
    try:
        from .lsp import run
    except ImportError as exc:
        _fail(f"`optax-lint server` needs pygls ({exc}); install it with: pip install 'optax-lint[lsp]'")
    run()
