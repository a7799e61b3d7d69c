"""The lint's libcst parse skips libcst's per-node validation: the tree must be the one
`libcst.parse_module` builds, and validation must be back on for nodes built by hand."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from optax_lint.syntax.parsing import parse_module

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted(p for p in (ROOT / "fixtures").glob("*/*.py"))


def test_same_tree_as_libcst_on_every_fixture() -> None:
    assert len(SAMPLES) > 300
    for path in SAMPLES:
        text = path.read_text(encoding="utf-8")
        ours, theirs = parse_module(text), cst.parse_module(text)
        assert ours.deep_equals(theirs), path
        assert ours.code == text


def test_validation_is_back_after_a_parse_and_after_a_failed_one() -> None:
    parse_module("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")
    with pytest.raises(cst.ParserSyntaxError):
        parse_module("def f(:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")
