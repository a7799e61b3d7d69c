"""The gitlab format: a GitLab Code Quality report (a JSON array of issues).

Each issue's fingerprint hashes the finding's line-shift-proof key (rule, file,
normalized source line, occurrence), so GitLab sees the same finding as unchanged when
a merge request only moves it, and as new or fixed when it really is.
"""

from __future__ import annotations

import json as _json
import os
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Mapping

from optax_lint.core.diagnostics import Finding, Severity, Span
from optax_lint.core.fingerprints import finding_keys

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions

# Code Quality's scale is info, minor, major, critical, blocker: an error (training
# crashes or is silently wrong) is critical, a warning major, advice minor.
SEVERITY = {Severity.ERROR: "critical", Severity.WARNING: "major", Severity.INFO: "minor"}


def report_path(path: str) -> str:
    """Code Quality paths are relative to the repository root: the job's working directory."""
    if os.path.isabs(path):
        relative = os.path.relpath(path)
        path = path if relative.startswith("..") else relative
    return PurePosixPath(*Path(path).parts).as_posix()


def issue(finding: Finding, fingerprint: str) -> dict:
    # A notebook cell's lines are not lines of the .ipynb file: point at its first line.
    s = finding.span if finding.cell is None else Span(1, 1, 1, 1)
    return {
        "type": "issue",
        "check_name": finding.code,
        "description": f"{finding.code} ({finding.name}): {finding.cell_note}{finding.message}",
        "categories": ["Bug Risk"],
        "severity": SEVERITY[finding.severity],
        "fingerprint": fingerprint,
        "location": {
            "path": report_path(finding.path),
            "positions": {
                "begin": {"line": s.line, "column": s.column},
                "end": {"line": max(s.end_line, s.line), "column": s.end_column},
            },
        },
    }


def render(findings: list[Finding], sources: Mapping[str, str], options: ReportOptions) -> str:
    issues = [issue(f, key.digest()) for f, key in finding_keys(findings, sources, report_path)]
    return _json.dumps(issues, indent=2, ensure_ascii=False) + "\n"
