"""`optax-lint schedule`: draw each learning-rate schedule, sampled with real optax."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import click

from optax_lint.commands.common import discover, fail, report_missing


@click.command("schedule")
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
    from optax_lint.run.per_file import declared_context
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
        fail(str(exc))
    if png is not None and png_unavailable():
        fail(png_unavailable())
    start = Path(paths[0]) if paths else Path.cwd()
    try:
        # Only OPX001/OPX003 run: a file that cannot be read or parsed is reported as `check` reports it.
        settings = load_settings(config=config_file, start=start if start.exists() else Path.cwd(), overrides={"select": ["OPX001"]})
    except ConfigError as exc:
        fail(str(exc))
    found, missing = discover(paths, settings)
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
                context = declared_context(path, settings, api.RunOptions())
                total, source = (steps, "") if steps is not None else _context_steps(text, result.path, context)
                try:
                    drawn, undrawable = plot_text(text, result.path, worker, context=context, root=str(settings.root),
                                                  total_steps=total, total_source=source)
                except Exception as exc:  # never a traceback: say which file, and go on
                    drawn, undrawable = [], [f"{result.path}: not drawable: {type(exc).__name__}: {exc}"]
                series.extend(drawn)
                problems.extend(undrawable)
    except VerifyUnavailable as exc:
        fail(str(exc))
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
            fail(error)
        click.echo(f"wrote {png}")
    report_missing(missing)
    if missing:
        sys.exit(2)
    sys.exit(1 if unreadable or broken or (problems and not series) else 0)


def _context_steps(text: str, path: str, context: dict) -> tuple[Optional[int], str]:
    """The run's length from the file's run context, when known, and where it comes from."""
    try:
        import libcst as cst

        from optax_lint.facts.module import ModuleFacts

        entry = ModuleFacts(cst.parse_module(text), path, text=text, declared_context=context).run_context.get("steps")
        value = entry.value if entry is not None else None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None, ""
        return int(value), f"the run context's steps, {entry.cite()}"
    except Exception:
        return None, ""
