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
import warnings
from typing import Optional

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .diagnostics import Span
from .extract.walker import children


_LAST_AST: list = [None, None]  # [text, tree]: the engine's syntax check and positions share one parse


def parse_ast(text: str) -> ast.Module:
    """`ast.parse`, remembering the last result: the engine checks syntax with CPython's
    parser and positions need the same tree's statement lines, so parse once."""
    if _LAST_AST[0] is text:
        return _LAST_AST[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(text)
    _LAST_AST[0], _LAST_AST[1] = text, tree
    return tree


class Positions:
    def __init__(self, module: cst.Module, text: Optional[str] = None) -> None:
        self.module = module
        self.text = text
        self._full: Optional[dict] = None
        self._owner: Optional[dict[int, int]] = None  # id(node) -> top-level statement index
        self._starts: Optional[list[int]] = None  # first code line of each top-level statement
        self._local: dict[int, dict] = {}  # statement index -> positions inside it

    # -- fallbacks ----------------------------------------------------------
    def _resolve_full(self) -> dict:
        if self._full is None:
            # unsafe_skip_copy: positions must refer to the very nodes the rules hold.
            self._full = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        return self._full

    # -- per-statement path -------------------------------------------------
    def _statement_starts(self) -> Optional[list[int]]:
        if self._starts is not None:
            return self._starts or None
        self._starts = []
        if self.text is None:
            return None
        try:
            tree = parse_ast(self.text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        body = tree.body
        starts = []
        cursor = 0
        for stmt in self.module.body:
            count = len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
            if cursor + count > len(body):
                return None
            first = body[cursor]
            line = first.lineno
            decorators = getattr(first, "decorator_list", None)
            if decorators:
                line = min([line] + [d.lineno for d in decorators])
            starts.append(line)
            cursor += count
        if cursor != len(body):
            return None
        self._starts = starts
        return starts

    def _owner_of(self, node: cst.CSTNode) -> Optional[int]:
        """Index of the top-level statement holding `node`. Statements are mapped one at
        a time, in order, only until the node is found."""
        if self._owner is None:
            self._owner = {}
            self._mapped = 0
        key = id(node)
        found = self._owner.get(key)
        body = self.module.body
        while found is None and self._mapped < len(body):
            index = self._mapped
            owner = self._owner
            stack = [body[index]]
            while stack:  # order does not matter here: a plain stack walk
                current = stack.pop()
                owner[id(current)] = index
                stack.extend(children(current))
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

    def _local_span(self, node: cst.CSTNode) -> Optional[Span]:
        starts = self._statement_starts()
        if starts is None:
            return None
        index = self._owner_of(node)
        if index is None:
            return None
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
