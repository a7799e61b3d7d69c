"""The in-process API: lint (and fix) files on disk.

`lint_paths(["train.py"])` is what the CLI, the benchmark and the tests call. Each
file is read safely (source.py), linted or fixed (engine.py), and written back
atomically only when its fixes re-parse and the file did not change meanwhile.
"""

from __future__ import annotations

import difflib
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

from . import engine
from .config import Settings, load_settings
from .diagnostics import FileResult, Finding
from .source import SourceError, read_source, write_source


@dataclass
class RunOptions:
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False  # compute fixes, write nothing, return a unified diff
    show_traceback: bool = False
    max_file_bytes: int = 8 * 1024 * 1024
    jobs: int = 1
    with_edits: bool = False  # compute fixes' text edits (JSON output)
    context: Optional[dict] = None  # run context declared on the command line: {field: value}
    verify_worker: object = None  # a verify.runner.Worker: --verify (and gate fixes with --fix)


@dataclass
class Outcome:
    results: list[FileResult] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # path -> final text, for code frames
    internal_errors: int = 0
    fixed: int = 0
    verification: list = field(default_factory=list)  # verify.report.PipelineReport, with --verify

    @property
    def findings(self) -> list[Finding]:
        return sorted((f for r in self.results for f in r.findings), key=lambda f: f.sort_key)


def display_path(path: Path) -> str:
    text = str(path)
    return text[2:] if text.startswith("./") else text


def lint_file(path: Path, settings: Settings, options: RunOptions) -> tuple[FileResult, Optional[str], int]:
    """(result, text for code frames, internal error count) for one file."""
    shown = display_path(path)
    codes = settings.codes_for_path(path)
    result = FileResult(shown)
    if path.suffix.lower() == ".ipynb":
        from .notebook import lint_notebook_file

        return lint_notebook_file(path, shown, codes, settings, options)
    try:
        source = read_source(path, max_bytes=options.max_file_bytes)
    except SourceError as exc:
        code = engine.SYNTAX_ERROR if exc.kind in ("binary", "decode") else engine.IO_ERROR
        if code in codes or code == engine.IO_ERROR:
            result.findings.append(engine.meta_finding(code, shown, _read_error_message(exc), exc.line or 1, exc.column or 1))
        result.error = str(exc)
        return result, None, 0
    options_by_code = settings.rule_options
    declared = _declared_context(path, settings, options)
    root = str(settings.root)
    if not (options.fix or options.diff):
        run = engine.lint_text(
            source.text, shown, codes, options_by_code, show_traceback=options.show_traceback, context=declared, root=root
        )
        if options.with_edits:
            engine.attach_edits(source.text, run)
        result.findings = run.findings
        if options.verify_worker is not None and run.module is not None:
            from .verify.report import verify_text

            result.verification = verify_text(source.text, shown, options.verify_worker)
        return result, source.text, run.internal_errors
    fixed = engine.fix_text(
        source.text, shown, codes, options_by_code, unsafe=options.unsafe_fixes, show_traceback=options.show_traceback,
        context=declared, root=root,
        gate=_gate(options, shown),
    )
    result.findings = fixed_findings(fixed, shown)
    text = source.text
    if fixed.text != source.text:
        result.fixed = fixed.applied
        if options.diff:
            result.diff = "".join(
                difflib.unified_diff(
                    source.text.splitlines(keepends=True), fixed.text.splitlines(keepends=True),
                    fromfile=f"a/{shown}", tofile=f"b/{shown}",
                )
            )
        else:
            try:
                write_source(source, fixed.text)
                text = fixed.text
            except SourceError as exc:
                result.fixed = 0
                result.findings = engine.lint_text(source.text, shown, codes, options_by_code, context=declared, root=root).findings
                result.findings.append(engine.meta_finding(engine.IO_ERROR, shown, f"not fixed: {exc}"))
    return result, text, fixed.internal_errors + len(fixed.dropped)


