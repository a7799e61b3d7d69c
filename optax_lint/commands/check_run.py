"""One `check` run once its options are settled: discover, lint, filter, report, and the
exit code. `--watch` keeps one of these and reports again after each change."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import click

from optax_lint.commands.common import discover, fail

if TYPE_CHECKING:
    from optax_lint.core.config import Settings
    from optax_lint.run.api import Outcome
    from optax_lint.run.discovery import Discovery
    from optax_lint.run.options import RunOptions


@dataclass
class CheckRun:
    paths: tuple[str, ...]
    settings: Settings
    options: RunOptions
    diff: bool = False
    statistics: bool = False
    quiet: bool = False
    exit_zero: bool = False
    show_fixes: bool = False
    add_noqa: bool = False
    changes: object = None  # run.gitdiff's changed lines, with --diff-against
    baseline_file: Optional[Path] = None
    known: Optional[set] = None  # the baseline's recorded findings; None with --update-baseline

    @property
    def verify(self) -> bool:
        return self.options.verify_worker is not None

    def discover(self) -> tuple[Discovery, set[str]]:
        found, missing = discover(self.paths, self.settings)
        if self.changes is not None:
            from optax_lint.run.gitdiff import keep_changed

            found.files = keep_changed(found.files, self.changes)
        return found, missing

    def lint(self, files: list[Path]) -> Outcome:
        from optax_lint.run import api
        from optax_lint.run.progress import progress_bar

        with progress_bar(len(files)) as self.options.progress:
            return api.run(files, self.settings, self.options)

    def once(self) -> int:
        found, missing = self.discover()
        return self.report(self.lint(found.files), found.problems, missing)

    def report(self, outcome: Outcome, problems=(), missing: frozenset[str] | set[str] = frozenset(), stdin_output: Optional[bytes] = None) -> int:
        """Print the outcome as asked and return the exit code. `problems`: paths discovery
        could not read; `missing`: those of them that do not exist (reported as OPX003
        like the others, after the CI filters so that none of them can hide one)."""
        from optax_lint.core import meta
        from optax_lint.core.diagnostics import FileResult

        unreadable = {False: [], True: []}  # is it missing -> results
        for problem in problems:
            result = FileResult(problem.path)
            result.findings.append(meta.meta_finding(meta.IO_ERROR, problem.path, problem.message))
            unreadable[problem.path in missing].append(result)
        outcome.results.extend(unreadable[False])
        self._ci_filter(outcome, unreadable[True])
        outcome.results.extend(unreadable[True])
        usage_error = bool(outcome.internal_errors or missing)
        if self.add_noqa:
            code = _add_noqa(outcome, self.options.max_file_bytes)
            return 2 if usage_error else code
        if self.diff:
            code = self._print_diff(outcome)
            return 2 if usage_error else code
        self._print(outcome, stdin_output)
        failing = sum(1 for f in outcome.findings if self.settings.fails(f.severity))
        if usage_error:
            return 2
        return 0 if self.exit_zero or failing == 0 else 1

    def _print(self, outcome: Outcome, stdin_output: Optional[bytes]) -> None:
        from optax_lint.reporters import ReportOptions, render, use_color

        fmt = self.settings.output_format
        report = ReportOptions(
            color=use_color(sys.stdout),
            unsafe_fixes=self.options.unsafe_fixes,
            statistics=self.statistics,
            quiet=self.quiet,
            fixed_total=outcome.fixed if self.options.fix else 0,
            fail_level=self.settings.fail_level,
            listed_fixes=[f for r in outcome.results for f in r.applied_fixes] if self.show_fixes else [],
        )
        text = render(outcome.results, fmt, sources=outcome.sources, options=report)
        to_stderr = stdin_output is not None and self.options.fix  # stdout carries the fixed text, as with ruff
        if to_stderr:
            sys.stdout.buffer.write(stdin_output)
            sys.stdout.flush()
        if self.verify and fmt == "json":
            # With --verify, JSON carries the findings and the per-pipeline evidence.
            text = json.dumps({"findings": json.loads(text or "[]"), "verification": [r.to_dict() for r in outcome.verification]}, indent=2) + "\n"
        if text:
            click.echo(text, nl=not text.endswith("\n"), err=to_stderr, color=report.color)  # FORCE_COLOR survives a pipe
        if self.verify and fmt != "json" and outcome.verification:
            from optax_lint.verify.report import render as render_verification

            fixed = " of the fixed code" if self.options.fix else ""
            click.echo(f"\nVerification{fixed} (chains built under JAX from the extracted spec; your file was not run):", err=to_stderr)
            click.echo(render_verification(outcome.verification), nl=False, err=to_stderr)

    def _print_diff(self, outcome: Outcome) -> int:
        diffs = [r.diff for r in sorted(outcome.results, key=lambda r: r.path) if r.diff]
        if diffs:
            click.echo("".join(diffs), nl=False)
        unreadable = _report_unfixable(outcome.findings)
        if not self.quiet and not unreadable:
            would = sum(r.fixed for r in outcome.results)
            click.echo(f"Would fix {would} problem{'s' if would != 1 else ''}." if would else "No fixes available.", err=True)
        return 1 if (diffs or unreadable) and not self.exit_zero else 0

    def _ci_filter(self, outcome: Outcome, missing: list) -> None:
        """--diff-against keeps findings on changed lines; --baseline drops the recorded ones
        (`known`), or with --update-baseline (`known` None) records what is left and exits
        (2, naming them, when a path does not exist: `missing`, its results)."""
        if self.changes is not None:
            for result in outcome.results:
                result.findings = [f for f in result.findings if self.changes.covers(f)]
        if self.baseline_file is None:
            return
        from optax_lint.run import baseline

        if self.known is None:
            try:
                count = baseline.write(self.baseline_file, outcome.findings, outcome.sources)
            except baseline.BaselineError as exc:
                fail(str(exc))
            click.echo(f"Recorded {count} finding{'s' if count != 1 else ''} in {self.baseline_file}.", err=True)
            _report_unfixable([f for result in missing for f in result.findings], summary=False)
            sys.exit(2 if outcome.internal_errors or missing else 0)
        hidden = baseline.drop_known(outcome.results, outcome.sources, self.baseline_file, self.known)
        if hidden and not self.quiet:
            click.echo(f"{hidden} finding{'s' if hidden != 1 else ''} recorded in {self.baseline_file} not shown.", err=True)


def _report_unfixable(findings, summary: bool = True) -> int:
    """--diff: files that could not be read or parsed get no diff; say so (stderr)."""
    from optax_lint.core import meta
    from optax_lint.reporters import ReportOptions, use_color
    from optax_lint.reporters.concise import header

    blocked = [f for f in findings if f.code in (meta.SYNTAX_ERROR, meta.IO_ERROR)]
    options = ReportOptions(color=use_color(sys.stderr))
    for finding in blocked:
        click.echo(header(finding, options), err=True)
    if blocked and summary:
        files = len({f.path for f in blocked})
        click.echo(f"optax-lint: error: {files} file{'s' if files != 1 else ''} could not be read or parsed; no fixes computed for {'them' if files != 1 else 'it'}.", err=True)
    return len(blocked)


def _add_noqa(outcome: Outcome, max_bytes: int) -> int:
    """--add-noqa: write the comments, say how many (stderr, as ruff does) and which
    findings could not take one; 1 when some could not, else 0."""
    from optax_lint.run.add_noqa import add_noqa

    done = add_noqa(outcome.findings, outcome.sources, max_bytes)
    for finding, reason in done.refused:
        click.echo(f"{finding.location}: {finding.code} not suppressed: {reason}", err=True)
    click.echo(f"Added {done.added} noqa directive{'s' if done.added != 1 else ''}.", err=True)
    return 1 if done.refused else 0
