"""A file no selected rule family can fire on (prefilter.py): checked for syntax errors
and unused `noqa` comments only. Nothing here imports libcst, the facts or a rule, so a
pre-commit run over files that never mention optax stays at CPython's parse."""

from __future__ import annotations

from typing import Optional

from optax_lint.core.catalogue import load_catalogue
from optax_lint.core.diagnostics import Finding
from optax_lint.core.meta import SYNTAX_ERROR, UNUSED_NOQA, meta_finding
from optax_lint.engine import noqa as suppressions
from optax_lint.syntax.parsing import CpythonParse, quick_syntax_check


def lint_skipped(text: str, path: str, codes: set[str], cpython: Optional[CpythonParse] = None) -> list[Finding]:
    """Findings for a file the prefilter ruled out: a syntax error (CPython's parser,
    ~0.1x libcst's; libcst only when CPython refuses syntax it may not know), or else
    its unused `noqa` comments."""
    error = quick_syntax_check(text, path, cpython)
    findings = [error] if error is not None and SYNTAX_ERROR in codes else []
    if UNUSED_NOQA in codes and error is None:
        findings += unused_noqa(suppressions.parse(text), [], path)
    return findings


def unused_noqa(noqa: suppressions.Suppressions, findings: list[Finding], path: str) -> list[Finding]:
    out = []
    catalogue = load_catalogue()
    for entry in noqa.lines.values():
        if entry.codes is None:
            continue  # a bare noqa may serve other tools
        ours = [c for c in entry.codes if c.startswith("OPX")]
        unused = [c for c in ours if c not in entry.used]
        if not unused:
            continue
        unknown = [c for c in unused if c not in catalogue]
        detail = ", ".join(unused) + (f" (unknown: {', '.join(unknown)})" if unknown else "")
        out.append(meta_finding(UNUSED_NOQA, path, f"Unused `noqa` directive for {detail}", entry.line, entry.column, entry.end_column))
    present = {f.code for f in findings}
    for line, column, end, codes in noqa.file_comments:
        if codes is None:
            continue
        unused = [c for c in codes if c.startswith("OPX") and c not in present]
        if unused:
            out.append(meta_finding(UNUSED_NOQA, path, f"Unused file-level `noqa` for {', '.join(unused)}", line, column, end))
    return out
