"""The code cells of a notebook as one logical module, and the way back to the cells.

Cells are concatenated in order (each ending with a newline; one is added, and later
removed, when a cell's source lacks it), so imports in cell 1 resolve in cell 5 as
they do when the notebook runs top to bottom. Every logical line belongs to exactly
one cell, which gives each finding its cell and its line within the cell.

While fixes are applied (engine.fix_text), `Layout` follows the applied text edits:
the start offset of every cell and of every placeholder line moves with them. Its
gate refuses an edit that would cross a cell boundary, change a placeholder line (an
IPython magic we replaced), or touch a cell that is not linted (a %%bash cell, a
cell with a syntax error). At the end the fixed text is cut at the tracked offsets
and the placeholders are swapped back for the original magic lines.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass, field
from typing import Optional

from optax_lint.notebook.format import RawCell
from optax_lint.notebook.magics import cell_code, split_lines


@dataclass
class CellProblem:
    number: int  # notebook cell number
    line: int  # within the cell
    column: int
    message: str


@dataclass
class _Segment:
    cell: RawCell
    start: int  # offset of the cell's first character in the logical text
    synthetic_newline: bool  # the cell's source lacked a final newline; one was added
    linted: bool  # False: a foreign cell magic or a syntax error, kept blank
    # Placeholder lines: [start, end) offsets (moved by edits) and the original line text.
    placeholders: list[list] = field(default_factory=list)


def _cell_syntax_error(text: str) -> Optional[tuple[int, int, str]]:
    """CPython's verdict on one cell alone (never compiled past the AST, never run)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as exc:
        message = (exc.msg or "invalid syntax").strip().splitlines()[0]
        return max(exc.lineno or 1, 1), max(exc.offset or 1, 1), message
    except (RecursionError, MemoryError, ValueError) as exc:
        return 1, 1, f"cannot parse: {type(exc).__name__}: {exc}"
    return None


def _whole_statements(tree: ast.Module, first_lines: list[int]) -> bool:
    """No top-level statement of `tree` starts in one cell and ends in another
    (`first_lines`: each cell's first line in the joined text, in order)."""
    cell, starts = 0, first_lines
    for statement in tree.body:
        first = min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", ())])
        last = statement.end_lineno or statement.lineno
        while cell + 1 < len(starts) and starts[cell + 1] <= first:
            cell += 1
        if cell + 1 < len(starts) and last >= starts[cell + 1]:
            return False
    return True


def _joined_tree(codes: list, cells: list[RawCell]) -> Optional[ast.Module]:
    """CPython's parse of all the cells joined, when it settles every cell alone: it
    parses, and no statement crosses from one cell into the next (a cell of whole
    statements that parse in sequence parses by itself). One parse instead of one per
    cell, and the tree serves the logical module's own syntax check. None when any cell
    is foreign or the joined text does not settle it (each cell is then parsed alone)."""
    if any(code.foreign or "\r" in code.text for code in codes):
        return None  # (a lone CR counts lines differently for CPython and split_lines)
    parts, first_lines, line = [], [], 1
    for code, cell in zip(codes, cells):
        text = code.text if cell.source.endswith(("\n", "\r")) else code.text + "\n"
        first_lines.append(line)
        line += len(split_lines(text))
        parts.append(text)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse("".join(parts))
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return None
    return tree if _whole_statements(tree, first_lines) else None


