"""The json format: a pretty JSON array of findings and nothing else on stdout."""

from __future__ import annotations

import json as _json
from typing import TYPE_CHECKING, Mapping

from optax_lint.core.diagnostics import Finding

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions


def render(findings: list[Finding], sources: Mapping[str, str], options: ReportOptions) -> str:
    if options.statistics:
        from optax_lint.reporters.summary import statistics_rows

        data: list[dict] = statistics_rows(findings, options)
    else:
        # Key order comes from Finding.to_dict, so output is stable; "url" is reserved (ruff has one).
        data = [{**f.to_dict(), "url": None} for f in findings]
    return _json.dumps(data, indent=2, ensure_ascii=False) + "\n"
