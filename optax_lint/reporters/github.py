"""The github format: GitHub Actions workflow commands, so findings annotate a PR."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from optax_lint.core.diagnostics import Finding, Severity

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions

LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    # '%' first, or the escapes themselves would be escaped again.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(finding: Finding) -> str:
    s = finding.span
    props = [("file", finding.path)]
    if finding.cell is None:  # a notebook cell's lines are not lines of the .ipynb file: annotate the file
        props += [("line", str(s.line)), ("col", str(s.column)), ("endLine", str(s.end_line)), ("endColumn", str(s.end_column))]
    props.append(("title", f"{finding.code} ({finding.name})"))
    prop_text = ",".join(f"{k}={escape_property(v)}" for k, v in props)
    data = f"{finding.location}: {finding.code} {finding.message}"
    return f"::{LEVEL[finding.severity]} {prop_text}::{escape_data(data)}"


def render(findings: list[Finding], sources: Mapping[str, str], options: ReportOptions) -> str:
    return "".join(command(f) + "\n" for f in findings)
