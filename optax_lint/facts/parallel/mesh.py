"""Meshes and partition specs written in the file: a mesh's axis names and sizes, and
whether a `PartitionSpec` replicates its argument."""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from optax_lint.facts.parallel.calls import call_arg, has_star
from optax_lint.facts.parallel.names import MESH_CTORS, PARTITION_SPEC, axis_set
from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import Scope


def mesh_axis_names(facts, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Any:
    if depth > 6:
        return Unknown("mesh too deep")
    if isinstance(expr, cst.Name):
        _, bindings = lookup(expr.value, scope)
        if len(bindings) != 1 or bindings[0].value is None or bindings[0].index:
            return Unknown(f"'{expr.value}' is not a mesh built once in this file")
        return mesh_axis_names(facts, bindings[0].value, bindings[0].scope, depth + 1)
    if isinstance(expr, cst.Call):
        name = facts.canonical(expr.func, scope)
        if name in MESH_CTORS and not has_star(expr):
            arg = call_arg(expr, MESH_CTORS[name], "axis_names")
            if arg is not None:
                return axis_set(value_of(arg.value, scope))
    return Unknown("mesh not built in this file")


def partition_spec_replicated(facts, expr, scope: Scope) -> Optional[bool]:
    """True for `P()` / `P(None, ...)`, False for a spec naming a mesh axis, None when
    the expression is not a PartitionSpec written here."""
    if isinstance(expr, cst.Name):
        _, bindings = lookup(expr.value, scope)
        if len(bindings) == 1 and bindings[0].value is not None and not bindings[0].index and bindings[0].kind == "assign":
            return partition_spec_replicated(facts, bindings[0].value, bindings[0].scope)
        return None
    if not isinstance(expr, cst.Call) or facts.canonical(expr.func, scope) not in PARTITION_SPEC or has_star(expr):
        return None
    values = [value_of(a.value, scope) for a in expr.args]
    if all(v is None for v in values):
        return True
    if any(isinstance(v, (str, tuple)) for v in values):
        return False
    return None


def mesh_axis_sizes(facts, expr, scope: Scope, depth: int = 0) -> dict:
    if depth > 6:
        return {}
    if isinstance(expr, cst.Name):
        _, bindings = lookup(expr.value, scope)
        if len(bindings) != 1 or bindings[0].value is None or bindings[0].index:
            return {}
        return mesh_axis_sizes(facts, bindings[0].value, bindings[0].scope, depth + 1)
    if isinstance(expr, cst.Call) and facts.canonical(expr.func, scope) == "jax.make_mesh" and not has_star(expr):
        shape = call_arg(expr, 0, "axis_shapes")
        names = call_arg(expr, 1, "axis_names")
        if shape is None or names is None:
            return {}
        shape_v, names_v = value_of(shape.value, scope), value_of(names.value, scope)
        if isinstance(names_v, str):
            names_v = (names_v,)
        if isinstance(shape_v, int):
            shape_v = (shape_v,)
        if isinstance(shape_v, (tuple, list)) and isinstance(names_v, (tuple, list)) and len(shape_v) == len(names_v):
            if all(isinstance(v, int) and not isinstance(v, bool) for v in shape_v):
                return dict(zip(names_v, shape_v))
    return {}
