"""`# noqa` comments: per line (`# noqa: OPX101,OPX102`, bare `# noqa`) and per file
(`# optax-lint: noqa`, `# optax-lint: noqa: OPX101`), as ruff spells them."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Optional

_LINE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[,\s]+[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)
_FILE = re.compile(r"^#\s*optax-lint\s*:\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[,\s]+[A-Za-z]+[0-9]+)*))?\s*$", re.IGNORECASE)
_CODE = re.compile(r"[A-Za-z]+[0-9]+")


@dataclass
class LineNoqa:
    line: int
    column: int  # 1-based column of the comment
    end_column: int
    codes: Optional[list[str]]  # None: bare noqa
    used: set[str] = field(default_factory=set)


@dataclass
class Suppressions:
    lines: dict[int, LineNoqa] = field(default_factory=dict)
    file_all: bool = False
    file_codes: set[str] = field(default_factory=set)
    file_comments: list[tuple[int, int, int, Optional[list[str]]]] = field(default_factory=list)

    def suppresses(self, code: str, line: int) -> bool:
        if self.file_all or code in self.file_codes:
            return True
        noqa = self.lines.get(line)
        if noqa is None:
            return False
        if noqa.codes is None:
            noqa.used.add(code)
            return True
        if code in noqa.codes:
            noqa.used.add(code)
            return True
        return False


def _comments(text: str):
    """(line, column0, text, own_line) of every comment; tokenize knows strings from comments."""
    try:
        lines = text.splitlines(keepends=True)
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                line, col = tok.start
                own_line = lines[line - 1][:col].strip() == "" if line - 1 < len(lines) else True
                yield line, col, tok.string, own_line
    except (tokenize.TokenError, SyntaxError, IndentationError):
        # Fall back to a line scan for files tokenize rejects but libcst accepted.
        for number, line in enumerate(text.splitlines(), start=1):
            index = line.find("#")
            if index >= 0:
                yield number, index, line[index:], line[:index].strip() == ""


def parse(text: str) -> Suppressions:
    result = Suppressions()
    if "noqa" not in text and "NOQA" not in text.upper():
        return result
    for line, col, comment, own_line in _comments(text):
        file_match = _FILE.match(comment.strip())
        if file_match and own_line:
            codes = file_match.group("codes")
            if codes is None:
                result.file_all = True
                result.file_comments.append((line, col + 1, col + 1 + len(comment), None))
            else:
                parsed = [c.upper() for c in _CODE.findall(codes)]
                result.file_codes.update(parsed)
                result.file_comments.append((line, col + 1, col + 1 + len(comment), parsed))
            continue
        match = _LINE.search(comment)
        if match is None:
            continue
        codes = match.group("codes")
        start = col + match.start() + 1
        result.lines[line] = LineNoqa(
            line,
            start,
            col + match.end() + 1,
            None if codes is None else [c.upper() for c in _CODE.findall(codes)],
        )
    return result
