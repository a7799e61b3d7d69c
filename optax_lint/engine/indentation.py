"""A file CPython accepts but libcst's tokenizer refuses: indentation of a tab followed
by spaces (`\\t def f(self):` over `\\t\\t  return x`, libcst#829). It is valid Python,
so it must not be reported as a syntax error. It is linted with the indentation of its
logical lines expanded as CPython reads it (a tab to the next multiple of 8), and its
findings are mapped back to the file as written. Nothing else changes: the lines stay
where they are, only the columns after an expanded indentation move.

Such a file gets no fix: a fix is an edit computed on the expanded text, and writing it
would also rewrite the user's indentation."""

from __future__ import annotations

import dataclasses
import io
import tokenize
from typing import Optional

from optax_lint.core.diagnostics import Finding, Span

_SKIP = {tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER}


@dataclasses.dataclass
class Expanded:
    text: str
    widths: dict[int, tuple[int, int]]  # line -> (indentation as written, as expanded)

    def column(self, line: int, column: int) -> int:
        """A 1-based column of the expanded text, in the file as written."""
        widths = self.widths.get(line)
        if widths is None:
            return column
        written, expanded = widths
        return column - (expanded - written) if column > expanded else min(column, written + 1)

    def span(self, span: Span) -> Span:
        return Span(span.line, self.column(span.line, span.column), span.end_line, self.column(span.end_line, span.end_column))

    def finding(self, finding: Finding) -> Finding:
        related = [dataclasses.replace(r, span=self.span(r.span)) if r.path is None else r for r in finding.related]
        return dataclasses.replace(finding, span=self.span(finding.span), related=related, fix=None)


def expanded_indentation(text: str) -> Optional[Expanded]:
    """The text with the tabs of every logical line's indentation expanded, or None when
    no such line has a tab (then the indentation is not what libcst refused)."""
    lines = text.splitlines(keepends=True)
    starts = set()
    try:
        first = True
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.NEWLINE:
                first = True
            elif first and token.type not in _SKIP:
                starts.add(token.start[0])
                first = False
    except (tokenize.TokenError, SyntaxError):
        return None
    widths = {}
    for number in sorted(n for n in starts if n <= len(lines)):
        line = lines[number - 1]
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indent:
            wide = indent.expandtabs(8)
            lines[number - 1] = wide + line[len(indent):]
            widths[number] = (len(indent), len(wide))
    return Expanded("".join(lines), widths) if widths else None
