"""Source positions, computed only for what is reported.

libcst's PositionProvider runs codegen over the whole module, about 2.7x the parse,
which would triple the cost of every file with a single finding. Instead, a node's
position is computed inside its top-level statement only: that statement alone is
wrapped in a scratch Module (same node objects, so identities hold) and resolved,
then shifted by the line where the statement starts, which CPython's `ast` gives for
~0.06x the parse. Top-level statements have no indentation, so columns carry over
unchanged. Anything unusual (a file `ast` cannot parse, a node outside every
statement) falls back to resolving the whole module once.
"""

from __future__ import annotations

import ast
import re
from typing import Optional

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from optax_lint.core.diagnostics import Span
from optax_lint.syntax.parsing import first_line, parse_ast
from optax_lint.syntax.walker import children


class Positions:
    """`tree`: CPython's parse of `text` when the caller has it (the engine's syntax
    check made it), else parsed here on first need."""

    def __init__(self, module: cst.Module, text: Optional[str] = None, tree: Optional[ast.Module] = None,
                 raw=None) -> None:
        self.module = module
        self.text = text
        self._tree = tree
        # The walker's RawFacts of this very module (where its calls and statements sit):
        # a shortcut past the walk in _owner_of; records of another tree are no use.
        self._raw = raw if raw is not None and raw.module is module else None
        self._lines: Optional[dict[int, tuple[cst.SimpleStatementLine, int]]] = None
        self._tops: Optional[dict[int, int]] = None
        self._top_ast: list[ast.stmt] = []  # CPython's statement paired with each top-level one
        self._source_lines: Optional[list[str]] = None
        self._full: Optional[dict] = None
        self._owner: Optional[dict[int, int]] = None  # id(node) -> top-level statement index
        self._starts: Optional[list[int]] = None  # first code line of each top-level statement
        self._local: dict[int, dict] = {}  # statement index -> positions inside it
        self._simple: dict[int, cst.BaseStatement] = {}  # id(node) -> innermost enclosing statement
        self._simple_at: dict[int, Optional[dict]] = {}  # top-level index -> {id(statement): (lineno, indent)}
        self._simple_local: dict[int, dict] = {}  # id(statement) -> positions inside that statement alone

    def release(self) -> None:
        """Drop what was resolved (see ModuleFacts.release)."""
        self.__dict__.clear()

    # -- fallbacks ----------------------------------------------------------
    def _resolve_full(self) -> dict:
        if self._full is None:
            # unsafe_skip_copy: positions must refer to the very nodes the rules hold.
            self._full = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        return self._full

    # -- per-statement path -------------------------------------------------
    def _ast(self) -> ast.Module:
        if self._tree is None:
            self._tree = parse_ast(self.text)
        return self._tree

    def _statement_starts(self) -> Optional[list[int]]:
        if self._starts is not None:
            return self._starts or None
        self._starts = []
        if self.text is None:
            return None
        try:
            tree = self._ast()
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        body = tree.body
        starts = []
        paired: list[ast.stmt] = []
        cursor = 0
        for stmt in self.module.body:
            count = len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
            if cursor + count > len(body):
                return None
            starts.append(first_line(body[cursor]))
            paired.append(body[cursor])
            cursor += count
        if cursor != len(body):
            return None
        self._starts = starts
        self._top_ast = paired
        return starts

    def _top_index(self) -> dict[int, int]:
        if self._tops is None:
            self._tops = {id(stmt): i for i, stmt in enumerate(self.module.body)}
        return self._tops

    def _recorded_lines(self) -> dict[int, tuple[cst.SimpleStatementLine, int]]:
        """id(node) -> (its statement line, top-level index) for the calls the walker
        recorded, their callees and their arguments (most reported nodes), when the call
        sits in a statement line: one pass over the calls instead of a walk over every
        node before the reported one. The line's top-level statement comes from the
        walker's statement parents; a chain that does not reach the module is left out."""
        if self._lines is None:
            self._lines = {}
            raw = self._raw
            if raw is not None:
                top_index = self._top_index()
                parents = raw.parent_stmt
                tops: dict[int, Optional[int]] = {}
                for record in raw.calls:
                    line = record.statement
                    if type(line) is not cst.SimpleStatementLine:
                        continue
                    index = tops.get(id(line), -1)
                    if index == -1:
                        index = tops[id(line)] = _top_of(line, parents, top_index)
                    if index is None:
                        continue
                    call = record.node
                    self._lines[id(call)] = self._lines[id(call.func)] = (line, index)
                    for arg in call.args:
                        self._lines[id(arg.value)] = (line, index)
        return self._lines

    def _owner_of(self, node: cst.CSTNode) -> Optional[int]:
        """Index of the top-level statement holding `node`. Statements are mapped one at
        a time, in order, only until the node is found; each node also records its
        innermost enclosing statement (a line, or a compound statement of a block)."""
        if self._owner is None:
            self._owner = {}
            self._mapped = 0
        key = id(node)
        found = self._owner.get(key)
        if found is None:
            recorded = self._recorded_lines().get(key)
            if recorded is not None:
                line, index = recorded
                self._simple[key] = line
                return index
            if type(node) in _OWN_STATEMENTS and self._raw is not None:
                # A statement (a `with` block, a def) is its own innermost statement; the
                # walker's statement parents lead to its top-level one. (`if` is left to
                # the walk: an `elif` belongs to the statement above it.)
                index = _top_of(node, self._raw.parent_stmt, self._top_index())
                if index is not None:
                    self._simple[key] = node
                    return index
        body = self.module.body
        while found is None and self._mapped < len(body):
            index = self._mapped
            owner, inner_of = self._owner, self._simple
            elifs: set[int] = set()  # `elif` is an If inside an If, not a statement of a block
            stack = [(body[index], None)]
            while stack:  # order does not matter here: a plain stack walk
                current, inner = stack.pop()
                owner[id(current)] = index
                if isinstance(current, _STATEMENTS) and id(current) not in elifs:
                    inner = current
                    if isinstance(current, cst.If) and current.orelse is not None:
                        elifs.add(id(current.orelse))
                if inner is not None:
                    inner_of[id(current)] = inner
                stack.extend((child, inner) for child in children(current))
            self._mapped += 1
            found = owner.get(key)
        return found

    def _local_positions(self, index: int) -> dict:
        positions = self._local.get(index)
        if positions is None:
            stmt = self.module.body[index]
            scratch = cst.Module(
                body=[stmt],
                default_indent=self.module.default_indent,
                default_newline=self.module.default_newline,
            )
            positions = MetadataWrapper(scratch, unsafe_skip_copy=True).resolve(PositionProvider)
            self._local[index] = positions
        return positions

    # -- per-statement path: a node inside a nested statement ----------------------
    # Resolving the whole top-level statement costs a codegen of all of it (a 200-line
    # `def train()`, or a 3000-line test class, for one finding); the innermost statement
    # holding the node is enough: a simple statement line, or a compound statement of a
    # block (`with self.assertRaises(...):`, an `if` and its body). It is resolved inside a
    # scratch `if _:` block indented exactly as it is in the file (the enclosing blocks'
    # indents joined), so every column comes out as in the file; its first line comes
    # from the matching `ast` statement.
    def _simple_lines(self, index: int) -> Optional[dict]:
        if index not in self._simple_at:
            found: dict = {}
            tree_body = self._ast().body
            starts_at = sum(len(s.body) if isinstance(s, cst.SimpleStatementLine) else 1 for s in self.module.body[:index])
            stmt = self.module.body[index]
            ok = not isinstance(stmt, cst.SimpleStatementLine) and _pair_block(
                [stmt], tree_body[starts_at:starts_at + 1], found, "", self.module.default_indent
            )
            self._simple_at[index] = found if ok else None
        return self._simple_at[index]

    def _line_span(self, node: cst.CSTNode, index: int) -> Optional[Span]:
        line = self._simple.get(id(node))
        if line is None or line is self.module.body[index]:
            return None
        where = (self._simple_lines(index) or {}).get(id(line))
        if where is None:
            return None
        lineno, indent, _ = where
        positions = self._simple_local.get(id(line))
        if positions is None:
            holder = cst.If(test=cst.Name("_"), body=cst.IndentedBlock(body=[line], indent=indent))  # type: ignore[list-item]
            scratch = cst.Module(body=[holder], default_indent=self.module.default_indent,
                                 default_newline=self.module.default_newline)
            positions = self._simple_local[id(line)] = MetadataWrapper(scratch, unsafe_skip_copy=True).resolve(PositionProvider)
        rng = positions.get(node)
        if rng is None:
            return None
        shift = lineno - (2 + len(line.leading_lines))  # the `if _:` line, then the leading lines
        return Span(rng.start.line + shift, rng.start.column + 1, rng.end.line + shift, rng.end.column + 1)

    # -- a def or class reported whole: its span from CPython's tree ------------------
    # libcst places a def or class from its `def`/`class` keyword (after any decorators)
    # to the end of its last statement, which is exactly CPython's (lineno, col_offset,
    # end_lineno, end_col_offset); CPython counts columns in UTF-8 bytes, libcst in
    # characters. This spares a codegen of the whole body for one span.
    def _def_span(self, node: cst.CSTNode, index: int) -> Optional[Span]:
        if node is self.module.body[index]:
            tree_node = self._top_ast[index] if index < len(self._top_ast) else None
        else:
            where = (self._simple_lines(index) or {}).get(id(node))
            tree_node = where[2] if where is not None else None
        expected = (ast.ClassDef,) if type(node) is cst.ClassDef else (ast.FunctionDef, ast.AsyncFunctionDef)
        if not isinstance(tree_node, expected) or tree_node.name != node.name.value:  # type: ignore[attr-defined]
            return None
        end_line, end_col = tree_node.end_lineno, tree_node.end_col_offset
        if end_line is None or end_col is None:
            return None
        return Span(tree_node.lineno, self._chars(tree_node.lineno, tree_node.col_offset) + 1,
                    end_line, self._chars(end_line, end_col) + 1)

    def _chars(self, line: int, offset: int) -> int:
        """A UTF-8 byte offset on a 1-based line, in characters."""
        if self._source_lines is None:
            self._source_lines = _NEWLINES.split(self.text or "")
        text = self._source_lines[line - 1] if 0 < line <= len(self._source_lines) else ""
        return len(text.encode("utf-8", "surrogatepass")[:offset].decode("utf-8", "replace"))

    def _local_span(self, node: cst.CSTNode) -> Optional[Span]:
        starts = self._statement_starts()
        if starts is None:
            return None
        index = self._owner_of(node)
        if index is None:
            return None
        if type(node) in _DEFS:
            whole = self._def_span(node, index)
            if whole is not None:
                return whole
        nested = self._line_span(node, index)
        if nested is not None:
            return nested
        rng = self._local_positions(index).get(node)
        if rng is None:
            return None
        stmt = self.module.body[index]
        # In the scratch module the statement's leading blank/comment lines come first.
        shift = starts[index] - 1 - len(stmt.leading_lines)
        return Span(rng.start.line + shift, rng.start.column + 1, rng.end.line + shift, rng.end.column + 1)

    def span(self, node: cst.CSTNode) -> Span:
        """1-based line/column span, end exclusive; columns are characters."""
        local = self._local_span(node)
        if local is not None:
            return local
        rng = self._resolve_full().get(node)
        if rng is None:
            return Span(1, 1, 1, 1)
        return Span(rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1)


