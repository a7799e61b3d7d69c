"""The full format: ruff's header line, a code frame with carets, help and notes."""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING, Mapping, Optional

from optax_lint.core.diagnostics import Finding, Span
from optax_lint.core.source import source_lines
from optax_lint.reporters.concise import header
from optax_lint.reporters.style import CYAN, SEVERITY_COLOR, paint

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions

TAB_SIZE = 4
CONTEXT = 1  # lines shown above and below the span
MAX_SPAN_LINES = 8  # longer spans show their first and last line around "..."

def _char_width(ch: str) -> int:
    if unicodedata.combining(ch) or ch in "\u200b\u200c\u200d\ufeff":
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _layout(text: str) -> tuple[str, list[int]]:
    """The line as displayed (tabs expanded) and each character's starting display cell.

    offsets[i] is where character i starts; offsets[len(text)] is the line's width.
    Carets are laid out with the same offsets, so they stay under the right characters.
    """
    shown: list[str] = []
    offsets: list[int] = []
    cell = 0
    for ch in text:
        offsets.append(cell)
        if ch == "\t":
            step = TAB_SIZE - cell % TAB_SIZE
            shown.append(" " * step)
        elif ch < " " or ch == "\x7f":
            # Show control characters as their Unicode pictures: a raw ESC from a
            # linted file must not drive the user's terminal.
            step = 1
            shown.append("\u2421" if ch == "\x7f" else chr(0x2400 + ord(ch)))
        else:
            step = _char_width(ch)
            shown.append(ch)
        cell += step
    offsets.append(cell)
    return "".join(shown), offsets


def _segments(span: Span, lines: list[str]) -> dict[int, tuple[int, int]]:
    """Line number -> (start char, end char) to underline; blank inner lines are absent."""
    line, col, end_line, end_col = span.line, span.column, span.end_line, span.end_column
    if end_line > line and end_col <= 1 and end_line - 1 <= len(lines):
        # A span ending at the start of a line really ends at the previous line's end.
        end_line -= 1
        end_col = len(lines[end_line - 1]) + 1
    end_line = min(end_line, len(lines))
    if end_line <= line:
        return {line: (col - 1, max(end_col - 1, col - 1))}
    out = {line: (col - 1, len(lines[line - 1]))}
    for n in range(line + 1, end_line + 1):
        text = lines[n - 1]
        indent = len(text) - len(text.lstrip(" \t"))
        if n == end_line:
            out[n] = (indent, end_col - 1)
        elif indent < len(text):  # a blank line inside the span gets no carets
            out[n] = (indent, len(text))
    return out


def _caret_line(text: str, start: int, end: int) -> tuple[str, str]:
    """(padding, carets) under characters [start, end); at least one caret."""
    _, offsets = _layout(text)
    start = min(max(start, 0), len(text))
    end = min(max(end, start), len(text))
    pad = offsets[start]
    width = max(offsets[end] - pad, 1)
    return " " * pad, "^" * width


def code_frame(finding: Finding, source: Optional[str], options: ReportOptions) -> tuple[list[str], int]:
    """The frame's lines (no trailing newlines) and the gutter width it used."""
    span = finding.span
    lines = source_lines(source) if source is not None else []
    if not 1 <= span.line <= len(lines):
        return [], len(str(span.line))  # no source, or a stale span: header and notes only
    segments = _segments(span, lines)
    last_covered = max(segments)
    shown: list[Optional[int]] = list(range(span.line, last_covered + 1))
    if len(shown) > MAX_SPAN_LINES:
        shown = [span.line, None, last_covered]  # None: the elided middle
    first = max(1, span.line - CONTEXT)
    last = min(len(lines), last_covered + CONTEXT)
    gutter = len(str(last))
    blank = " " * (gutter + 1) + "|"
    color = SEVERITY_COLOR[finding.severity]

    def source_line(n: int) -> str:
        return f"{n:>{gutter}} | {_layout(lines[n - 1])[0]}".rstrip()

    out = [blank]
    out.extend(source_line(n) for n in range(first, span.line))
    for n in shown:
        if n is None:
            out.append("...")
            continue
        out.append(source_line(n))
        if n in segments:
            pad, carets = _caret_line(lines[n - 1], *segments[n])
            label = " " + paint(finding.code, color, options) if n == last_covered else ""
            out.append(f"{blank} {pad}{paint(carets, color, options)}{label}")
    out.extend(source_line(n) for n in range(last_covered + 1, last + 1))
    out.append(blank)
    return out, gutter


def render_finding(finding: Finding, source: Optional[str], options: ReportOptions) -> str:
    frame, gutter = code_frame(finding, source, options)
    lines = [header(finding, options), *frame]
    indent = " " * (gutter + 1)
    if options.show_fixes and finding.help_text:
        lines.append(indent + paint(f"= help: {finding.help_text}", CYAN, options))
    for rel in finding.related:
        cell = f"cell {rel.cell}:" if rel.cell is not None else ""
        where = f"{rel.path or finding.path}:{cell}{rel.span.line}:{rel.span.column}"
        lines.append(f"{indent}= note: {rel.message}: {where}")
    return "".join(line + "\n" for line in lines)


def render(findings: list[Finding], sources: Mapping[str, str], options: ReportOptions) -> str:
    from optax_lint.reporters.summary import tail

    if options.statistics:
        return tail(findings, options)
    # A blank line after each finding separates them, and the last from the summary.
    body = "".join(render_finding(f, sources.get(f.source_key), options) + "\n" for f in findings)
    return body + tail(findings, options)
