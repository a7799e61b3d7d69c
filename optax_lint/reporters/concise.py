"""The concise format, `path:line:col: CODE severity [*] message`.

The full format's first line is exactly this line, so the header lives here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from optax_lint.core.diagnostics import Finding
from optax_lint.reporters.style import BOLD, SEVERITY_COLOR, fix_marker, paint
from optax_lint.reporters.summary import tail

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions

def header(finding: Finding, options: ReportOptions) -> str:
    """`path:line:col: CODE severity [*] message` (`path:cell N:line:col:` in a
    notebook); [*] only when --fix would apply the fix.

    The code stays right after the position, where flake8/ruff-style parsers and greps
    look for it; the severity word follows, so it is readable without colour.
    """
    where = paint(finding.path, BOLD, options) + finding.location[len(finding.path):] + ":"
    color = SEVERITY_COLOR[finding.severity]
    code = paint(finding.code, color, options)
    severity = paint(finding.severity.value, color, options)
    marker = fix_marker(options) + " " if finding.fixable(options.unsafe_fixes) else ""
    return f"{where} {code} {severity} {marker}{finding.message}"


def render(findings: list[Finding], sources: Mapping[str, str], options: ReportOptions) -> str:
    if options.statistics:
        return tail(findings, options)
    lines = [header(f, options) for f in findings]
    body = "".join(line + "\n" for line in lines)
    gap = "\n" if body and options.listed_fixes else ""  # the --show-fixes block stands apart, as in ruff
    return body + gap + tail(findings, options)
