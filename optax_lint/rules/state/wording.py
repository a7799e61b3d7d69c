"""How the state rules show code, calls and optimizers in their messages."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.pipelines.build import TxNode
from optax_lint.rules.base import describe
from optax_lint.syntax.nodes import node_text


def call_text(call: cst.Call, limit: int = 60) -> str:
    """`optimizer.update(grads, opt_state)`: the call with its receiver, shortened."""
    text = node_text(call)
    if len(text) <= limit:
        return text
    return node_text(call.func) + "(...)" if len(node_text(call.func)) < limit else describe(call)


def describe_node(node: Optional[TxNode]) -> str:
    if node is None:
        return "the optimizer"
    return describe(node.call) if node.call is not None else node.short
