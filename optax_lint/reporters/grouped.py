"""The grouped format (ruff's): findings under their file, `line:col  CODE severity
[*] message`, positions aligned within a file, then the summary."""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING, Mapping

from optax_lint.core.diagnostics import Finding
from optax_lint.reporters.style import BOLD, SEVERITY_COLOR, fix_marker, paint
from optax_lint.reporters.summary import tail

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions


def _position(finding: Finding) -> tuple[str, str]:
    """(`line` or `cell N:line`, `col`): the parts of the location after the path."""
    where = finding.location[len(finding.path) + 1:]
    line, _, column = where.rpartition(":")
    return line, column


def group(path: str, findings: list[Finding], options: ReportOptions) -> str:
    positions = [_position(f) for f in findings]
    line_width = max(len(line) for line, _ in positions)
    column_width = max(len(column) for _, column in positions)
    out = [paint(path, BOLD, options) + ":"]
    for finding, (line, column) in zip(findings, positions):
        color = SEVERITY_COLOR[finding.severity]
        marker = fix_marker(options) + " " if finding.fixable(options.unsafe_fixes) else ""
        out.append(
            f"  {line:>{line_width}}:{column:<{column_width}} {paint(finding.code, color, options)} "
            f"{paint(finding.severity.value, color, options)} {marker}{finding.message}"
        )
    return "".join(line + "\n" for line in out) + "\n"


def render(findings: list[Finding], sources: Mapping[str, str], options: ReportOptions) -> str:
    if options.statistics:
        return tail(findings, options)
    body = "".join(group(path, list(items), options) for path, items in groupby(findings, key=lambda f: f.path))
    return body + tail(findings, options)
