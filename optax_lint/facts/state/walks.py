"""Walks of code for the state facts: a scope's own code, the uses of a name, whether
a value is negated, whether an expression varies inside a loop."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from optax_lint.syntax.names import lookup
from optax_lint.syntax.walker import Scope, iter_children, walk


def walk_scope(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Pre-order walk of a scope's own code: nested functions and classes are skipped
    (lambdas are kept: their bodies are where tree-map arithmetic lives)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if node is not root and isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        children = list(iter_children(node))
        children.reverse()
        stack.extend(children)


def names_read(root: cst.CSTNode) -> Iterator[cst.Name]:
    """Every `Name` node under `root`, attribute names excluded (`x` of `x.y`, never `y`)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            yield node
            continue
        if isinstance(node, cst.Attribute):
            stack.append(node.value)
            continue
        stack.extend(iter_children(node))


def name_uses(root: cst.CSTNode, name: str) -> list[cst.Name]:
    """Every `Name` node spelling `name` under `root` (attribute names excluded)."""
    return [node for node in names_read(root) if node.value == name]


def name_counts(facts, root: cst.CSTNode) -> dict[str, int]:
    """How many `Name` nodes spell each name under `root` (attribute names excluded),
    counted once per root and file: asked for every pipeline of a long file."""
    cache = facts.name_counts_cache
    counts = cache.get(id(root))
    if counts is None:
        counts = cache[id(root)] = {}
        for node in names_read(root):
            counts[node.value] = counts.get(node.value, 0) + 1
    return counts


def negated(expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
    """The value is negated: `-g`, a call holding a negation, or a name bound to one
    (gradients handed to update this way are a deliberate ascent)."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return True
    if isinstance(expr, cst.Call):
        for node in walk(expr):
            if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
                return True
    if isinstance(expr, cst.Name) and depth < 4:
        _, bindings = lookup(expr.value, scope)
        return any(b.value is not None and negated(b.value, b.scope, depth + 1) for b in bindings)
    return False


def varies_in_loop(sf, expr: cst.BaseExpression, loop: cst.CSTNode, scope: Scope) -> bool:
    """Some name in `expr` is bound inside the loop (or is its target)."""
    for node in walk(expr):
        if isinstance(node, cst.Name):
            owner, bindings = lookup(node.value, scope)
            if owner is not None and any(b.kind != "param" and (b.node is loop or sf.inside(b.node, loop)) for b in bindings):
                return True
    return False
