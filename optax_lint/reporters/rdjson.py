"""The rdjson format: reviewdog's Diagnostic Format (a DiagnosticResult as JSON), so
reviewdog can post findings as review comments and fixes as suggested changes.

Positions follow that format: 1-based lines, and columns counted in UTF-8 bytes (our
spans count characters; the source text converts them), end exclusive. A fix whose
text edits are known (they are computed for this format) becomes `suggestions`; an
unsafe one too, since a suggestion is applied only by a reviewer who accepts it.
"""

from __future__ import annotations

import json as _json
from typing import TYPE_CHECKING, Mapping, Optional

from optax_lint.core.catalogue import HOMEPAGE, load_catalogue, rule_doc_url
from optax_lint.core.diagnostics import Applicability, Finding, Severity, Span
from optax_lint.core.source import source_lines

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions

SEVERITY = {Severity.ERROR: "ERROR", Severity.WARNING: "WARNING", Severity.INFO: "INFO"}


def _byte_column(lines: list[str], line: int, column: int) -> int:
    """The 1-based UTF-8 byte column of 1-based character `column` on `line`."""
    if not 1 <= line <= len(lines):
        return column  # no source (or a stale span): the character column is the best guess
    return len(lines[line - 1][: column - 1].encode("utf-8", "surrogatepass")) + 1


def _range(span: Span, lines: list[str]) -> dict:
    return {
        "start": {"line": span.line, "column": _byte_column(lines, span.line, span.column)},
        "end": {"line": max(span.end_line, span.line), "column": _byte_column(lines, span.end_line, max(span.end_column, 1))},
    }


def _location(path: str, span: Span, cell: Optional[int], lines: list[str]) -> dict:
    if cell is not None:  # a notebook cell's lines are not lines of the .ipynb file: the file alone
        return {"path": path}
    return {"path": path, "range": _range(span, lines)}


def diagnostic(finding: Finding, lines: list[str], url: Optional[str]) -> dict:
    out: dict = {
        "message": finding.cell_note + finding.message,
        "location": _location(finding.path, finding.span, finding.cell, lines),
        "severity": SEVERITY[finding.severity],
        "code": {"value": finding.code, **({"url": url} if url else {})},
    }
    fix = finding.fix
    if fix is not None and fix.edits and finding.cell is None and fix.applicability is not Applicability.DISPLAY_ONLY:
        out["suggestions"] = [{"range": _range(edit.span, lines), "text": edit.content} for edit in fix.edits]
    if finding.related:
        out["related_locations"] = []
        for rel in finding.related:
            same_file = rel.path in (None, finding.path)  # else no text here to count bytes in
            where = _location(rel.path or finding.path, rel.span, rel.cell, lines if same_file else [])
            out["related_locations"].append({"message": rel.message, "location": where})
    return out


def render(findings: list[Finding], sources: Mapping[str, str], options: ReportOptions) -> str:
    catalogue = load_catalogue()
    lines_of: dict[str, list[str]] = {}
    diagnostics = []
    for finding in findings:
        if finding.path not in lines_of:
            text = sources.get(finding.path)
            lines_of[finding.path] = source_lines(text) if text is not None else []
        spec = catalogue.get(finding.code)
        diagnostics.append(diagnostic(finding, lines_of[finding.path], rule_doc_url(spec) if spec else None))
    result = {"source": {"name": "optax-lint", "url": HOMEPAGE}, "diagnostics": diagnostics}
    return _json.dumps(result, indent=2, ensure_ascii=False) + "\n"
