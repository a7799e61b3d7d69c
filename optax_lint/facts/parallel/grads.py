"""Gradient data-flow inside a step: the output of `jax.grad` / `value_and_grad` (and
flax's `DynamicScale.value_and_grad`) followed through assignments, tuple unpacking,
`tree.map` lambdas and local helper functions to `tx.update` / `apply_gradients` /
`optax.apply_updates`, with the axes the gradients were reduced over on the way."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

import libcst as cst

from optax_lint.facts.parallel.calls import (
    call_arg,
    has_star,
    keyword_arg,
    positional_args,
)
from optax_lint.facts.parallel.interpreter import (
    CLEAN,
    UNK,
    AClean,
    AContainer,
    ALocalFn,
    ATuple,
    AUnknown,
    Frame,
    Interpreter,
)
from optax_lint.facts.parallel.names import (
    COLLECTIVES,
    GRAD_TRANSFORMS,
    NUMERIC_PREFIXES,
    PARTIAL,
    REDUCTIONS,
    TREE_MAP,
    axis_set,
    collective_op,
)
from optax_lint.syntax.names import lookup
from optax_lint.syntax.nodes import node_text
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import Scope


@dataclass(frozen=True, eq=False)
class AGrad:
    """A gradient (or something computed from one), reduced over `axes` so far."""

    source: cst.Call = field(repr=False)  # the grad_fn(...) call that produced it
    axes: frozenset = frozenset()
    unknown_axis: bool = False  # reduced over an axis whose name is not static
    wrt: Optional[str] = None  # the step parameter it is the gradient with respect to
    wrt_text: Optional[str] = None  # how that argument is written (`state.params`)
    loss_reduced: Any = False  # the differentiated function reduces its value over an axis

    def reduced(self, axes) -> "AGrad":
        if isinstance(axes, Unknown) or axes is None:
            return dataclasses.replace(self, unknown_axis=True)
        return dataclasses.replace(self, axes=self.axes | axes)

    def is_reduced_over(self, axes) -> bool:
        if self.unknown_axis:
            return True
        if not axes or isinstance(axes, Unknown):
            return bool(self.axes)
        return bool(self.axes & axes)


@dataclass(frozen=True, eq=False)
class AGradFn:
    kind: str  # grad | value_and_grad | dynamic_scale
    call: cst.Call
    has_aux: Any
    argnums: Any
    axes: Any = None  # DynamicScale(axis_name=...) reduces inside
    fun: Optional[cst.BaseExpression] = None
    scope: Optional[Scope] = None


@dataclass(frozen=True)
class AParam:
    """A parameter of the step function, untouched (attributes of it included)."""

    name: str


@dataclass(eq=False)
class Sink:
    """Gradients reaching an update call."""

    kind: str  # update | apply_gradients | apply_updates
    call: cst.Call
    arg: cst.Arg
    value: Any  # AGrad (or other abstract value)
    scope: Scope  # the function the sink is written in
    origin: Optional[cst.CSTNode]  # the statement that last bound the argument name, if a Name


@dataclass(eq=False)
class GradReduction:
    """A collective applied to a gradient."""

    collective: cst.Call
    op: str
    axes: Any
    grad: AGrad
    scope: Scope


@dataclass(eq=False)
class GradFlow:
    function: Scope
    sinks: list[Sink] = field(default_factory=list)
    reductions: list[GradReduction] = field(default_factory=list)


def _has_grad(value) -> bool:
    if isinstance(value, AGrad):
        return True
    if isinstance(value, (ATuple, AContainer)):
        return any(_has_grad(v) for v in value.items)
    return False


def _grads_in(value) -> list[AGrad]:
    if isinstance(value, AGrad):
        return [value]
    if isinstance(value, (ATuple, AContainer)):
        return [g for v in value.items for g in _grads_in(v)]
    return []


class GradInterpreter(Interpreter):
    """Follows gradients through one step function into `flow`: the updates they
    reach (sinks) and the collectives that reduce them on the way."""

    def __init__(self, pf, flow: GradFlow) -> None:
        super().__init__(pf)
        self.flow = flow

    def opaque(self, values):
        if any(isinstance(v, AUnknown) for v in values):
            return UNK
        grads = [g for v in values for g in _grads_in(v)]
        if grads:
            return _merge_grads(grads)
        return CLEAN

    def attribute(self, base, expr):
        if isinstance(base, (AGrad, AParam)):
            return base
        if isinstance(base, (ATuple, AContainer)):
            return UNK
        return base if isinstance(base, (AClean, AUnknown)) else UNK

    def subscript(self, base, expr):
        if isinstance(base, (AGrad, AParam, AClean, AUnknown)):
            return base
        if isinstance(base, AContainer):
            return self.opaque(list(base.items))
        return UNK

    def join2(self, a, b):
        if a is b or a == b:
            return a
        if isinstance(a, AGrad) and isinstance(b, AGrad):
            if a.axes == b.axes and a.unknown_axis == b.unknown_axis:
                return a
            if a.source is not b.source:
                # Each branch computes its own gradients (ImageNet's `if dynamic_scale:`
                # shape): a branch that never reduces them is wrong whichever is taken.
                unreduced = [g for g in (a, b) if not g.axes and not g.unknown_axis]
                if len(unreduced) == 1:
                    return unreduced[0]
            # One gradient, reduced under a condition only: the branch taken is unknown.
            return UNK
        if isinstance(a, ATuple) and isinstance(b, ATuple) and len(a.items) == len(b.items):
            return ATuple(tuple(self.join2(x, y) for x, y in zip(a.items, b.items)))
        return UNK

    def global_value(self, expr, env):
        _, bindings = lookup(expr.value, env.scope)
        if len(bindings) == 1 and bindings[0].kind == "def":
            fn = self.facts.raw.functions.get(bindings[0].node)
            if fn is not None:
                return ALocalFn(fn)
        return CLEAN  # imports, module constants, closures: not gradients

    # -- calls --------------------------------------------------------------
    def call(self, call: cst.Call, env: Frame) -> Any:
        facts = self.facts
        scope = env.scope
        func = call.func
        name = facts.canonical(func, scope)

        # grad transforms: jax.grad(f, ...) -> a gradient function
        if name in GRAD_TRANSFORMS:
            return self._grad_fn(GRAD_TRANSFORMS[name], call, env)
        if isinstance(func, cst.Attribute) and func.attr.value == "value_and_grad" and name is None:
            # flax DynamicScale.value_and_grad(fun, argnums, has_aux, axis_name)
            self.eval(func.value, env)
            return self._grad_fn("dynamic_scale", call, env)

        callee = self.eval(func, env) if name is None or isinstance(func, cst.Call) else None
        if isinstance(callee, AGradFn):
            return self._apply_grad_fn(callee, call, env)

        op = collective_op(name)
        if op is not None:
            return self._collective(op, call, env)

        if name in TREE_MAP:
            return self._tree_map(call, env)

        if name == "optax.apply_updates":
            self.eval_args(call, env)
            arg = call_arg(call, 1, "updates")
            if arg is not None:
                self._sink("apply_updates", call, arg, self.eval(arg.value, env), env)
            return CLEAN

        if isinstance(func, cst.Attribute) and name is None:
            method = func.attr.value
            receiver = callee if callee is not None else self.eval(func.value, env)
            if method == "apply_gradients":
                arg = keyword_arg(call, "grads")
                self.eval_args(call, env)
                if arg is not None:
                    self._sink("apply_gradients", call, arg, self.eval(arg.value, env), env)
                return CLEAN
            if method == "update" and len(call.args) >= 2 and not has_star(call):
                values = self.eval_args(call, env)
                first = call.args[0]
                if first.keyword is None or first.keyword.value in ("updates", "grads"):
                    self._sink("update", call, first, values[0], env)
                return ATuple((CLEAN, CLEAN))
            values = self.eval_args(call, env)
            if isinstance(receiver, AGrad):
                return receiver  # grads.unfreeze(), g.astype(...)
            if any(_has_grad(v) for v in values):
                return UNK
            return CLEAN if receiver in (CLEAN,) or isinstance(receiver, AParam) else UNK

        if isinstance(callee, ALocalFn):
            return self.call_local(callee, call, env)

        values = self.eval_args(call, env)
        if name is not None and (name.startswith(NUMERIC_PREFIXES) or (name.startswith("jax.lax.") and op is None)):
            return self.opaque(values)
        if name in PARTIAL:
            return UNK
        if isinstance(func, cst.Name) and name is None and func.value in ("float", "int", "abs", "len", "sum", "max", "min", "print", "range"):
            return self.opaque(values) if func.value in ("abs", "sum", "max", "min") else CLEAN
        if any(_has_grad(v) or isinstance(v, AUnknown) for v in values):
            return UNK
        return CLEAN if callee is None or callee == CLEAN else UNK

    def _grad_fn(self, kind: str, call: cst.Call, env: Frame) -> Any:
        self.eval_args(call, env)
        if has_star(call):
            return UNK
        fun = call_arg(call, 0, "fun")
        if fun is None:
            fun = call_arg(call, 0, "f")
        has_aux_arg = call_arg(call, 2, "has_aux")
        has_aux = value_of(has_aux_arg.value, env.scope) if has_aux_arg is not None else False
        argnums_arg = call_arg(call, 1, "argnums")
        argnums = value_of(argnums_arg.value, env.scope) if argnums_arg is not None else 0
        axes = None
        axis_arg = call_arg(call, 3 if kind == "dynamic_scale" else None, "axis_name")
        if axis_arg is not None:
            axes = axis_set(value_of(axis_arg.value, env.scope))
        return AGradFn(kind, call, has_aux, argnums, axes, fun.value if fun is not None else None, env.scope)

    def _loss_reduced(self, fn: AGradFn) -> Any:
        """Whether the differentiated function reduces its value with a collective:
        the axes, True (unknown axis), or False."""
        if fn.fun is None or fn.scope is None:
            return Unknown("no function")
        scope, _, _ = self.pf.sites.resolve_function(fn.fun, fn.scope)
        if scope is None:
            return Unknown("not a local function")
        axes: set = set()
        for collective in self.pf.collectives_in(scope, transitive=True):
            if collective.op in ("pmean", "psum"):
                if isinstance(collective.axes, frozenset):
                    axes |= collective.axes
                else:
                    return True
        return frozenset(axes) if axes else False

    def _apply_grad_fn(self, fn: AGradFn, call: cst.Call, env: Frame) -> Any:
        values = self.eval_args(call, env)
        wrt = wrt_text = None
        argnums = fn.argnums
        if isinstance(argnums, int) and not isinstance(argnums, bool) and not has_star(call):
            pairs = [(a, v) for a, v in zip(call.args, values) if a.keyword is None]
            if argnums < len(pairs) and isinstance(pairs[argnums][1], AParam):
                wrt = pairs[argnums][1].name
                wrt_text = node_text(pairs[argnums][0].value)
        grad = AGrad(call, wrt=wrt, loss_reduced=self._loss_reduced(fn), wrt_text=wrt_text)
        if fn.axes is not None:
            grad = grad.reduced(fn.axes)
        if fn.kind == "dynamic_scale":
            return ATuple((CLEAN, CLEAN, CLEAN, grad))
        if fn.kind == "value_and_grad":
            return ATuple((CLEAN, grad))
        if fn.has_aux is True:
            return ATuple((grad, CLEAN))
        if fn.has_aux is False or fn.has_aux is None:
            return grad
        return UNK

    def _collective(self, op: str, call: cst.Call, env: Frame) -> Any:
        self.eval_args(call, env)
        position = COLLECTIVES.get(op)
        axis_arg = call_arg(call, position, "axis_name")
        axes = axis_set(value_of(axis_arg.value, env.scope)) if axis_arg is not None else Unknown("no axis")
        operand = call_arg(call, 0, "x")
        value = self.eval(operand.value, env) if operand is not None else CLEAN
        if op not in REDUCTIONS:
            return value if op in ("pcast", "ppermute", "pshuffle", "pswapaxes", "pbroadcast", "all_to_all") and not isinstance(value, AParam) else CLEAN
        grads = _grads_in(value)
        for grad in grads:
            self.flow.reductions.append(GradReduction(call, op, axes, grad, env.scope))
        return _map_grads(value, lambda g: g.reduced(axes))

    def _tree_map(self, call: cst.Call, env: Frame) -> Any:
        positional = positional_args(call)
        if has_star(call) or not positional:
            self.eval_args(call, env)
            return UNK
        fn_value = self.eval(positional[0].value, env)
        trees = [self.eval(a.value, env) for a in positional[1:]]
        for a in call.args:
            if a.keyword is not None:
                self.eval(a.value, env)
        leaves = [_leaf(t) for t in trees]
        if isinstance(fn_value, ALocalFn):
            return self._run_with(fn_value, leaves)
        fname = self.facts.canonical(positional[0].value, env.scope)
        if fname is not None and (fname.startswith(NUMERIC_PREFIXES) or fname.startswith("jax.lax.")):
            op = collective_op(fname)
            if op is not None:
                return UNK
            return self.opaque(leaves)
        if isinstance(fn_value, AGradFn) or any(isinstance(v, AUnknown) for v in leaves):
            return UNK
        return UNK if any(_has_grad(v) for v in leaves) else CLEAN

    def _run_with(self, fn: ALocalFn, leaves: list) -> Any:
        scope = fn.scope
        node = scope.node
        params = node.params
        ordered = [p.name.value for p in list(params.posonly_params) + list(params.params)]
        values = {name: CLEAN for name in scope.params}
        for name, value in zip(ordered, list(fn.bound) + leaves):
            values[name] = value
        return self.run_memo(scope, values)

    def _sink(self, kind: str, call: cst.Call, arg: cst.Arg, value, env: Frame) -> None:
        if any(s.call is call for s in self.flow.sinks):
            return
        origin = env.origins.get(arg.value.value) if isinstance(arg.value, cst.Name) else None
        self.flow.sinks.append(Sink(kind, call, arg, value, env.scope, origin))


def _leaf(value):
    if isinstance(value, (ATuple, AContainer)):
        return _merge_values(list(value.items))
    return value


def _merge_values(values: list):
    if any(isinstance(v, AUnknown) for v in values):
        return UNK
    grads = [g for v in values for g in _grads_in(v)]
    return _merge_grads(grads) if grads else CLEAN


def _merge_grads(grads: list[AGrad]) -> AGrad:
    first = grads[0]
    axes = first.axes
    unknown = first.unknown_axis
    for g in grads[1:]:
        axes = axes & g.axes
        unknown = unknown and g.unknown_axis
    return dataclasses.replace(first, axes=axes, unknown_axis=unknown)


def _map_grads(value, fn):
    if isinstance(value, AGrad):
        return fn(value)
    if isinstance(value, ATuple):
        return ATuple(tuple(_map_grads(v, fn) for v in value.items))
    if isinstance(value, AContainer):
        return AContainer(tuple(_map_grads(v, fn) for v in value.items))
    return value


def trace_grads(pf, flow: GradFlow) -> None:
    """Fill `flow` by running the gradient interpreter over its step function, the
    function's parameters as `AParam`s."""
    interp = GradInterpreter(pf, flow)
    args = {name: AParam(name) for name in flow.function.params}
    try:
        interp.run(flow.function, args)
    except RecursionError:  # pragma: no cover - pathological nesting
        pass
