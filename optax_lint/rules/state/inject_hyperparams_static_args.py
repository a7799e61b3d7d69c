"""OPX605 inject-hyperparams-static-args: `inject_hyperparams(f)` where an argument of
`f` must stay static but is traced or called as a schedule."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.state.access import StateFacts
from optax_lint.facts.state.functions import JIT_WRAPPERS
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.state.call_args import keyword_arg, positional_args
from optax_lint.rules.state.optax_states import INJECT_NEEDS_STATIC
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.arguments import bind
from optax_lint.syntax.nodes import node_text
from optax_lint.syntax.values import value_of
from optax_lint.syntax.walker import Scope

_DTYPE_NAMES = frozenset({
    "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint32",
    "float8_e4m3fn", "float8_e5m2", "complex64", "complex128", "dtype",
})


def _uses_jit(sf: StateFacts) -> bool:
    if any(info.jitted for info in sf.functions.values()):
        return True
    return any(name in sf.facts.calls_by_name for name in JIT_WRAPPERS)


def _static_args(wrapper: cst.Call, scope: Scope) -> tuple[Optional[set[str]], Optional[cst.Arg]]:
    arg = keyword_arg(wrapper, "static_args")
    positional = positional_args(wrapper)
    if arg is None and len(positional) > 1:
        arg = positional[1]
    if arg is None:
        return set(), None
    value = value_of(arg.value, scope)
    if isinstance(value, str):
        return {value}, arg
    if isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
        return set(value), arg
    return None, arg


def _is_dtype(expr: cst.BaseExpression, facts, scope: Scope) -> bool:
    name = facts.canonical(expr, scope) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    if isinstance(expr, cst.Call):
        name = facts.canonical(expr.func, scope)
        return name in ("jax.numpy.dtype", "numpy.dtype")
    if name is None:
        return False
    root, _, last = name.rpartition(".")
    return root.split(".")[0] in ("jax", "numpy", "ml_dtypes") and last in _DTYPE_NAMES


class InjectHyperparamsStaticArgs(Rule):
    code = "OPX605"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        builder = facts.builder
        sf = None
        for record in facts.raw.calls:
            call = record.node
            if not isinstance(call.func, cst.Call):
                continue
            entry = builder.inject_inner(call, record.scope)
            if entry is None or entry.kind == "unknown":
                continue
            wrapper = call.func
            static, static_arg = _static_args(wrapper, record.scope)
            if static is None:
                continue
            problems: list[tuple[str, str]] = []
            for param, (reason, needs_jit) in INJECT_NEEDS_STATIC.get(entry.key, {}).items():
                if param in static:
                    continue
                if needs_jit:
                    sf = sf or facts.state
                    if not _uses_jit(sf):
                        continue
                problems.append((param, f"{param} {reason}"))
            bound = bind(call, record.scope, entry)
            for param, arg in bound.by_name.items():
                if param not in static and _is_dtype(arg.value, facts, record.scope):
                    problems.append((param, f"{param}={node_text(arg.value)} is callable, so it is treated as a schedule and init raises TypeError"))
            if not problems:
                continue
            names = [p for p, _ in problems]
            new_static = tuple(sorted(static)) + tuple(n for n in names if n not in static)
            text = repr(new_static[0]) if len(new_static) == 1 else "(" + ", ".join(repr(n) for n in new_static) + ")"
            value = cst.parse_expression(text.replace("'", '"'))
            if static_arg is None:
                new_wrapper = fixes.add_keyword(wrapper, "static_args", value)
            else:
                new_wrapper = wrapper.deep_replace(static_arg, static_arg.with_changes(value=value))
            ctx.report(
                call,
                inject=describe(call),
                problems="; ".join(text for _, text in problems),
                static=node_text(value),
                fix=fixes.replace(wrapper, new_wrapper),
            )
