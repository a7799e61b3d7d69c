"""The part of a file that trains: what the run context is read from (a model class
or a loop elsewhere in the file says nothing about this optimizer's run)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.syntax.names import local_function
from optax_lint.syntax.nodes import last_name
from optax_lint.syntax.walker import Scope


def find_training_region(facts):
    """A predicate on scopes: inside the functions that train (use an optimizer:
    update sites, TrainState/nnx.Optimizer consumers), the local functions they call
    and the functions that call them, or at module level. Everything passes when the
    file shows no training code (its context comes from elsewhere)."""
    return _training_region(facts)


def _outermost_function(scope: Optional[Scope]) -> Optional[Scope]:
    found = None
    while scope is not None:
        if scope.kind in ("function", "lambda"):
            found = scope
        elif scope.kind == "class" and found is not None:
            break  # a method: the method is the unit
        scope = scope.parent
    return found


def calls_of_local_functions(facts):
    """(call record, the function's scope) for each call by name of a function the file
    defines once."""
    for record in facts.raw.calls:
        target = local_function(facts.raw, record.node.func, record.scope)
        if target is not None:
            yield record, target


def _training_region(facts):
    sites = [site.record.scope for site in facts.update_sites] + [c.record.scope for c in facts.consumers]
    if not sites:
        return lambda scope: True
    if any(_outermost_function(scope) is None for scope in sites):
        return lambda scope: True  # training at module level: the file is the unit
    region = {id(_outermost_function(scope)) for scope in sites}
    # One level of local calls each way: create_train_state() called by train(), and
    # main() that builds the model and calls train(model).
    callees, callers = set(), set()
    for record, target in calls_of_local_functions(facts):
        here = _outermost_function(record.scope)
        if here is not None and id(here) in region:
            callees.add(id(_outermost_function(target)))
        if id(_outermost_function(target)) in region and here is not None:
            callers.add(id(here))
    # (the function a call sits in, the function it hands over by name): jax.jit(step)
    handed = [
        (_outermost_function(record.scope), _outermost_function(target))
        for record in facts.raw.calls
        for arg in record.node.args
        if (target := local_function(facts.raw, arg.value, record.scope)) is not None
    ]
    # The function that hands a training function over by name (`compiled =
    # jax.jit(train_step)`, then `compiled(...)` in its loop) calls it as much.
    for here, target in handed:
        if here is not None and id(here) not in region and id(target) in region:
            callers.add(id(here))
    region |= callees | callers
    # Functions handed over by name from the training code or module level:
    # hk.transform(forward), jax.jit(step), nn.scan(body).
    for here, target in handed:
        if here is None or id(here) in region:
            region.add(id(target))

    # A forward pass decorated with a transform (`@hk.transform def forward(...)`) is what
    # `hk.transform(forward)` hands over: the model the training code's `forward.apply` runs.
    for node, scope in facts.raw.functions.items():
        if any(_decorated_by(d.decorator) in _TRANSFORM_DECORATORS for d in node.decorators):
            region.add(id(_outermost_function(scope)))

    def keep(scope: Optional[Scope]) -> bool:
        function = _outermost_function(scope)
        return function is None or id(function) in region

    return keep


_TRANSFORM_DECORATORS = frozenset({"transform", "transform_with_state", "without_apply_rng"})


def _decorated_by(expr: cst.BaseExpression) -> str:
    """`hk.transform` -> "transform"; a called decorator by its callee."""
    return last_name(expr.func if isinstance(expr, cst.Call) else expr)

