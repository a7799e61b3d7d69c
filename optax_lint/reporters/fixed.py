"""The --show-fixes block: what --fix fixed, by file, then each finding's position and
code (ruff's "Fixed N errors:" block, one line per fix rather than a count per rule,
so the line to review is named)."""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING

from optax_lint.core.diagnostics import Finding
from optax_lint.reporters.style import BOLD, SEVERITY_COLOR, paint

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions


def fixed_block(fixed: list[Finding], options: ReportOptions) -> str:
    """`Fixed 2 problems:` then `- path:` and `    5:5 OPX101 (name): fix title` lines, and a
    blank line; "" for none."""
    if not fixed:
        return ""
    count = len(fixed)
    lines = [f"Fixed {count} problem{'s' if count != 1 else ''}:"]
    for path, items in groupby(sorted(fixed, key=lambda f: f.sort_key), key=lambda f: f.path):
        lines.append(f"- {paint(path, BOLD, options)}:")
        for f in items:
            where = f.location[len(f.path) + 1:]
            title = f": {f.fix.title}" if f.fix is not None and f.fix.title else ""  # what was done
            lines.append(f"    {where} {paint(f.code, SEVERITY_COLOR[f.severity], options)} ({f.name}){title}")
    return "\n".join(lines) + "\n\n"
