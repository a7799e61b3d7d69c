"""Linting and fixing a notebook: the engine over the cells' logical module, findings
mapped back to cells, fixes gated to one cell and spliced back into the JSON."""

from __future__ import annotations

import difflib
import re
from dataclasses import replace
from pathlib import Path
from typing import Optional

from optax_lint.core.diagnostics import Edit, Finding, Span
from optax_lint.core.source import (
    NOTEBOOK_SIZE_FACTOR,
    SourceError,
    _human_size,
    read_source,
)
from optax_lint.notebook.format import NotebookError, RawCell, parse
from optax_lint.notebook.layout import Layout

# Outputs (plots, logs) make notebooks large without adding code: the file may be this
# many times --max-file-size; the code cells themselves must stay within it.
SIZE_FACTOR = NOTEBOOK_SIZE_FACTOR
PYTHON_LANGUAGES = ("python", "python3", "ipython", "ipython3")


def _map_span(layout: Layout, text: str, span: Span) -> tuple[int, Span]:
    cell, line = layout.locate(text, span.line)
    shift = span.line - line
    return cell, Span(line, span.column, span.end_line - shift, span.end_column)


def to_cells(findings: list[Finding], layout: Layout, text: str) -> list[Finding]:
    """Give each finding (and its related spans and fix edits) its cell and in-cell lines."""
    for finding in findings:
        if finding.cell is not None:
            continue
        finding.cell, finding.span = _map_span(layout, text, finding.span)
        finding.related = [replace(r, cell=c, span=s) for r in finding.related for c, s in [_map_span(layout, text, r.span)]]
        if finding.fix is not None and finding.fix.edits:
            finding.fix.edits = [Edit(_map_span(layout, text, e.span)[1], e.content) for e in finding.fix.edits]
    return findings


def cell_gate(layout: Layout, verify_gate):
    """Refuse edits outside one linted cell or over a magic line; then --verify's gate."""
    from optax_lint.engine.lint import _text_edit

    def gate(finding, module, new_module):
        old = module.code
        near = finding.span.line if finding is not None else None
        reason = layout.refusal(old, *_text_edit(old, new_module.code), near_line=near)
        if reason is not None:
            return False, reason
        return verify_gate(finding, module, new_module) if verify_gate is not None else (True, "")

    return gate


def verify_cells(layout: Layout, shown: str, worker) -> list:
    """--verify's reports, located by cell: `nb.ipynb:cell 7:3:6`."""
    from optax_lint.verify.report import verify_text

    reports = verify_text(layout.text, shown, worker)
    for report in reports:
        cell, report.span = _map_span(layout, layout.text, report.span)
        if report.reason_span is not None:
            reason_cell, span = _map_span(layout, layout.text, report.reason_span)
            report.reason_span = span if reason_cell == cell else None  # printed with the report's cell
        report.path = f"{shown}:cell {cell}"
    return reports


def cells_diff(shown: str, before: dict[int, str], after: dict[int, str]) -> str:
    parts = []
    for number, new in after.items():
        if new != before[number]:
            parts.append("".join(difflib.unified_diff(
                before[number].splitlines(keepends=True), new.splitlines(keepends=True),
                fromfile=f"a/{shown}:cell {number}", tofile=f"b/{shown}:cell {number}",
            )))
    return "".join(part if part.endswith("\n") else part + "\n" for part in parts)


def read_notebook(path: Path, max_file_bytes: int, read=None):
    """The notebook file's text (SourceError if it cannot be read); `read` replaces the
    disk (stdin)."""
    if read is not None:
        return read(path)
    try:
        return read_source(path, max_bytes=max_file_bytes * SIZE_FACTOR)
    except SourceError as exc:
        if exc.kind == "too-large":
            exc.message = exc.message.replace("(--max-file-size)", f"for notebooks ({SIZE_FACTOR} x --max-file-size)")
        raise


def notebook_layout(text: str, max_file_bytes: int):
    """(parsed notebook, layout); NotebookError, or SourceError if the code is too large."""
    nb = parse(text)
    layout = Layout(nb.cells)
    size = len(layout.text.encode("utf-8", "surrogatepass"))
    if size > max_file_bytes:
        raise SourceError("too-large", f"the code cells hold {_human_size(size)}, above the {_human_size(max_file_bytes)} limit (--max-file-size)")
    return nb, layout


def notebook_text(text: str) -> Optional[str]:
    """The logical module of a notebook's JSON text (None if it is not a notebook)."""
    try:
        return Layout(parse(text).cells).text
    except NotebookError:
        return None


def cell_locations(text: str, shown: str, report: str) -> str:
    """`report` with each `shown:LINE` (a logical line) spelled `shown:cell N:LINE`."""
    layout = Layout(parse(text).cells)

    def spell(match: "re.Match[str]") -> str:
        cell, line = layout.locate(layout.text, int(match.group(1)))
        return f"{shown}:cell {cell}:{line}"

    return re.sub(re.escape(shown) + r":(\d+)", spell, report)


def cell_problems(layout: Layout, shown: str, codes: set[str]) -> list[Finding]:
    """OPX001 for each cell that does not parse on its own (the other cells are linted)."""
    from optax_lint.core.meta import SYNTAX_ERROR, meta_finding

    if SYNTAX_ERROR not in codes:
        return []
    return [replace(meta_finding(SYNTAX_ERROR, shown, p.message, p.line, p.column), cell=p.number) for p in layout.problems]


def _offset(text: str, line: int, column: int) -> int:
    start = 0
    for _ in range(line - 1):
        start = text.index("\n", start) + 1
    return start + column - 1


def cell_findings(cells: list[tuple[int, str]], shown: str, codes: set[str], rule_options: dict, common: dict) -> list[Finding]:
    """Findings for cells given as (cell number, text), as an editor holds them: each with
    its cell and in-cell positions; fix edits a notebook must refuse (over a magic line,
    across cells) are dropped, so an editor never offers them."""
    from optax_lint.engine import lint as engine

    layout = Layout([RawCell(number, text, (0, 0), None) for number, text in cells])
    run = engine.lint_text(layout.text, shown, codes, rule_options, **common)
    engine.attach_edits(layout.text, run)
    text = layout.text
    for finding in run.findings:
        fix = finding.fix
        if fix is not None and fix.edits:
            cell = layout.locate(text, finding.span.line)[0]
            spans = [(_offset(text, e.span.line, e.span.column), _offset(text, e.span.end_line, e.span.end_column), e.content) for e in fix.edits]
            # An editor applies the edits to the finding's own cell: anything else is not offered.
            if any(layout.refusal(text, *span) or layout.locate(text, e.span.line)[0] != cell for span, e in zip(spans, fix.edits)):
                fix.edits = []
    return cell_problems(layout, shown, codes) + to_cells(run.findings, layout, layout.text)


def fix_cells(cells: list[tuple[int, str]], shown: str, codes: set[str], rule_options: dict, common: dict) -> dict[int, str]:
    """The safe fixes applied to cells given as (cell number, text): {cell number: new
    text} for the cells that changed, under the same gate as `--fix` on a file."""
    from optax_lint.engine import lint as engine

    layout = Layout([RawCell(number, text, (0, 0), None) for number, text in cells])
    before = layout.sources(layout.text)
    fixed = engine.fix_text(layout.text, shown, codes, rule_options, gate=cell_gate(layout, None), on_edits=layout.applied, **common)
    after = layout.sources(fixed.text)
    return {number: text for number, text in after.items() if text != before[number]}
