"""Collectives (`lax.pmean` / `psum` / `all_gather` / ...): the axis names each one
names, its operand, and what it reduces (grads, loss, metrics)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

from optax_lint.facts.parallel.calls import call_arg, has_star
from optax_lint.facts.parallel.names import COLLECTIVES, axis_set, collective_op
from optax_lint.syntax.nodes import node_text
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import CallRecord


@dataclass(eq=False)
class Collective:
    op: str  # pmean, psum, ...
    record: CallRecord
    axes: Any  # frozenset of names, None (not given), or Unknown
    operand: Optional[cst.BaseExpression]
    reduces: str = "other"  # grads | loss | metrics | other

    @property
    def call(self) -> cst.Call:
        return self.record.node


_LOSS = re.compile(r"loss", re.IGNORECASE)
_METRIC = re.compile(r"metric|acc|summary|stats|count|norm", re.IGNORECASE)
_GRAD = re.compile(r"grad", re.IGNORECASE)


def classify_operand(expr: Optional[cst.BaseExpression]) -> str:
    if expr is None:
        return "other"
    if isinstance(expr, cst.Dict):
        return "metrics"
    text = node_text(expr)
    if _GRAD.search(text):
        return "grads"
    if _LOSS.search(text):
        return "loss"
    if _METRIC.search(text):
        return "metrics"
    return "other"


def find_collectives(facts) -> list[Collective]:
    """Every collective call in the module (what each reduces is left `other`)."""
    out = []
    for record in facts.raw.calls:
        op = collective_op(facts.callee(record))
        if op is None:
            continue
        call = record.node
        axis_arg = call_arg(call, COLLECTIVES[op], "axis_name") if not has_star(call) else None
        if axis_arg is not None:
            axes = axis_set(value_of(axis_arg.value, record.scope))
        elif has_star(call):
            axes = Unknown("* arguments")
        else:
            axes = None
        operand = call_arg(call, 0, "x") if COLLECTIVES[op] != 0 else None
        out.append(Collective(op, record, axes, operand.value if operand is not None else None))
    return out
