"""Origins: what an expression holds, traced back through the module. An optimizer
(`tx`), the state one of them built (`opt_state = tx.init(params)`, carried through
`updates, opt_state = tx.update(...)`, the returns of jitted steps and their callers,
and `TrainState.opt_state`), a flax `TrainState` or nnx `Optimizer` holding one, or the
updates an optax `update` produced. A state keeps the pipeline whose `init` built it,
so `update` on another optimizer can be told apart (OPX608). Whatever cannot be
followed resolves to nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline
from optax_lint.facts.pipelines.updates import NNX_OPTIMIZER, TRAIN_STATE_CREATE
from optax_lint.facts.state.functions import FunctionTable
from optax_lint.facts.state.paths import STATE_ATTRS, Step, subscript_step
from optax_lint.syntax.names import lookup
from optax_lint.syntax.walker import Binding, Scope

TREE_GET = "optax.tree_utils.tree_get"
TREE_SET = "optax.tree_utils.tree_set"
# Calls that hand back their first argument's pytree unchanged in structure.
_PRESERVING = frozenset(
    {"jax.device_put", "jax.block_until_ready", "flax.jax_utils.replicate", "flax.jax_utils.unreplicate", TREE_SET}
)


@dataclass(frozen=True, eq=False)
class Held:
    """What an expression is known to hold."""

    kind: str  # tx | state | train_state | nnx | updates
    pipeline: Pipeline
    path: tuple = ()  # state: steps from the pipeline's whole state to this value
    inferred: bool = False  # state: shape taken from the update's optimizer, not traced to an init
    origin: Optional[cst.CSTNode] = None  # the init / TrainState.create / update call

    def same(self, other: "Held") -> bool:
        return self.kind == other.kind and self.pipeline is other.pipeline and self.path == other.path

    def extended(self, step: Step) -> "Held":
        return Held(self.kind, self.pipeline, self.path + (step,), self.inferred, self.origin)


_UNKNOWN = "unknown"
_NEUTRAL = "neutral"  # a value flowing around a loop: says nothing either way
Result = Union[Held, str]
_BUDGET = 4000


class Origins:
    """Origin tracing over one module, each answer cached."""

    def __init__(self, facts, table: FunctionTable) -> None:
        self.facts = facts
        self.table = table
        self._cache: dict[tuple[int, int], Optional[Held]] = {}
        self._stack: set = set()
        self._budget = 0

    def held(self, expr: Optional[cst.BaseExpression], scope: Scope) -> Optional[Held]:
        """What `expr` holds, or None when that cannot be known."""
        if expr is None:
            return None
        key = (id(expr), id(scope))
        if key in self._cache:
            return self._cache[key]
        self._budget = 0
        self._stack = set()
        result = self._expr(expr, scope, ())
        out = result if isinstance(result, Held) else None
        self._cache[key] = out
        return out

    def tx_of(self, expr: Optional[cst.BaseExpression], scope: Scope) -> Optional[Pipeline]:
        held = self.held(expr, scope)
        return held.pipeline if held is not None and held.kind == "tx" else None

    def _expr(self, expr: cst.BaseExpression, scope: Scope, index: tuple) -> Result:
        key = (id(expr), id(scope), index)
        if key in self._stack:
            return _NEUTRAL
        self._budget += 1
        if self._budget > _BUDGET or len(self._stack) > 64:
            return _UNKNOWN
        self._stack.add(key)
        try:
            return self._compute(expr, scope, index)
        finally:
            self._stack.discard(key)

    def _compute(self, expr: cst.BaseExpression, scope: Scope, index: tuple) -> Result:
        if isinstance(expr, cst.Name):
            return self._name(expr.value, scope, index)
        if isinstance(expr, cst.Attribute):
            if index:
                return _UNKNOWN
            base = self._expr(expr.value, scope, ())
            if not isinstance(base, Held):
                return base
            attr = expr.attr.value
            if base.kind == "train_state" and attr == "opt_state":
                return Held("state", base.pipeline, (), False, base.origin)
            if base.kind == "train_state" and attr == "tx":
                return Held("tx", base.pipeline)
            if base.kind == "state" and attr in STATE_ATTRS:
                return base.extended(("attr", attr))
            return _UNKNOWN
        if isinstance(expr, cst.Subscript):
            step = subscript_step(expr)
            if step is None or index:
                return _UNKNOWN
            base = self._expr(expr.value, scope, ())
            if isinstance(base, Held):
                return base.extended(step) if base.kind == "state" else _UNKNOWN
            if step[0] == "index" and isinstance(expr.value, (cst.Call, cst.Name)):
                return self._expr(expr.value, scope, (step[1],))
            return base
        if isinstance(expr, (cst.Tuple, cst.List)):
            if not index or not isinstance(index[0], int):
                return _UNKNOWN
            elements = expr.elements
            if any(isinstance(e, cst.StarredElement) for e in elements) or not -len(elements) <= index[0] < len(elements):
                return _UNKNOWN
            return self._expr(elements[index[0]].value, scope, index[1:])
        if isinstance(expr, cst.Call):
            return self._call(expr, scope, index)
        return _UNKNOWN

    def _name(self, name: str, scope: Scope, index: tuple) -> Result:
        _, bindings = lookup(name, scope)
        if not bindings:
            return _UNKNOWN
        results = []
        for binding in bindings:
            if binding.kind == "param":
                results.append(self._param(binding, index))
            elif binding.kind in ("assign", "annassign", "unpack", "walrus") and binding.value is not None:
                results.append(self._expr(binding.value, binding.scope, binding.index + index))
            else:
                results.append(_UNKNOWN)
            if results[-1] == _UNKNOWN:
                return _UNKNOWN
        return _merge(results)

    def _param(self, binding: Binding, index: tuple) -> Result:
        scope = binding.scope
        if scope.kind != "function":
            return _UNKNOWN
        info = self.table.functions.get(scope.node)
        if info is None or info.escapes or info.method or not info.calls:
            return _UNKNOWN
        results = []
        for record in info.calls:
            arg = info.arg_for(record.node, binding.name)
            if arg is None:
                return _UNKNOWN
            results.append(self._expr(arg.value, record.scope, index))
            if results[-1] == _UNKNOWN:
                return _UNKNOWN
        return _merge(results)

    def _call(self, call: cst.Call, scope: Scope, index: tuple) -> Result:
        facts = self.facts
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method == "update" and len(index) == 1 and index[0] in (0, 1):
                return self._update_result(call, scope, index[0])
            if not index and method in ("init", "apply_gradients", "replace", "gradient_transformation"):
                receiver = self._expr(func.value, scope, ())
                if not isinstance(receiver, Held):
                    return receiver
                if method == "init" and receiver.kind == "tx":
                    return Held("state", receiver.pipeline, (), False, call)
                if method == "gradient_transformation" and receiver.kind == "tx":
                    return receiver
                if method in ("apply_gradients", "replace") and receiver.kind == "train_state":
                    if method == "replace" and any(a.keyword is not None and a.keyword.value == "tx" or a.star for a in call.args):
                        return _UNKNOWN
                    return receiver
                return _UNKNOWN
        name = facts.canonical(func, scope)
        if not index and name is not None:
            if name in TRAIN_STATE_CREATE or name.endswith("TrainState.create"):
                return self._holder(call, scope, "train_state", "tx", None)
            if name in NNX_OPTIMIZER:
                return self._holder(call, scope, "nnx", "tx", 1)
            if name in _PRESERVING:
                first = call.args[0] if call.args and call.args[0].keyword is None and not call.args[0].star else None
                return self._expr(first.value, scope, ()) if first is not None else _UNKNOWN
        if not index and self._local_train_state_create(call, scope):
            return self._holder(call, scope, "train_state", "tx", None)
        if not index and facts.builder.is_transform_call(call, scope):
            pipeline = facts.pipeline_by_call.get(call) or facts.pipeline_for(call, scope)
            return Held("tx", pipeline) if pipeline is not None else _UNKNOWN
        info = self.table.callee(call, scope)
        if info is not None:
            values = [r.node.value for r in info.scope.returns]
            if not values or any(v is None for v in values):
                return _UNKNOWN
            results = []
            for value in values:
                results.append(self._expr(value, info.scope, index))
                if results[-1] == _UNKNOWN:
                    return _UNKNOWN
            return _merge(results)
        if not index and name is None and isinstance(func, cst.Name):
            # A helper that builds and returns an optimizer (pipelines follow those).
            pipeline = facts.pipeline_for(call, scope)
            if pipeline is not None:
                return Held("tx", pipeline)
        return _UNKNOWN

    def _update_result(self, call: cst.Call, scope: Scope, position: int) -> Result:
        receiver = self._expr(call.func.value, scope, ())
        tx = receiver if isinstance(receiver, Held) and receiver.kind == "tx" else None
        if position == 0:
            return Held("updates", tx.pipeline, (), False, call) if tx is not None else _UNKNOWN
        state_arg = _arg(call, 1, "state")
        state = self._expr(state_arg.value, scope, ()) if state_arg is not None else _UNKNOWN
        if isinstance(state, Held):
            return state if state.kind == "state" else _UNKNOWN
        if state == _NEUTRAL:
            return _NEUTRAL
        if tx is not None:
            return Held("state", tx.pipeline, (), True, call)
        return _UNKNOWN

    def _holder(self, call: cst.Call, scope: Scope, kind: str, keyword: str, position: Optional[int]) -> Result:
        arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)
        if arg is None and position is not None:
            positional = [a for a in call.args if a.keyword is None and not a.star]
            arg = positional[position] if position < len(positional) else None
        if arg is None:
            return _UNKNOWN
        tx = self._expr(arg.value, scope, ())
        if isinstance(tx, Held) and tx.kind == "tx":
            return Held(kind, tx.pipeline, (), False, call)
        return _UNKNOWN if not isinstance(tx, str) else tx

    def _local_train_state_create(self, call: cst.Call, scope: Scope) -> bool:
        """`MyTrainState.create(...)` where `class MyTrainState(train_state.TrainState)`."""
        func = call.func
        return isinstance(func, cst.Attribute) and func.attr.value == "create" and subclasses_train_state(self.facts, func.value, scope)


def _merge(results: list[Result]) -> Result:
    known = [r for r in results if isinstance(r, Held)]
    if any(r == _UNKNOWN for r in results if isinstance(r, str)):
        return _UNKNOWN
    if not known:
        return _NEUTRAL
    firm = [r for r in known if not r.inferred] or known
    first = firm[0]
    if all(first.same(r) for r in firm):
        return first
    return _UNKNOWN


def _arg(call: cst.Call, position: int, keyword: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in positional[: position + 1]):
        return None
    return positional[position] if position < len(positional) else None



def subclasses_train_state(facts, expr: cst.BaseExpression, scope: Scope) -> bool:
    """`expr` names a class of this file deriving from a `...TrainState`."""
    if not isinstance(expr, cst.Name):
        return False
    _, bindings = lookup(expr.value, scope)
    if len(bindings) != 1 or bindings[0].kind != "class":
        return False
    for base in bindings[0].node.bases:
        name = facts.canonical(base.value, bindings[0].scope) or ""
        if name.endswith("TrainState"):
            return True
    return False
