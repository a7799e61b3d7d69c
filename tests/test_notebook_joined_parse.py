"""The notebook layout parses the joined cells once when that settles every cell
(notebook/layout.py `_joined_tree`), and falls back to one parse per cell when a
statement crosses a cell boundary or the joined text does not parse: the cells that
fail alone are reported and blanked exactly as before."""

from __future__ import annotations

import pytest

from optax_lint.notebook.format import RawCell
from optax_lint.notebook.layout import Layout


def _layout(*sources: str) -> Layout:
    return Layout([RawCell(i + 1, s, (0, 0), None) for i, s in enumerate(sources)])


def test_cells_of_whole_statements_are_parsed_once() -> None:
    layout = _layout("import optax\n", "@jax.jit\ndef step(x):\n    return x\n", "tx = optax.adam(1e-3)")
    assert layout.tree is not None
    assert [type(s).__name__ for s in layout.tree.body] == ["Import", "FunctionDef", "Assign"]
    assert layout.problems == []


@pytest.mark.parametrize(
    "cells, failing",
    [
        (("x = (1,\n", "2)\n"), [1, 2]),  # a bracket left open: each cell fails alone
        (("def f():\n", "    return 1\n"), [1, 2]),  # a body in the next cell
        (("@jax.jit\n", "def step(x):\n    return x\n"), [1]),  # a decorator alone
        (("x = 1 \\\n", "+ 2\n"), [1]),  # a backslash continuation (`+ 2` alone is a unary plus)
        (("import optax\n", "tx = optax.adam(\n"), [2]),  # the joined text does not parse
    ],
    ids=["bracket", "body", "decorator", "backslash", "broken"],
)
def test_a_statement_across_cells_falls_back_to_each_cell(cells, failing) -> None:
    layout = _layout(*cells)
    assert layout.tree is None
    assert [p.number for p in layout.problems] == failing


def test_foreign_cell_falls_back() -> None:
    layout = _layout("%%bash\necho hi\n", "import optax\n")
    assert layout.tree is None and layout.problems == []
