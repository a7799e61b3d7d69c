"""Paths into an optimizer state: the steps (`[1]`, `["adam"]`, `.inner_state`) from a
pipeline's whole state to a part of it, read from and written back as code."""

from __future__ import annotations

from typing import Optional

import libcst as cst

Step = tuple  # ("index", int) | ("key", str) | ("attr", str)
# Attributes of optax state NamedTuples that lead to an inner state.
STATE_ATTRS = frozenset({"inner_opt_state", "inner_state", "inner_states", "hyperparams", "hyperparams_states"})


def subscript_step(node: cst.Subscript) -> Optional[Step]:
    """`x[1]` -> ("index", 1), `x["adam"]` -> ("key", "adam"); None for anything else."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    value = node.slice[0].slice.value
    if isinstance(value, cst.Integer):
        return ("index", int(value.value.replace("_", ""), 0))
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus) and isinstance(value.expression, cst.Integer):
        return ("index", -int(value.expression.value.replace("_", ""), 0))
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString)):
        text = value.evaluated_value if isinstance(value, cst.SimpleString) else None
        return ("key", text) if isinstance(text, str) else None
    return None


def split_state_expr(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, tuple]:
    """`opt_state[1].inner_state` -> (opt_state, (("index", 1), ("attr", "inner_state")))."""
    steps: list[Step] = []
    current = expr
    while True:
        if isinstance(current, cst.Subscript):
            step = subscript_step(current)
            if step is None:
                break
            steps.append(step)
            current = current.value
        elif isinstance(current, cst.Attribute) and current.attr.value in STATE_ATTRS - {"hyperparams", "hyperparams_states"}:
            steps.append(("attr", current.attr.value))
            current = current.value
        else:
            break
    return current, tuple(reversed(steps))


def step_text(step: Step) -> str:
    kind, value = step
    if kind == "attr":
        return f"attribute {value!r}"
    return f"index {value!r}" if kind == "index" else f"key {value!r}"


def key_literal(key: str) -> str:
    """A string literal for a state key, in double quotes where possible."""
    return f'"{key}"' if '"' not in key and "\\" not in key else repr(key)


def path_text(base: str, steps: tuple) -> str:
    out = base
    for kind, value in steps:
        out += f".{value}" if kind == "attr" else (f"[{value}]" if kind == "index" else f"[{key_literal(value)}]")
    return out


def path_expr(base: cst.BaseExpression, steps: tuple) -> cst.BaseExpression:
    """`base` followed by `steps` as an expression (opt_state -> opt_state[1].inner_state)."""
    expr = base
    for kind, value in steps:
        if kind == "attr":
            expr = cst.Attribute(value=expr, attr=cst.Name(value))
        else:
            index = cst.Integer(str(value)) if kind == "index" and value >= 0 else (
                cst.UnaryOperation(cst.Minus(), cst.Integer(str(-value))) if kind == "index" else cst.SimpleString(key_literal(value))
            )
            expr = cst.Subscript(value=expr, slice=[cst.SubscriptElement(slice=cst.Index(value=index))])
    return expr
