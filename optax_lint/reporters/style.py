"""Terminal styling every text format shares: ANSI colours only when colour is on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from optax_lint.core.diagnostics import Severity

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions

BOLD = "1"
RED = "31"
YELLOW = "33"
CYAN = "36"

SEVERITY_COLOR = {Severity.ERROR: RED, Severity.WARNING: YELLOW, Severity.INFO: CYAN}


def paint(text: str, style: str, options: ReportOptions) -> str:
    """Wrap `text` in an ANSI style when colour is on; never emit escapes otherwise."""
    if not options.color or not text:
        return text
    return f"\x1b[{style}m{text}\x1b[0m"


def fix_marker(options: ReportOptions) -> str:
    return "[" + paint("*", CYAN, options) + "]"