_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)
_DEFS = frozenset({cst.FunctionDef, cst.ClassDef})
_NEWLINES = re.compile(r"\r\n|\r|\n")  # CPython's line breaks (not str.splitlines's \f, \v, ...)
_OWN_STATEMENTS = frozenset({cst.SimpleStatementLine, cst.FunctionDef, cst.ClassDef, cst.With, cst.For, cst.While, cst.Try})


def _top_of(stmt: cst.CSTNode, parents: dict, top_index: dict[int, int]) -> Optional[int]:
    """Index of the top-level statement above `stmt`, through the walker's statement
    parents; None when the chain breaks."""
    while stmt is not None:
        index = top_index.get(id(stmt))
        if index is not None:
            return index
        stmt = parents.get(stmt)
    return None


def _pair_block(statements, nodes: list, found: dict, indent: str, unit: str) -> bool:
    """Match libcst statements with their `ast` statements, recording each nested
    statement's (first line, indentation). False on any disagreement."""
    cursor = 0
    for stmt in statements:
        if isinstance(stmt, cst.SimpleStatementLine):
            if cursor + len(stmt.body) > len(nodes):
                return False
            found[id(stmt)] = (nodes[cursor].lineno, indent, None)
            cursor += len(stmt.body)
            continue
        if cursor >= len(nodes):
            return False
        found[id(stmt)] = (first_line(nodes[cursor]), indent, nodes[cursor])
        if not _pair_compound(stmt, nodes[cursor], found, indent, unit):
            return False
        cursor += 1
    return cursor == len(nodes)


