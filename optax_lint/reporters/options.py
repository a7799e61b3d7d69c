"""What the CLI tells a reporter: colour, fix counts, the fail level, ..."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from optax_lint.core.diagnostics import Finding


@dataclass
class ReportOptions:
    color: bool = False
    unsafe_fixes: bool = False  # --unsafe-fixes given: unsafe fixes count as fixable
    show_fixes: bool = True  # print "= help: <fix title>" lines in the full format
    statistics: bool = False  # a per-code table instead of the findings
    quiet: bool = False  # findings only: no summary line
    fixed_total: int = 0  # fixes applied in this run, for "(K fixed, M remaining)"
    fail_level: Optional[str] = None  # --fail-level: the summary says which findings do not fail the run
    listed_fixes: list[Finding] = field(default_factory=list)  # --show-fixes: what --fix fixed, listed before the summary
