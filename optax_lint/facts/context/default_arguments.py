"""Optimizers that are only a parameter's default: `def run_experiment(...,
optimizer=optax.adamw(1e-3))` in a library entry point whose callers pass their own.

Such a default trains nothing by itself. Advice about how to train speaks about it only
when the module runs the function with the default (a call that leaves the parameter
out, as `__main__` may); when nothing in the module calls the function, or every call
passes the parameter, the default is the library's placeholder and the callers' own
optimizers are what train. A defect in the default (a clip after the optimizer) is
still a defect: only the training-run rules ask this.
"""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.project.callers import default_used_here
from optax_lint.syntax.walker import walk


def placeholder_defaults(facts) -> tuple[tuple[int, int], ...]:
    """Line ranges (first, last) of parameter defaults that build an optax optimizer and
    that the module never runs with."""
    out = []
    for scope in facts.raw.scopes:
        node = scope.node
        if scope.kind != "function" or not isinstance(node, cst.FunctionDef):
            continue
        params = node.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.default is None or not _builds_optax(facts, param.default, scope.parent):
                continue
            binding = next((b for b in scope.bindings.get(param.name.value, ()) if b.node is param), None)
            if binding is None or default_used_here(facts, binding):
                continue
            span = facts.source_positions.span(param.default)
            out.append((span.line, span.end_line))
    return tuple(out)


def _builds_optax(facts, expr: cst.BaseExpression, scope) -> bool:
    return any(
        isinstance(part, cst.Call) and (facts.canonical(part.func, scope) or "").startswith("optax.")
        for part in walk(expr)
    )
