"""The json-lines format: one finding per line, each the json format's object (ruff's
json-lines), for tools that stream or `grep` their input."""

from __future__ import annotations

import json as _json
from typing import TYPE_CHECKING, Mapping

from optax_lint.core.diagnostics import Finding

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions


def render(findings: list[Finding], sources: Mapping[str, str], options: ReportOptions) -> str:
    if options.statistics:
        from optax_lint.reporters.summary import statistics_rows

        rows: list[dict] = statistics_rows(findings, options)
    else:
        rows = [{**f.to_dict(), "url": None} for f in findings]  # the json format's objects
    return "".join(_json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
