"""Source positions, computed only when a file has something to report.

libcst's PositionProvider costs ~2.7x the parse, so it is never run on clean files:
a `Positions` object resolves the whole module on the first request and caches it.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .diagnostics import Span


class Positions:
    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._positions: Optional[dict] = None

    def _resolve(self) -> dict:
        if self._positions is None:
            # unsafe_skip_copy: positions must refer to the very nodes the rules hold.
            wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
            self._positions = wrapper.resolve(PositionProvider)
        return self._positions

    def span(self, node: cst.CSTNode) -> Span:
        """1-based line/column span, end exclusive; columns are characters."""
        rng = self._resolve().get(node)
        if rng is None:
            return Span(1, 1, 1, 1)
        return Span(rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1)
