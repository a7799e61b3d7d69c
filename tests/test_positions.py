"""Per-statement positions must agree exactly with libcst's whole-module PositionProvider."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from optax_lint.syntax.positions import Positions
from optax_lint.syntax.walker import collect, walk

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted(p for p in (ROOT / "fixtures").glob("OPX1*/*.py") if not p.name.endswith(".fixed.py"))[:12]

TRICKY = '''\
# header comment

import optax  # trailing


@decorator(1)

@other
def f(x,
      y):  # comment
    return optax.chain(
        optax.adam(1e-3),  # é ünïcode
    )
a = 1; b = optax.sgd(0.1)
if True: c = optax.adam(2e-3)
class K:
    """doc"""
    tx = optax.adamw(1e-3)
'''

NESTED = '''\
import optax


class Trainer:
  """Two-space indentation, as in many JAX codebases."""

  def make(self, cfg):
    # a comment line before the statement
    if cfg.kind == "adam":
      tx = optax.adam(  # first line
          learning_rate=cfg.lr,
          b1=0.9)
    elif cfg.kind == "é":
      tx = optax.sgd(cfg.lr); extra = optax.adamw(1e-3)
    else:
      for i in range(3):
        while i:
          i -= 1
        else:
          pass
      else:
        tx = optax.chain(optax.clip(1.0),
                         optax.adam(1e-3))
    try:
      with open("x") as f:
        data = f.read(); y = optax.sgd(0.1)
    except (OSError, ValueError) as exc:
      raise RuntimeError(str(exc)) from exc
    except Exception:
      pass
    else:
      z = optax.adam(1e-4)
    finally:
      done = optax.sgd(1e-2)
    match cfg.kind:
      case "x":
        m = optax.adam(1e-5)
    async def inner():
      async for q in things():
        await optax.go(q)
    return tx
'''


# Defs and classes whose last line holds non-ASCII text: CPython's end column counts
# UTF-8 bytes, libcst's characters (a def reported whole is placed from CPython's tree).
UNICODE_DEFS = '''\
import optax


@decorator(
    "ß",
)
def label(p):
    return "décroissance"  # ü


class Ünïcode:
    def make(self):
        if self:
            def inner():
                return optax.adam(1e-3), "naïve"
            return inner
tail = "ä"
'''


def _expected(module):
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


@pytest.mark.parametrize("text", [TRICKY, TRICKY.replace("\n", "\r\n"), NESTED, NESTED.replace("  ", "\t"),
                                  UNICODE_DEFS, UNICODE_DEFS.replace("\n", "\r")]
                         + [p.read_text() for p in SAMPLES])
def test_local_positions_match_provider(text: str) -> None:
    module = cst.parse_module(text)
    expected = _expected(module)
    positions = Positions(module, text)
    checked = 0
    for stmt in module.body:
        for node in walk(stmt):
            if isinstance(node, (cst.Call, cst.Name, cst.Arg, cst.BaseStatement, cst.BaseSuite, cst.Decorator)):
                rng = expected[node]
                span = positions.span(node)
                assert (span.line, span.column, span.end_line, span.end_column) == (
                    rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1
                ), cst.Module([]).code_for_node(node)[:60]
                checked += 1
    assert checked > 5
    assert positions._full is None  # never fell back to the whole-module provider


@pytest.mark.parametrize("text", [TRICKY, NESTED, NESTED.replace("  ", "\t")] + [p.read_text() for p in SAMPLES])
def test_calls_placed_through_the_walkers_records_match_provider(text: str) -> None:
    """With the walker's records, a call, its callee and its arguments in a statement
    line, and a statement itself, are placed without walking the statements before
    them; every other node (calls in a header, a one-line suite, a decorator; an `if`)
    still takes the walk. Asked first, on a fresh Positions, so the shortcut is what
    answers."""
    module = cst.parse_module(text)
    expected = _expected(module)
    raw = collect(module)
    positions = Positions(module, text, raw=raw)
    nodes = [n for r in raw.calls for n in (r.node, r.node.func, *(a.value for a in r.node.args))]
    nodes += [n for stmt in module.body for n in walk(stmt) if isinstance(n, cst.BaseStatement)]
    for node in reversed(nodes):  # the last statements first: a walk would map everything before
        rng = expected[node]
        span = positions.span(node)
        assert (span.line, span.column, span.end_line, span.end_column) == (
            rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1
        ), cst.Module([]).code_for_node(node)[:60]
    assert positions._recorded_lines(), "no call was placed through the records"
    assert positions._full is None


def test_fallback_when_ast_cannot_parse() -> None:
    text = "import optax\ntype Alias = int\ntx = optax.adam(1e-3)\n"  # 3.12 syntax
    module = cst.parse_module(text)
    call = module.body[2].body[0].value
    span = Positions(module, text).span(call)
    assert (span.line, span.column) == (3, 6)


def test_nested_lines_are_resolved_alone_not_with_their_whole_function() -> None:
    module = cst.parse_module(NESTED)
    positions = Positions(module, NESTED)
    calls = [n for n in walk(module) if isinstance(n, cst.Call)]
    expected = _expected(module)
    for call in calls:
        rng = expected[call]
        span = positions.span(call)
        assert (span.line, span.column) == (rng.start.line, rng.start.column + 1)
    assert len(positions._simple_local) >= 6  # one small codegen per line holding a call
    assert positions._local.keys() <= {1}  # only `match` and `async for` needed the whole class


def test_nested_compound_statements_are_resolved_alone() -> None:
    """A `with` block inside a test class (what the written-to-fail filter asks for) is
    resolved alone, not with the whole class."""
    module = cst.parse_module(NESTED)
    expected = _expected(module)
    positions = Positions(module, NESTED)
    compound = [n for n in walk(module.body[1]) if isinstance(n, (cst.With, cst.If, cst.For, cst.While, cst.Try,
                                                                     cst.FunctionDef, cst.IndentedBlock))]
    assert len(compound) > 10
    for node in compound:
        if node is module.body[1].body.body[1]:
            continue  # `def make`, the class's statement: resolved inside the class
        rng = expected[node]
        span = positions.span(node)
        assert (span.line, span.column, span.end_line, span.end_column) == (
            rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1
        ), type(node).__name__
    assert positions._local.keys() <= {1}
    assert not positions._local or all(id(n) in positions._simple_local for n in compound if isinstance(n, cst.With))


def test_decorated_nested_function_is_placed_past_its_decorators() -> None:
    text = "class T:\n\n    # leading\n    @staticmethod\n    @other(\n        1)\n    def f():\n        return 1\n"
    module = cst.parse_module(text)
    method = module.body[0].body.body[0]
    positions = Positions(module, text)
    span = positions.span(method)
    rng = _expected(module)[method]
    assert (span.line, span.end_line) == (rng.start.line, rng.end.line) == (7, 8)  # libcst starts a function at `def`
    assert 0 not in positions._local  # the class was not resolved whole
