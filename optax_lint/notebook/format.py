"""The .ipynb file as text: where each code cell's source sits, and how to change it.

A fixed notebook must differ from the original only in the fixed cells' sources, so
`git diff` shows the fix and nothing else. Re-serialising the whole JSON would not
guarantee that (indentation, key order, escapes, float spellings, the final newline
all vary between Jupyter, VS Code and Colab), so the file is never re-serialised: the
JSON is scanned once, recording the character span of every code cell's `"source"`
value (and of each line string in it), and a fix splices new text into those spans
only. Unchanged lines of a changed cell keep their exact original JSON spelling.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from json.decoder import scanstring
from typing import Callable, Optional

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_NON_ASCII_ESCAPE = re.compile(r"\\u(?:00[89a-fA-F]|0[1-9a-fA-F]|[1-9a-fA-F])")


class NotebookError(Exception):
    """The file is not a notebook we can lint. `code` is OPX001 (cannot be parsed) or
    OPX003 (a format we do not read); line and column are in the JSON text."""

    def __init__(self, code: str, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.code, self.message, self.line, self.column = code, message, line, column


@dataclass
class RawCell:
    number: int  # 1-based position among all the notebook's cells (markdown too)
    source: str
    span: tuple[int, int]  # the "source" value in the JSON text
    items: Optional[list[tuple[int, int]]]  # each line string's span; None: source stored as one string


@dataclass
class RawNotebook:
    text: str
    cells: list[RawCell]  # code cells, in order
    language: Optional[str]  # kernel language when the metadata says; None if unknown


# --- scanning ----------------------------------------------------------------------------


class _Malformed(Exception):
    pass


def _skip(s: str, i: int) -> int:
    return _WS.match(s, i).end()


def _expect(s: str, i: int, ch: str) -> int:
    if i >= len(s) or s[i] != ch:
        raise _Malformed
    return i + 1


def _value(s: str, i: int) -> tuple[object, int]:
    try:
        return _DECODER.raw_decode(s, i)
    except StopIteration as exc:  # CPython's scanner signals "no value here" this way
        raise _Malformed from exc


def _object(s: str, i: int, member: Callable[[str, int], tuple[object, int]] = _value) -> tuple[dict, int]:
    """Parse the object at s[i]; `member(key, start)` parses each value."""
    out: dict = {}
    i = _skip(s, _expect(s, i, "{"))
    if s.startswith("}", i):
        return out, i + 1
    while True:
        i = _expect(s, i, '"')
        key, i = scanstring(s, i)
        i = _skip(s, _expect(s, _skip(s, i), ":"))
        out[key], i = member(key, i)
        i = _skip(s, i)
        if s.startswith("}", i):
            return out, i + 1
        i = _skip(s, _expect(s, i, ","))


def _array(s: str, i: int, element: Callable[[int], tuple[object, int]]) -> tuple[list, int]:
    out: list = []
    i = _skip(s, _expect(s, i, "["))
    if s.startswith("]", i):
        return out, i + 1
    while True:
        value, i = element(i)
        out.append(value)
        i = _skip(s, i)
        if s.startswith("]", i):
            return out, i + 1
        i = _skip(s, _expect(s, i, ","))


@dataclass
class _Located:
    """A cell's "source" value with where it lies."""

    value: object
    span: tuple[int, int]
    items: Optional[list[tuple[int, int]]]


def _source(s: str, i: int) -> tuple[_Located, int]:
    if not s.startswith("[", i):
        value, end = _value(s, i)
        return _Located(value, (i, end), None), end
    items: list[tuple[int, int]] = []

    def element(j: int) -> tuple[object, int]:
        value, end = _value(s, j)
        items.append((j, end))
        return value, end

    value, end = _array(s, i, element)
    return _Located(value, (i, end), items), end


def _cell(s: str, i: int) -> tuple[object, int]:
    if not s.startswith("{", i):
        return _value(s, i)
    return _object(s, i, lambda key, j: _source(s, j) if key == "source" else _value(s, j))


def _scan(s: str) -> dict:
    top, end = _object(s, _skip(s, 0), lambda key, j: _array(s, j, lambda k: _cell(s, k)) if key == "cells" and s.startswith("[", j) else _value(s, j))
    if _skip(s, end) != len(s):
        raise _Malformed
    return top


# --- reading -----------------------------------------------------------------------------