class Layout:
    def __init__(self, cells: list[RawCell]) -> None:
        self.segments: list[_Segment] = []
        self.problems: list[CellProblem] = []
        parts: list[str] = []
        offset = 0
        codes = [cell_code(cell.source) for cell in cells]
        # CPython's tree of `self.text`, when one parse of the joined cells settled them all.
        self.tree: Optional[ast.Module] = _joined_tree(codes, cells)
        for cell, code in zip(cells, codes):
            linted = not code.foreign
            text = code.text
            if linted and self.tree is None:
                error = _cell_syntax_error(text)
                if error is not None:
                    line, column, message = error
                    self.problems.append(CellProblem(cell.number, line, column, f"SyntaxError: {message}"))
                    linted = False
            originals = split_lines(cell.source)
            placeholder_lines = code.placeholders
            if not linted:  # nothing in this cell is the linted module's: blank every line
                text = "".join(_blank(line) for line in originals)
                placeholder_lines = list(range(len(originals)))
            synthetic = not cell.source.endswith(("\n", "\r"))
            if synthetic:
                text += "\n"
            segment = _Segment(cell, offset, synthetic, linted)
            lines = split_lines(text)
            starts = [0]
            for line in lines:
                starts.append(starts[-1] + len(line))
            for index in placeholder_lines:
                original = originals[index] + ("\n" if synthetic and index == len(originals) - 1 else "")
                cell_magic = linted and originals[index].startswith("%%")  # must stay the cell's first line
                segment.placeholders.append([offset + starts[index], offset + starts[index + 1], original, cell_magic])
            self.segments.append(segment)
            parts.append(text)
            offset += len(text)
        self.text = "".join(parts)
        # Insertions at a cell boundary that belong to the cell before it (see refusal).
        self._appended: set[tuple[int, str]] = set()
        self._firsts: tuple[Optional[str], list[int]] = (None, [])  # (text, first line of each segment)

    # -- mapping logical lines to cells ---------------------------------------------------

    def _first_lines(self, text: str) -> list[int]:
        """The logical line (1-based) where each segment starts, in `text`."""
        firsts, line, cursor = [], 1, 0
        for segment in self.segments:
            line += _count_lines(text, cursor, segment.start)
            cursor = segment.start
            firsts.append(line)
        return firsts

    def locate(self, text: str, line: int) -> tuple[int, int]:
        """(cell number, line within the cell) of a logical line of `text`."""
        if self._firsts[0] is not text:
            self._firsts = (text, self._first_lines(text))
        firsts = self._firsts[1]
        index = 0
        for i, first in enumerate(firsts):
            if first <= line:
                index = i
        if not self.segments:
            return 0, line
        return self.segments[index].cell.number, line - firsts[index] + 1

    def displayed(self, text: str) -> frozenset:
        """The logical lines of `text` that end a linted cell's code: a cell's last
        expression statement is shown as its output, not thrown away."""
        firsts = self._first_lines(text)
        out = set()
        for i, segment in enumerate(self.segments):
            if not segment.linted:
                continue
            end = self.segments[i + 1].start if i + 1 < len(self.segments) else len(text)
            lines = split_lines(text[segment.start:end])
            last = next((n for n in range(len(lines) - 1, -1, -1) if lines[n].strip() and not lines[n].lstrip().startswith("#")), None)
            if last is not None:
                out.add(firsts[i] + last)
        return frozenset(out)

    # -- following fixes ---------------------------------------------------------------------

    def refusal(self, text: str, start: int, end: int, replacement: str, near_line: Optional[int] = None) -> Optional[str]:
        """Why the edit [start, end) -> replacement of the logical `text` may not be applied.

        An insertion exactly at a cell boundary belongs to the next cell, unless the
        finding it fixes (`near_line`) is in the cell before: a statement added after
        the last line of a cell stays in that cell."""
        index = self._segment_at(text, start, end)
        if index is None:
            return "the fix would change more than one notebook cell; it was not applied"
        if start == end and index > 0 and start == self.segments[index].start and near_line is not None:
            before = self.segments[index - 1]
            if self.locate(text, near_line)[0] == before.cell.number and before.linted:
                index -= 1
                self._appended.add((start, replacement))
        segment = self.segments[index]
        if not segment.linted:
            return f"the fix would change cell {segment.cell.number}, which is not linted; it was not applied"
        seg_end = self.segments[index + 1].start if index + 1 < len(self.segments) else len(text)
        if end == seg_end and end > start and not replacement.endswith("\n"):
            return "the fix would join two notebook cells; it was not applied"
        for p_start, p_end, _, cell_magic in segment.placeholders:
            inside = (start < p_end and end > p_start) or (start == end and p_start < start < p_end)
            if inside or (cell_magic and start == end == p_start):
                return (
                    f"the fix would change an IPython magic or shell line in cell {segment.cell.number}; "
                    "it was not applied (edit the cell by hand)"
                )
        return None

    def _segment_at(self, text: str, start: int, end: int) -> Optional[int]:
        for i, segment in enumerate(self.segments):
            seg_end = self.segments[i + 1].start if i + 1 < len(self.segments) else len(text)
            inside = segment.start <= start < seg_end or (start == seg_end == len(text) and i == len(self.segments) - 1)
            if inside:
                return i if end <= seg_end else None
        return None

    def applied(self, edits: list[tuple[int, int, str]]) -> None:
        """Move the tracked offsets past edits that were applied together (in the text's
        coordinates before them). An insertion exactly at a cell's start belongs to that
        cell (unless refusal() gave it to the cell before); one exactly at a
        placeholder's start goes before the placeholder."""
        appended, self._appended = self._appended, set()
        for segment in self.segments:
            segment.start = _moved(segment.start, edits, lambda at, text: (at, text) in appended)
            for placeholder in segment.placeholders:
                placeholder[0] = _moved(placeholder[0], edits, lambda at, text: True)
                placeholder[1] = _moved(placeholder[1], edits, lambda at, text: False)
        self._firsts = (None, [])

    def sources(self, text: str) -> dict[int, str]:
        """Each cell's new source, from the fixed logical text: placeholders restored."""
        out = {}
        for i, segment in enumerate(self.segments):
            end = self.segments[i + 1].start if i + 1 < len(self.segments) else len(text)
            if not segment.linted:
                out[segment.cell.number] = segment.cell.source
                continue
            pieces, cursor = [], segment.start
            for p_start, p_end, original, _ in segment.placeholders:
                pieces.append(text[cursor:p_start])
                pieces.append(original)
                cursor = p_end
            pieces.append(text[cursor:end])
            source = "".join(pieces)
            if segment.synthetic_newline and source.endswith("\n"):
                source = source[:-1]
            out[segment.cell.number] = source
        return out


def _blank(line: str) -> str:
    return line[len(line.rstrip("\r\n")):]


def _count_lines(text: str, start: int, end: int) -> int:
    chunk = text[start:end]
    return chunk.count("\n") + chunk.count("\r") - chunk.count("\r\n")


def _moved(position: int, edits: list[tuple[int, int, str]], insertion_moves) -> int:
    """`position` after `edits`; `insertion_moves(at, text)` says whether an insertion
    exactly at `position` goes before it."""
    shift = 0
    for start, end, replacement in edits:
        if end < position or (end == position and (start < end or insertion_moves(start, replacement))):
            shift += len(replacement) - (end - start)
    return position + shift
