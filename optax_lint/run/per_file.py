"""What linting a file and linting a notebook share: the finding for a file that
cannot be read, the findings left after fixing, the declared run context for a path
and --verify's fix gate."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from optax_lint.core.config import Settings
from optax_lint.core.diagnostics import FileResult, Finding
from optax_lint.core.meta import INTERNAL_ERROR, IO_ERROR, SYNTAX_ERROR, meta_finding
from optax_lint.core.source import SourceError
from optax_lint.run.options import RunOptions

if TYPE_CHECKING:
    from optax_lint.engine.lint import FixRun


def read_failure(result: FileResult, exc: SourceError, codes: set[str]) -> FileResult:
    """`result` reporting a file that could not be read (OPX003) or decoded (OPX001)."""
    code = SYNTAX_ERROR if exc.kind in ("binary", "decode") else IO_ERROR
    if code in codes or code == IO_ERROR:
        result.findings.append(meta_finding(code, result.path, _read_error_message(exc), exc.line or 1, exc.column or 1))
    result.error = str(exc)
    return result


def _read_error_message(exc: SourceError) -> str:
    if exc.kind in ("binary", "decode"):
        return f"SyntaxError: {exc}"
    return str(exc)




def fixed_findings(fixed: "FixRun", shown: str) -> list[Finding]:
    """What remains after fixing: refused fixes carry their evidence, dropped ones an OPX900."""
    findings = fixed.findings
    for refused, evidence in fixed.refused:
        for finding in findings:
            if finding.code == refused.code and finding.message == refused.message:
                finding.evidence = {"fix_refused": evidence}
    for dropped in fixed.dropped:
        findings.append(
            meta_finding(
                INTERNAL_ERROR, shown,
                f"the fix for {dropped.code} at line {dropped.span.line} would not re-parse; it was not applied",
                dropped.span.line, dropped.span.column,
            )
        )
    return findings


def verify_gate(options: RunOptions, shown: str):
    if options.verify_worker is None:
        return None
    from optax_lint.verify.gate import make_gate

    return make_gate(options.verify_worker, shown)


def declared_context(path: Path, settings: Settings, options: RunOptions) -> dict:
    """Run context declared in config (per-path overrides applied) and on the command line."""
    from optax_lint.facts.context.run_context import ContextError, declared_for

    try:
        return declared_for(path, settings, options.context)
    except ContextError:  # the CLI validates the table first; a library caller gets inference only
        return {k: (v, "cli", None) for k, v in (options.context or {}).items()}