def _pair_suite(block, nodes: list, found: dict, indent: str, unit: str) -> bool:
    if not isinstance(block, cst.IndentedBlock):
        return True  # `if x: y` on one line: its small statements belong to the header line
    inner = indent + (block.indent if block.indent is not None else unit)
    return _pair_block(list(block.body), nodes, found, inner, unit)


_COMPOUND = {
    cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef), cst.ClassDef: (ast.ClassDef,),
    cst.If: (ast.If,), cst.For: (ast.For, ast.AsyncFor), cst.While: (ast.While,),
    cst.With: (ast.With, ast.AsyncWith), cst.Try: (ast.Try,),
}


def _pair_compound(stmt, node, found: dict, indent: str, unit: str) -> bool:
    expected = _COMPOUND.get(type(stmt))
    if expected is None:
        return True  # match, try*, ...: one statement, not descended (the top-level path serves it)
    if not isinstance(node, expected):
        return False
    if not _pair_suite(stmt.body, node.body, found, indent, unit):
        return False
    if isinstance(stmt, cst.If):
        orelse = stmt.orelse
        if orelse is None:
            return not node.orelse
        if isinstance(orelse, cst.If):
            return len(node.orelse) == 1 and _pair_compound(orelse, node.orelse[0], found, indent, unit)
        return _pair_suite(orelse.body, node.orelse, found, indent, unit)
    if isinstance(stmt, (cst.For, cst.While)):
        if stmt.orelse is None:
            return not node.orelse
        return _pair_suite(stmt.orelse.body, node.orelse, found, indent, unit)
    if isinstance(stmt, cst.Try):
        if len(stmt.handlers) != len(node.handlers):
            return False
        if (stmt.orelse is None) != (not node.orelse) or (stmt.finalbody is None) != (not node.finalbody):
            return False
        return all(_pair_suite(h.body, a.body, found, indent, unit) for h, a in zip(stmt.handlers, node.handlers)) and (
            stmt.orelse is None or _pair_suite(stmt.orelse.body, node.orelse, found, indent, unit)
        ) and (stmt.finalbody is None or _pair_suite(stmt.finalbody.body, node.finalbody, found, indent, unit))
    return True
