"""Data a file makes up instead of loading: random draws (`jax.random.randint`,
`rng.rand`), synthetic sets (a `fake_data` module's generator, scikit-learn's `make_*`),
a paragraph written into the file, a few literal rows. The purpose reader (purpose.py)
asks these to tell a demo or a smoke test from a training run."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.facts.context.evidence import code_text, last_name
from optax_lint.syntax.names import lookup, qualified_name
from optax_lint.syntax.walker import Scope

LITERAL_ARRAYS = frozenset({"array", "asarray", "ones", "zeros", "full", "arange", "linspace", "normal", "uniform", "randint"})
TOY_ELEMENTS = 4096  # array elements: a few literal rows of data
RANDOM_DRAWS = frozenset({"randint", "normal", "uniform", "bernoulli", "categorical", "truncated_normal", "rand", "randn", "integers"})
TOY_TEXT = 8000  # characters: a paragraph or a poem written into a tutorial


def single_value(name: cst.BaseExpression, scope: Scope) -> Optional[cst.BaseExpression]:
    if not isinstance(name, cst.Name):
        return None
    _, bindings = lookup(name.value, scope)
    if len(bindings) != 1 or bindings[0].kind not in ("assign", "annassign", "unpack"):
        return None
    return bindings[0].value  # `batches, vocab = make_batches(...)`: the call, for either name


def written_text_size(expr: Optional[cst.BaseExpression], scope: Scope, depth: int = 3) -> Optional[int]:
    """The length of a string literal of several lines (`TEXT`, `TEXT * 20` counts the
    text once), through names assigned once."""
    if isinstance(expr, cst.Name) and depth > 0:
        return written_text_size(single_value(expr, scope), scope, depth - 1)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        for side in (expr.left, expr.right):
            size = written_text_size(side, scope, depth)
            if size is not None:
                return size
        return None
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        value = expr.evaluated_value
        return len(value) if isinstance(value, str) and value.count("\n") >= 3 else None
    return None


def root_object(expr: cst.BaseExpression) -> Optional[cst.Name]:
    """The name a chain of slices, attributes and method calls starts from
    (`df.drop(columns=["y"]).values` -> `df`)."""
    while True:
        if isinstance(expr, (cst.Subscript, cst.Attribute)):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        else:
            return expr if isinstance(expr, cst.Name) else None


# Generators of synthetic data: a project's fake-data module, scikit-learn's make_* sets.
SYNTHETIC = re.compile(r"(^|[._])(fake|synthetic|dummy)([._]|$)|^sklearn\.datasets\.make_", re.IGNORECASE)


def synthetic_data(call: cst.Call, scope: Scope) -> bool:
    """`generate_classification_data()` from a `fake_data` module, `make_moons(...)`."""
    qual = qualified_name(call.func, scope)
    return bool(qual) and SYNTHETIC.search(qual) is not None


def random_draw(call: cst.Call) -> bool:
    """`jax.random.randint(...)`, `np.random.normal(...)`, `rng.integers(...)`: random data."""
    if last_name(call.func) not in RANDOM_DRAWS:
        return False
    text = code_text(call.func)
    return "random" in text or "rng" in text


class Parts(cst.CSTVisitor):
    """What an in-loop batch expression is built from: the names sliced or indexed
    (`input_ids[i:j]`), every other name, lambda parameters, and whether it draws
    random numbers itself."""

    def __init__(self) -> None:
        self.sliced: list[cst.Name] = []
        self.names: list[cst.Name] = []
        self.lambda_params: set[str] = set()
        self.calls_random = False

    def visit_Subscript(self, node: cst.Subscript) -> None:
        keyed = len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) and isinstance(
            node.slice[0].slice.value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))
        if isinstance(node.value, cst.Name) and not keyed:  # `specs["data"]` looks a value up, slices no data
            self.sliced.append(node.value)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.lambda_params.update(p.name.value for p in node.params.params)

    def visit_Call(self, node: cst.Call) -> None:
        self.calls_random = self.calls_random or random_draw(node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # `jax.tree.map`: the root name only, not the attribute names
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node)


class RandomCalls(cst.CSTVisitor):
    """The random draws (`jax.random.randint`, `np.random.normal`, `rng.integers`) and the
    names in an expression."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.random = False
        self.names: list[cst.Name] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.random = self.random or random_draw(node)

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node)


def small_literal_array(call: cst.Call) -> bool:
    """`jnp.array([[1, 2], [3, 4]])`, `jnp.ones((4, 2))`: a few literal rows of data."""
    if last_name(call.func) not in LITERAL_ARRAYS or not call.args:
        return False
    for arg in call.args:
        value = arg.value
        if isinstance(value, cst.List):
            return len(code_text(value)) < 400
        if isinstance(value, cst.Tuple) and value.elements and all(isinstance(e.value, cst.Integer) for e in value.elements):
            total = 1
            for element in value.elements:
                total *= int(element.value.evaluated_value)
            return total <= TOY_ELEMENTS
    return False
