"""Large files: libcst parses only the top-level statements the prefilter flags (engine/large.py)."""

from __future__ import annotations

import ast
import textwrap

from optax_lint.engine import lint
from optax_lint.engine.large import flagged_text
from optax_lint.rules import registry

TEXT = textwrap.dedent(
    """\
    import math
    import optax


    @decorator(
        1)
    def helper(x):
        # a comment inside
        return math.sqrt(x)
        # trailing, indented comment


    TABLE = {"a": 1,
             "b": 2}
    a = 1; tx = optax.sgd(0.1)


    def make():
        return optax.chain(optax.adamw(1e-3), optax.clip_by_global_norm(1.0))
    """
)


def test_unflagged_statements_become_blank_lines_and_lines_keep_their_numbers() -> None:
    codes = set(registry.family_packages())
    reduced = flagged_text(TEXT, ast.parse(TEXT), codes)
    assert reduced is not None
    before, after = TEXT.splitlines(), reduced.splitlines()
    assert len(before) == len(after)
    for number, (old, new) in enumerate(zip(before, after), start=1):
        if number in (4, 5, 6, 7, 8, 9, 13, 14):  # the decorated helper and TABLE
            assert new == "", (number, new)
        else:
            assert new == old, number  # imports, comments between statements, a line shared with a flagged statement
    ast.parse(reduced)


def test_nothing_to_drop_gives_none() -> None:
    text = "import optax\ntx = optax.sgd(0.1)\n"
    assert flagged_text(text, ast.parse(text), set(registry.family_packages())) is None


def test_large_file_lint_finds_what_the_whole_parse_finds() -> None:
    codes = set(registry.family_packages())
    whole = lint.lint_text(TEXT, "t.py", codes)
    reduced = lint.lint_text(TEXT, "t.py", codes, large_file_bytes=10)
    assert [(f.code, f.span.line, f.span.column) for f in whole.findings] == [
        (f.code, f.span.line, f.span.column) for f in reduced.findings
    ]
    assert any(f.code == "OPX101" and f.span.line == 19 for f in reduced.findings)
    assert "TABLE" not in reduced.module.code and "TABLE" in whole.module.code