def read_failure(result: FileResult, exc: SourceError, codes: set[str]) -> FileResult:
    """`result` reporting a file that could not be read (OPX003) or decoded (OPX001)."""
    code = engine.SYNTAX_ERROR if exc.kind in ("binary", "decode") else engine.IO_ERROR
    if code in codes or code == engine.IO_ERROR:
        result.findings.append(engine.meta_finding(code, result.path, _read_error_message(exc), exc.line or 1, exc.column or 1))
    result.error = str(exc)
    return result


def fixed_findings(fixed: engine.FixRun, shown: str) -> list[Finding]:
    """What remains after fixing: refused fixes carry their evidence, dropped ones an OPX900."""
    findings = fixed.findings
    for refused, evidence in fixed.refused:
        for finding in findings:
            if finding.code == refused.code and finding.message == refused.message:
                finding.evidence = {"fix_refused": evidence}
    for dropped in fixed.dropped:
        findings.append(
            engine.meta_finding(
                engine.INTERNAL_ERROR, shown,
                f"the fix for {dropped.code} at line {dropped.span.line} would not re-parse; it was not applied",
                dropped.span.line, dropped.span.column,
            )
        )
    return findings


def _gate(options: RunOptions, shown: str):
    if options.verify_worker is None:
        return None
    from .verify.gate import make_gate

    return make_gate(options.verify_worker, shown)


def _declared_context(path: Path, settings: Settings, options: RunOptions) -> dict:
    """Run context declared in config (per-path overrides applied) and on the command line."""
    from .extract.context import ContextError, declared_for

    try:
        return declared_for(path, settings, options.context)
    except ContextError:  # the CLI validates the table first; a library caller gets inference only
        return {k: (v, "cli", None) for k, v in (options.context or {}).items()}


def _read_error_message(exc: SourceError) -> str:
    if exc.kind in ("binary", "decode"):
        return f"SyntaxError: {exc}"
    return str(exc)


def _worker(args):
    path, settings, options = args
    result, text, internal = lint_file(path, settings, options)
    for finding in result.findings:
        finding.node = None  # libcst nodes and fix closures do not cross processes
        if finding.fix is not None:
            finding.fix.apply = _Marker(bool(finding.fix.apply))
    return result, text, internal


class _Marker:
    """Stands in for a fix function after a process boundary: keeps `fixable()` right."""

    def __init__(self, present: bool) -> None:
        self.present = present

    def __bool__(self) -> bool:
        return self.present


def run(paths: Sequence[Path], settings: Settings, options: RunOptions) -> Outcome:
    outcome = Outcome()
    jobs = options.jobs if options.jobs > 0 else (os.cpu_count() or 1)
    items = [(Path(p), settings, options) for p in paths]
    if jobs > 1 and len(items) >= 16:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            produced = list(pool.map(_worker, items, chunksize=max(1, len(items) // (jobs * 4))))
    else:
        produced = [lint_file(*item) for item in items]
    for result, text, internal in produced:
        outcome.results.append(result)
        if text is not None:
            outcome.sources[result.path] = text
        for number, cell_text in result.cell_sources.items():  # notebooks: code frames per cell
            outcome.sources[f"{result.path}:cell {number}"] = cell_text
        outcome.internal_errors += internal
        outcome.fixed += result.fixed
        outcome.verification.extend(getattr(result, "verification", []) or [])
    return outcome


def lint_paths(paths: Iterable[str], settings: Optional[Settings] = None, **options) -> list[FileResult]:
    """Lint files (no discovery, no writes unless fix=True) and return their results."""
    settings = settings or load_settings()
    return run([Path(p) for p in paths], settings, RunOptions(**options)).results


def clear_caches() -> None:
    """Forget the project modules read for run contexts (cached per run). The catalogue
    and optax table stay: they are loaded once per process on purpose."""
    from .extract.project_config import clear_cache  # project modules read for the run context

    clear_cache()