def _json_error(text: str) -> NotebookError:
    """The JSON parser's own message and position for a file our scanner refused."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return NotebookError("OPX001", f"invalid notebook JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", exc.lineno, exc.colno)
    except RecursionError:
        return NotebookError("OPX001", "invalid notebook: the JSON is too deeply nested to parse")
    return NotebookError("OPX001", "invalid notebook JSON: not a JSON object")


def _language(metadata: object) -> Optional[str]:
    if not isinstance(metadata, dict):
        return None
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        table = metadata.get(key)
        if isinstance(table, dict) and isinstance(table.get(field), str):
            return table[field]
    return None


def parse(text: str) -> RawNotebook:
    """Locate the code cells of an nbformat 4 notebook; NotebookError otherwise."""
    try:
        top = _scan(text)
    except (_Malformed, ValueError, IndexError):
        raise _json_error(text) from None
    except RecursionError:
        raise NotebookError("OPX001", "invalid notebook: the JSON is too deeply nested to parse") from None
    version = top.get("nbformat")
    if isinstance(version, int) and not isinstance(version, bool) and version < 4:
        raise NotebookError(
            "OPX003",
            f"not linted: an nbformat {version} notebook (optax-lint reads nbformat 4; open and save it in "
            "Jupyter, or run `jupyter nbconvert --to notebook --inplace`, to upgrade it)",
        )
    cells = top.get("cells")
    if not isinstance(cells, list):
        raise NotebookError("OPX001", 'invalid notebook: no "cells" list (is this a Jupyter notebook?)')
    found: list[RawCell] = []
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict):
            raise NotebookError("OPX001", f"invalid notebook: cell {number} is not a JSON object")
        if cell.get("cell_type") != "code":
            continue
        located = cell.get("source")
        if not isinstance(located, _Located):
            raise NotebookError("OPX001", f'invalid notebook: code cell {number} has no "source"')
        value = located.value
        if isinstance(value, list) and all(isinstance(line, str) for line in value):
            value = "".join(value)
        if not isinstance(value, str):
            raise NotebookError("OPX001", f'invalid notebook: the "source" of cell {number} is not text')
        found.append(RawCell(number, value, located.span, located.items))
    return RawNotebook(text, found, _language(top.get("metadata")))


# --- writing -----------------------------------------------------------------------------


def _ensure_ascii(text: str) -> bool:
    """Whether the file escapes non-ASCII characters (\\u00e9) rather than writing them."""
    if any(ord(ch) > 127 for ch in text):
        return False
    return _NON_ASCII_ESCAPE.search(text) is not None


def source_lines(source: str) -> list[str]:
    """nbformat's list form: each line keeps its "\\n"; the last may lack one."""
    return re.findall(r"[^\n]*\n|[^\n]+$", source)


def _indent_unit(text: str) -> str:
    m = re.search(r"\n([ \t]+)\"", text)
    return m.group(1) if m else " "


def _list_layout(text: str, cell: RawCell) -> tuple[str, str, str]:
    """(whitespace after '[', separator between items, whitespace before ']') as the file has them."""
    start, end = cell.span
    items = cell.items or []
    newline = "\r\n" if "\r\n" in text else "\n"
    if items:
        lead = text[start + 1:items[0][0]]
        close = text[items[-1][1]:end - 1]
        sep = text[items[0][1]:items[1][0]] if len(items) > 1 else "," + lead
        return lead, sep, close
    # An empty list: indent one level deeper than the line holding "source".
    line_start = text.rfind("\n", 0, start) + 1
    key_indent = re.match(r"[ \t]*", text[line_start:]).group(0)
    lead = newline + key_indent + _indent_unit(text)
    return lead, "," + lead, newline + key_indent


def _render_source(text: str, cell: RawCell, source: str, ascii_only: bool) -> str:
    if cell.items is None:
        return json.dumps(source, ensure_ascii=ascii_only)
    lines = source_lines(source)
    if not lines:
        return "[]"
    spelled: dict[str, str] = {}  # an unchanged line keeps its original JSON spelling
    for a, b in cell.items:
        spelled.setdefault(json.loads(text[a:b]), text[a:b])
    lead, sep, close = _list_layout(text, cell)
    return "[" + lead + sep.join(spelled.get(line) or json.dumps(line, ensure_ascii=ascii_only) for line in lines) + close + "]"


def replace_sources(nb: RawNotebook, sources: dict[int, str]) -> str:
    """The notebook text with the given cells' sources (by cell number) replaced."""
    ascii_only = _ensure_ascii(nb.text)
    out, cursor = [], 0
    for cell in nb.cells:
        if cell.number not in sources or sources[cell.number] == cell.source:
            continue
        start, end = cell.span
        out.append(nb.text[cursor:start])
        out.append(_render_source(nb.text, cell, sources[cell.number], ascii_only))
        cursor = end
    out.append(nb.text[cursor:])
    return "".join(out)
