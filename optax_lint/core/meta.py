"""The engine's own findings: a file that does not parse (OPX001), a noqa that
suppresses nothing (OPX002), a file that cannot be read (OPX003), and an internal
error (OPX900). No rule module judges these; the engine and the runner report them."""

from __future__ import annotations

from typing import Optional

from optax_lint.core.catalogue import load_catalogue
from optax_lint.core.diagnostics import Finding, Span

SYNTAX_ERROR = "OPX001"
UNUSED_NOQA = "OPX002"
IO_ERROR = "OPX003"
INTERNAL_ERROR = "OPX900"


def meta_finding(code: str, path: str, message: str, line: int = 1, column: int = 1, end_column: Optional[int] = None) -> Finding:
    spec = load_catalogue()[code]
    return Finding(
        code=code,
        name=spec.name,
        severity=spec.severity,
        message=message,
        path=path,
        span=Span(line, column, line, end_column if end_column is not None else column),
        help=spec.help,
    )
