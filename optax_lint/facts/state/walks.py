"""Walks of code for the state facts and rules: a scope's own code, and the uses of
a name."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from optax_lint.syntax.walker import iter_children


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


def name_uses(root: cst.CSTNode, name: str) -> list[cst.Name]:
    """Every `Name` node spelling `name` under `root` (attribute names excluded)."""
    out = []
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            if node.value == name:
                out.append(node)
            continue
        if isinstance(node, cst.Attribute):
            stack.append(node.value)
            continue
        stack.extend(iter_children(node))
    return out
