"""Which pipelines the file shows being used AS THE OPTIMIZER.

A transform call that no followed pipeline contains is not, by that alone, an
optimizer: libraries and research code are full of building blocks (`scale_by_adam()`,
a `trace` direction, a preconditioner chain) that some caller chains with a learning
rate. A rule that judges a pipeline as a whole optimizer (it "never descends") asks
here first. The evidence, followed through names (bound once or on several
branches), conditional expressions, parameters passed by local callers, and local
helper functions (every `return`):

- `tx.init(params)` / `tx.update(grads, state, ...)` on it;
- `TrainState.create(tx=...)`, `nnx.Optimizer(model, tx)` and keyword arguments named
  `tx=` / `optimizer=` (the callee says what it takes).

`.init`/`.update` count only where the file applies updates as an optimizer's
(`optax.apply_updates`). In test code (test files, `test_*` functions) and in a
library's own package, `.init`/`.update` are tests of a transform or delegation
inside another transform (a wrapper's `inner.update`), not training: there only a
consumer or a `tx=`/`optimizer=` keyword shows the optimizer.
"""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from optax_lint.facts.file_role import (
    LIBRARIES,
    in_test_function,
    is_test_file,
    owning_package,
)
from optax_lint.facts.state.walks import name_counts
from optax_lint.syntax.arguments import param_arg
from optax_lint.syntax.names import local_function, lookup
from optax_lint.syntax.walker import Scope

_ROLE_KEYWORDS = frozenset({"tx", "optimizer"})
_MAX_DEPTH = 8


def used_as_optimizer(facts) -> set[int]:
    """ids of the `Pipeline.call` of every pipeline used as the optimizer."""
    roots = {id(p.call) for p in facts.pipelines}
    out: set[int] = set()
    methods_count = (
        not is_test_file(facts.path)
        and owning_package(facts.path) not in LIBRARIES
        and bool(facts.calls_by_name.get("optax.apply_updates"))
    )
    for expr, scope in _use_sites(facts, methods_count):
        for call in possible_calls(facts, expr, scope):
            if id(call) in roots:
                out.add(id(call))
    return out


def _use_sites(facts, methods_count: bool) -> Iterator[tuple[cst.BaseExpression, Scope]]:
    for record in facts.raw.calls:
        func = record.node.func
        if methods_count and isinstance(func, cst.Attribute) and func.attr.value in ("init", "update") and record.node.args:
            if func.attr.value == "update" and len(record.node.args) < 2:
                continue
            if in_test_function(record.scope):
                continue
            yield func.value, record.scope
        for arg in record.node.args:
            if arg.keyword is not None and arg.keyword.value in _ROLE_KEYWORDS:
                yield arg.value, record.scope
    for consumer in facts.consumers:
        if consumer.tx_arg is not None:
            yield consumer.tx_arg.value, consumer.record.scope


def possible_calls(facts, expr: Optional[cst.BaseExpression], scope: Scope, depth: int = 0) -> list[cst.Call]:
    """Every call `expr` may evaluate to, as far as this file shows (memoized per
    expression, so many call sites passing names around stay linear)."""
    if expr is None or depth > _MAX_DEPTH:
        return []
    memo = facts.possible_calls_cache
    key = (id(expr), id(scope))
    if key in memo:
        return memo[key]
    memo[key] = []  # a cycle (f returns f(x), x = x if c else y) adds nothing
    memo[key] = result = _possible_calls(facts, expr, scope, depth)
    return result


def _possible_calls(facts, expr: cst.BaseExpression, scope: Scope, depth: int) -> list[cst.Call]:
    if isinstance(expr, cst.IfExp):
        return possible_calls(facts, expr.body, scope, depth + 1) + possible_calls(facts, expr.orelse, scope, depth + 1)
    if isinstance(expr, cst.Call):
        func = expr.func
        # MultiSteps(...).gradient_transformation(): the MultiSteps pipeline.
        if isinstance(func, cst.Attribute) and func.attr.value == "gradient_transformation" and isinstance(func.value, cst.Call):
            return possible_calls(facts, func.value, scope, depth + 1)
        function = local_function(facts.raw, func, scope)
        if function is not None:
            out: list[cst.Call] = []
            for ret in function.returns:
                out.extend(possible_calls(facts, ret.node.value, function, depth + 1))
            return out
        return [expr]
    if isinstance(expr, cst.Name):
        owner, bindings = lookup(expr.value, scope)
        out = []
        for binding in bindings:
            if binding.kind in ("assign", "annassign", "walrus") and not binding.index and binding.value is not None:
                out.extend(possible_calls(facts, binding.value, binding.scope, depth + 1))
            elif binding.kind == "param" and owner is not None:
                default = getattr(binding.node, "default", None)
                out.extend(possible_calls(facts, default, owner.parent or owner, depth + 1))
                out.extend(_passed_by_callers(facts, owner, expr.value, depth))
        return out
    return []


def _passed_by_callers(facts, function: Scope, name: str, depth: int) -> list[cst.Call]:
    """What local calls of `function` pass for its parameter `name`."""
    from optax_lint.facts.api_currency import call_sites

    node = function.node
    if not isinstance(node, cst.FunctionDef):
        return []
    out = []
    for site in call_sites(facts, function):
        arg = param_arg(site.node, node, name)
        if arg is not None:
            out.extend(possible_calls(facts, arg, site.scope, depth + 1))
    return out


def pipeline_referenced(facts, pipeline) -> bool:
    """Whether the file uses a pipeline at all, as an optimizer or not (a clipper whose
    `update` clips the gradients counts): bound to a name that is read again, returned
    by a helper that is called, or built inside an expression that consumes it
    (`TrainState.create(tx=optax.chain(...))`). A chain assigned and never read again
    (a leftover probe) is not."""
    module = facts.module
    if pipeline.function is not None and pipeline.function.node is not None:
        return name_counts(facts, module).get(pipeline.function.name, 0) > 1  # more than the def's own name
    if pipeline.name:
        scope = pipeline.record.scope
        where = scope.node if scope.kind == "function" and pipeline.name not in scope.declared_global else module
        return name_counts(facts, where).get(pipeline.name, 0) > 1  # more than the assignment's target
    return True
