"""The azure format: Azure Pipelines logging commands (`##vso[task.logissue ...]`), so
findings show as errors and warnings on the pipeline run.

Azure knows two issue types: info findings are warnings there (and do not fail the job:
a logging command never does). Values are escaped as Azure's own task library escapes
them, so a `;`, `]` or line break in a path or message cannot end the command early.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from optax_lint.core.diagnostics import Finding, Severity

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions

TYPE = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "warning"}


def escape_data(text: str) -> str:
    return text.replace("%", "%AZP25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace("]", "%5D").replace(";", "%3B")


def command(finding: Finding) -> str:
    props = [("type", TYPE[finding.severity]), ("sourcepath", finding.path)]
    if finding.cell is None:  # a notebook cell's lines are not lines of the .ipynb file
        props += [("linenumber", str(finding.span.line)), ("columnnumber", str(finding.span.column))]
    props.append(("code", finding.code))
    prop_text = "".join(f"{key}={escape_property(value)};" for key, value in props)
    return f"##vso[task.logissue {prop_text}]{escape_data(finding.cell_note + finding.message)}"


def render(findings: list[Finding], sources: Mapping[str, str], options: ReportOptions) -> str:
    return "".join(command(f) + "\n" for f in findings)
