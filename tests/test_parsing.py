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


@pytest.fixture
def fast_inits(monkeypatch):
    """parse_module with the generated node inits on from the first parse."""
    from optax_lint.syntax import fast_nodes

    monkeypatch.setattr(fast_nodes, "FAST_AFTER_CHARS", 0)
    return fast_nodes


def test_fast_inits_build_the_same_tree_on_every_fixture(fast_inits) -> None:
    inits = fast_inits.for_parse(0)
    assert inits is not None and len(inits.fast) > 150  # every node class of libcst 1.x
    for path in SAMPLES:
        text = path.read_text(encoding="utf-8")
        ours, theirs = parse_module(text), cst.parse_module(text)
        assert ours.deep_equals(theirs), path
        assert ours.code == text


def test_fast_inits_last_only_as_long_as_the_parse(fast_inits) -> None:
    def dataclass_init(cls: type) -> bool:
        return cls.__dict__["__init__"].__code__.co_filename == "<string>"

    parse_module("x = f(a, *b, key=1)[0].y\n")
    with pytest.raises(cst.ParserSyntaxError):
        parse_module("def f(:\n")
    assert all(dataclass_init(cls) for cls, _ in fast_inits.for_parse(0).fast)
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")  # a node built by hand is validated as libcst does
    assert cst.Call(cst.Name("f")).deep_equals(parse_module("f()\n").body[0].body[0].value)


def test_a_process_that_parsed_little_does_not_build_them(monkeypatch) -> None:
    from optax_lint.syntax import fast_nodes

    monkeypatch.setattr(fast_nodes, "_parsed_chars", 0)
    monkeypatch.setattr(fast_nodes, "_inits", None)
    assert fast_nodes.for_parse(fast_nodes.FAST_AFTER_CHARS - 1) is None and fast_nodes._inits is None
    assert fast_nodes.for_parse(1) is not None
