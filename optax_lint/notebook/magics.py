"""IPython syntax in a code cell, replaced by placeholder lines that Python parses.

A cell may hold IPython-only lines: line magics (`%matplotlib inline`), shell escapes
(`!nvidia-smi`, `files = !ls`), help (`optax.adamw?`), autocall escapes (`/f x`),
`pip install ...` run by IPython's automagic without its `%`, and a
cell magic on its first line, or after the comment lines of a Colab form (`%%bash`). Each such line becomes a placeholder on the
same line (`pass` with its indentation, so a block whose only statement was a magic
stays a block), so line numbers never shift. A line counts as IPython syntax only at
the start of a logical line: `%` opening a continuation line inside brackets is
Python's modulo, and `!` inside a triple-quoted string is text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Cell magics whose body is Python (IPython runs it as code); any other cell magic
# (%%bash, %%writefile, %%html, ...) makes the whole cell foreign text.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "memit", "snakeviz", "tensorflow_version"})

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_ESCAPE = re.compile(r"[ \t]*(?:[%!]|\?|/(?=\w)|[,;](?=\w))")  # magic, shell, help prefix, autocall
_ASSIGN = re.compile(r"[ \t]*[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*=[ \t]*[%!]")  # x = !ls, x = %env A
# IPython's automagic runs these without their `%` (`pip install -U jax`); two names side
# by side are never Python, so the line is IPython's.
_AUTOMAGIC = re.compile(r"[ \t]*(?:pip|conda|mamba)[ \t]+(?:install|uninstall|download|list|show|freeze|update|remove|create)\b")
_HELP_SUFFIX = re.compile(r"[ \t]*[\w.\[\]()'\"]+\?{1,2}[ \t]*")  # optax.adamw?  x.shape??
_CELL_MAGIC = re.compile(r"%%(\w+)")
# What the scanner stops at: outside strings, and inside each kind of string.
_CODE_CHARS = re.compile(r"[#'\"()\[\]{}\\]")
_STRING_END = {q: re.compile(r"\\.|" + re.escape(q)) for q in ("'", '"', "'''", '"""')}


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split exactly where Python counts lines."""
    lines, start = [], 0
    for m in _LINE_BREAK.finditer(text):
        lines.append(text[start:m.end()])
        start = m.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


@dataclass
class CellCode:
    """A cell's text as Python: same number of lines, IPython lines replaced."""

    text: str
    placeholders: list[int] = field(default_factory=list)  # 0-based lines that are not the user's Python
    foreign: bool = False  # the whole cell is another language (a non-Python cell magic)


def _ending(line: str) -> str:
    body = line.rstrip("\r\n")
    return line[len(body):]


def _placeholder(line: str, blank: bool = False) -> str:
    if blank:
        return _ending(line)
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    return indent + "pass" + _ending(line)


def is_ipython_line(line: str) -> bool:
    body = line.rstrip("\r\n")
    return bool(_ESCAPE.match(body) or _ASSIGN.match(body) or _AUTOMAGIC.match(body) or _HELP_SUFFIX.fullmatch(body))


class _Scanner:
    """Tracks brackets, strings and backslash continuations across physical lines."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote = ""  # the open string's delimiter: ' " ''' \"\"\"
        self.continued = False

    @property
    def at_logical_start(self) -> bool:
        return self.depth == 0 and not self.quote and not self.continued

    def feed(self, line: str) -> None:
        body = line.rstrip("\r\n")
        i, n = 0, len(body)
        self.continued = False
        while i < n:
            if self.quote:  # jump to the closing quote, skipping escapes
                m = _STRING_END[self.quote].search(body, i)
                if m is None:
                    break
                i = m.end()
                if m.group() == self.quote:
                    self.quote = ""
                continue
            m = _CODE_CHARS.search(body, i)
            if m is None:
                break
            ch, i = m.group(), m.start()
            if ch == "#":
                break
            if ch in "\"'":
                triple = body[i:i + 3]
                self.quote = triple if triple in ('"""', "'''") else ch
                i += len(self.quote)
                continue
            if ch in "([{":
                self.depth += 1
            elif ch in ")]}":
                self.depth = max(0, self.depth - 1)
            elif ch == "\\" and i == n - 1:
                self.continued = True
            i += 1
        if self.quote in ("'", '"'):  # a one-line string never spans lines (or it is an error)
            self.quote = ""


def cell_code(source: str) -> CellCode:
    """The cell as Python text with the same line count; IPython lines become placeholders."""
    lines = split_lines(source)
    out: list[str] = []
    placeholders: list[int] = []
    # The cell magic's line: the first that is neither blank nor a comment. Colab form
    # cells open with `# @title ...` / `# @param` lines and put the magic after them,
    # which Colab runs as the cell's magic.
    first = next((i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")), None)
    if first is not None:
        magic = _CELL_MAGIC.match(lines[first])
        if magic is not None:
            if magic.group(1) not in PYTHON_CELL_MAGICS:
                return CellCode("".join(_placeholder(line, blank=True) for line in lines), list(range(len(lines))), True)
    scanner = _Scanner()
    magic_continues = False
    for index, line in enumerate(lines):
        if index == first and _CELL_MAGIC.match(line):
            out.append(_placeholder(line, blank=True))
            placeholders.append(index)
            continue
        if magic_continues or (scanner.at_logical_start and is_ipython_line(line)):
            out.append(_placeholder(line, blank=magic_continues))
            placeholders.append(index)
            magic_continues = line.rstrip("\r\n").endswith("\\")  # IPython joins the next line
            continue
        scanner.feed(line)
        out.append(line)
    return CellCode("".join(out), placeholders)
