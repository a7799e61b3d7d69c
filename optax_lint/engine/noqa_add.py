"""--add-noqa's text edit: `# noqa: CODE` comments written where noqa.py will read them.

Each code goes on the line its finding starts on, the line noqa.py matches. An existing
`# noqa: E501` (ruff's, flake8's) gains the code, `# noqa: E501, OPX101`, codes sorted
as ruff writes them; a bare `# noqa` already silences the line; any other comment
(`# type: ignore`, `# pragma: no cover`) is kept and the noqa follows it, as ruff does.
A line whose end is inside a string, or that continues with a backslash, cannot carry
a comment: its codes are refused with the reason.
"""

from __future__ import annotations

import io
import re
import tokenize

from optax_lint.engine import noqa as suppressions

_LINE_END = re.compile(r"\r\n|\r|\n")
NOT_COMMENTABLE = "its line ends inside a string or continues with a backslash, where no comment can go"
UNTOKENIZABLE = "the file could not be tokenized, so no comment position is certain"
# noqa.py reads comments with tokenize, whose lines end at "\n" only: in a file with bare
# CR line endings it would not find a comment on the line it was written on.
BARE_CR = "the file's lines end in bare CR characters, where a noqa comment is not read on its own line"


def add_codes(text: str, wanted: dict[int, set[str]]) -> tuple[str, int, dict[int, str]]:
    """(the new text, how many lines gained a directive, {line: reason} for the lines
    that could not take one). `wanted`: line -> codes to suppress there."""
    if re.search(r"\r(?!\n)", text):
        return text, 0, {line: BARE_CR for line in wanted}
    ends = _comment_positions(text)
    if ends is None:
        return text, 0, {line: UNTOKENIZABLE for line in wanted}
    lines = _split_lines(text)
    existing = suppressions.parse(text).lines
    refused: dict[int, str] = {}
    added = 0
    for number, codes in sorted(wanted.items()):
        if number not in ends or not 1 <= number <= len(lines):
            refused[number] = NOT_COMMENTABLE
            continue
        body, newline = lines[number - 1]
        noqa = existing.get(number)
        if noqa is not None:
            if noqa.codes is None or codes <= set(noqa.codes):
                continue  # a bare noqa (or one that names them) already covers the line
            merged = ", ".join(sorted(set(noqa.codes) | codes))
            body = body[: noqa.column - 1] + f"# noqa: {merged}" + body[noqa.end_column - 1:]
        else:
            body = body.rstrip() + f"  # noqa: {', '.join(sorted(codes))}"
        lines[number - 1] = (body, newline)
        added += 1
    return "".join(body + newline for body, newline in lines), added, refused


def _split_lines(text: str) -> list[tuple[str, str]]:
    """(line without its ending, the ending) for each line, counted as spans count them."""
    out, start = [], 0
    for match in _LINE_END.finditer(text):
        out.append((text[start:match.start()], match.group()))
        start = match.end()
    if start < len(text):
        out.append((text[start:], ""))
    return out


def _comment_positions(text: str):
    """The line numbers whose end a comment can be appended to (a NEWLINE or NL token,
    or a comment, ends them), or None when the text does not tokenize."""
    ends: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT):
                ends.add(tok.start[0])
    except (tokenize.TokenError, SyntaxError):
        return None
    return ends
