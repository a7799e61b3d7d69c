"""The pylint format: `path:line: [CODE] message`, pylint's parseable layout as ruff
writes it, which editors and CI log parsers already read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from optax_lint.core.diagnostics import Finding

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions


def line(finding: Finding) -> str:
    # A notebook cell's lines are not lines of the .ipynb file: point at the file's first.
    number = finding.span.line if finding.cell is None else 1
    message = " ".join(f"{finding.cell_note}{finding.message}".split())  # one line per finding
    return f"{finding.path}:{number}: [{finding.code}] {message}"


def render(findings: list[Finding], sources: Mapping[str, str], options: ReportOptions) -> str:
    return "".join(line(f) + "\n" for f in findings)
