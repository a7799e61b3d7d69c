"""How the state rules show code, calls and optimizers in their messages."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.pipelines.build import TxNode
from optax_lint.rules.base import describe


def code_of(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


def call_text(call: cst.Call, limit: int = 60) -> str:
    """`optimizer.update(grads, opt_state)`: the call with its receiver, shortened."""
    text = code_of(call)
    if len(text) <= limit:
        return text
    return code_of(call.func) + "(...)" if len(code_of(call.func)) < limit else describe(call)


def describe_node(node: Optional[TxNode]) -> str:
    if node is None:
        return "the optimizer"
    return describe(node.call) if node.call is not None else node.short
