"""The closing summary line and the --statistics table (ruff's wording and shape)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from optax_lint.core.diagnostics import Applicability, Finding
from optax_lint.reporters.style import fix_marker

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions


def _plural(n: int, word: str, suffix: str = "s") -> str:
    return f"{n} {word}{'' if n == 1 else suffix}"


def fix_counts(findings: list[Finding], options: ReportOptions) -> tuple[int, int]:
    """(fixable by --fix now, unsafe ones that only --unsafe-fixes would enable)."""
    applicable = sum(1 for f in findings if f.fixable(options.unsafe_fixes))
    hidden = 0
    if not options.unsafe_fixes:
        hidden = sum(1 for f in findings if f.fixable(True) and f.fix.applicability is Applicability.UNSAFE)
    return applicable, hidden


def _fix_hint(applicable: int, hidden: int) -> str:
    if applicable and hidden:
        return f"{applicable} fixable with --fix, {hidden} more with --unsafe-fixes"
    if applicable:
        return f"{applicable} fixable with --fix"
    if hidden:
        return f"{_plural(hidden, 'hidden fix', 'es')} can be enabled with the `--unsafe-fixes` option"
    return ""


def summary_line(findings: list[Finding], options: ReportOptions) -> str:
    """One line (two when fixes were applied and more could be); no trailing newline."""
    remaining = len(findings)
    hint = _fix_hint(*fix_counts(findings, options))
    if options.fixed_total > 0:
        total = options.fixed_total + remaining
        line = f"Found {_plural(total, 'problem')} ({options.fixed_total} fixed, {remaining} remaining)."
        # What is left may still be fixable (e.g. unsafe fixes not enabled): say so.
        return line + (f"\n{hint[0].upper()}{hint[1:]}." if hint else "")
    if remaining == 0:
        return "All checks passed!"
    return f"Found {_plural(remaining, 'problem')}" + (f" ({hint})." if hint else ".")


def below_fail_level(findings: list[Finding], options: ReportOptions) -> str:
    """`2 info findings do not fail the run (--fail-level warning).`, or ""."""
    if options.fail_level is None:
        return ""
    from optax_lint.core.config import (
        severity_fails,  # late: config loads the catalogue
    )

    below = Counter(f.severity.value for f in findings if not severity_fails(f.severity, options.fail_level))
    if not below:
        return ""
    parts = " and ".join(f"{n} {severity}" for severity, n in sorted(below.items()))
    count = sum(below.values())
    verb = "does" if count == 1 else "do"
    return f"{parts} finding{'s' if count != 1 else ''} {verb} not fail the run (--fail-level {options.fail_level})."


def statistics_rows(findings: list[Finding], options: ReportOptions) -> list[dict]:
    """Per code: count, name, and whether any of its findings is fixable; count desc, then code."""
    counts = Counter(f.code for f in findings)
    names: dict[str, str] = {}
    fixable: dict[str, bool] = {}
    for f in findings:
        names.setdefault(f.code, f.name)
        fixable[f.code] = fixable.get(f.code, False) or f.fixable(options.unsafe_fixes)
    order = sorted(counts, key=lambda code: (-counts[code], code))
    return [{"code": c, "name": names[c], "count": counts[c], "fixable": fixable[c]} for c in order]


def statistics_table(findings: list[Finding], options: ReportOptions) -> str:
    rows = statistics_rows(findings, options)
    if not rows:
        return ""
    count_w = max(len(str(r["count"])) for r in rows)
    code_w = max(len(r["code"]) for r in rows)
    name_w = max(len(r["name"]) for r in rows)
    out = []
    for r in rows:
        mark = fix_marker(options) if r["fixable"] else ""
        line = f"{r['count']:>{count_w}}  {r['code']:<{code_w}}  {r['name']:<{name_w}}  {mark}"
        out.append(line.rstrip() + "\n")
    return "".join(out)


def tail(findings: list[Finding], options: ReportOptions) -> str:
    """What follows the findings: the statistics table (if asked), the fixes --show-fixes
    lists (even with --quiet: they were asked for), and the summary."""
    from optax_lint.reporters.fixed import fixed_block

    table = statistics_table(findings, options) if options.statistics else ""
    listed = fixed_block(options.listed_fixes, options)
    if options.quiet:
        return table + listed
    note = below_fail_level(findings, options)
    return table + listed + summary_line(findings, options) + "\n" + (note + "\n" if note else "")
