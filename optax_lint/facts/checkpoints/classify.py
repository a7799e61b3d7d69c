"""Classifying a saved pytree or a restore target (`Payload`): a dict literal and its keys,
a `TrainState`, the optimizer state, or a bare params tree, followed through names,
wrappers that hand back their argument, and the returns of local functions. Whatever
cannot be followed is `unknown`."""

from __future__ import annotations

import functools
import re
from typing import Optional

import libcst as cst

from optax_lint.facts.checkpoints.functions import LocalFunctions
from optax_lint.facts.checkpoints.payload import Payload
from optax_lint.facts.checkpoints.records import RestoreSite
from optax_lint.facts.checkpoints.vocabulary import (
    LINEN_TRAIN_STATE,
    MODEL_HOLDER_KEYS,
    NNX_TRAIN_STATE,
    OTHER_ARGS,
    RESTORE_ARGS,
    SAVE_ARGS,
    TRANSPARENT,
    TREE_MAPS,
    opt_name,
    orbax_member,
    params_key,
    params_name,
)
from optax_lint.syntax.arguments import call_arg_expr
from optax_lint.syntax.names import lookup
from optax_lint.syntax.nodes import node_text
from optax_lint.syntax.values import value_of
from optax_lint.syntax.walker import Binding, Scope


_NNX_STATE = frozenset({"flax.nnx.state", "flax.experimental.nnx.state"})
_NNX_OPTIMIZERS = frozenset({"flax.nnx.Optimizer", "flax.nnx.ModelAndOptimizer", "flax.experimental.nnx.Optimizer"})
_MODEL_PARAM = re.compile(r"^(model|net|network|module)$|_model$")
_GRAIN_ITERATOR_ARGS = frozenset({"PyGrainCheckpointSave", "PyGrainCheckpointRestore", "CheckpointSave", "CheckpointRestore"})


class PayloadClassifier(LocalFunctions):
    def __init__(self, facts) -> None:
        super().__init__(facts)
        # Filled by the collection: a restored value's payload is its restore's target's.
        self.restores: list[RestoreSite] = []

    def payload(self, expr: Optional[cst.BaseExpression], scope: Scope) -> Payload:
        if expr is None:
            return Payload("none", None)
        return self._classify(expr, scope, 0, frozenset())

    def _classify(self, expr: cst.BaseExpression, scope: Scope, depth: int, seen: frozenset) -> Payload:
        if depth > 10:
            return Payload("unknown", expr, reason="too deep")
        d = depth + 1
        if isinstance(expr, cst.Dict):
            out = Payload("dict", expr, dict_node=expr, dict_scope=scope)
            for element in expr.elements:
                if not isinstance(element, cst.DictElement):
                    out.open = True
                    continue
                key = value_of(element.key, scope)
                if not isinstance(key, str):
                    out.open = True
                    continue
                out.items[key] = self._classify(element.value, scope, d, seen)
            return out
        if isinstance(expr, (cst.Tuple, cst.List)):
            out = Payload("dict", expr)
            for i, element in enumerate(expr.elements):
                if isinstance(element, cst.StarredElement):
                    out.open = True
                    continue
                out.items[str(i)] = self._classify(element.value, scope, d, seen)
            return out
        if isinstance(expr, cst.Name):
            if expr.value == "None":
                return Payload("none", expr)
            return self._classify_name(expr, scope, d, seen)
        if isinstance(expr, cst.Attribute):
            attr = expr.attr.value
            if attr == "params":
                return Payload("params", expr)
            if attr == "opt_state":
                return Payload("opt_state", expr)
            if attr in ("step", "batch_stats"):
                return Payload("other", expr)
            return Payload("unknown", expr)
        if isinstance(expr, cst.Subscript):
            key = subscript_key(expr, scope)
            if key is not None and params_key(key) and key.lower() not in MODEL_HOLDER_KEYS:
                return Payload("params", expr)
            if key is not None and opt_name(key):
                return Payload("opt_state", expr)
            if self._classify(expr.value, scope, d, seen).kind == "params":
                return Payload("params", expr)  # a part of the params tree: `state.params[part]`
            return Payload("unknown", expr)
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
            return Payload("other", expr)
        if isinstance(expr, cst.Call):
            return self._classify_call_payload(expr, scope, d, seen)
        return Payload("unknown", expr)

    def _nnx_state_kind(self, target: Optional[cst.BaseExpression], scope: Scope) -> str:
        """`nnx.state(optimizer)`: the optimizer's state (train_state); `nnx.state(model)`
        or `nnx.state(model, nnx.Param)`: params; unknown when the object is not known."""
        if not isinstance(target, cst.Name):
            return "unknown"
        _, bindings = lookup(target.value, scope)
        values = [b.value for b in bindings if b.value is not None]
        if bindings and len(values) == len(bindings) and all(isinstance(v, cst.Call) for v in values):
            built = {self.qual(v.func, b.scope) for v, b in zip(values, bindings)}
            if built and built <= _NNX_OPTIMIZERS:
                return "train_state"
            if not built & _NNX_OPTIMIZERS:
                return "params"
        if bindings and all(b.kind == "param" for b in bindings) and _MODEL_PARAM.search(target.value):
            return "params"  # `def checkpoint(step, model, ...)`: a model handed in
        return "unknown"

    def _classify_call_payload(self, call: cst.Call, scope: Scope, d: int, seen: frozenset) -> Payload:
        name = self.qual(call.func, scope)
        member = orbax_member(name)
        if member in SAVE_ARGS or member in RESTORE_ARGS:
            return self._classify(call_arg_expr(call, 0, "item", strict=True) or cst.Name("None"), scope, d, seen)
        if member in OTHER_ARGS:
            return Payload("other", call)
        if member == "Composite":
            out = Payload("dict", call, composite=True)
            for arg in call.args:
                if arg.keyword is None:
                    out.open = True
                    continue
                out.items[arg.keyword.value] = self._classify(arg.value, scope, d, seen)
            return out
        if isinstance(call.func, cst.Name) and call.func.value == "dict" and not lookup("dict", scope)[1]:
            out = Payload("dict", call)
            for arg in call.args:
                if arg.keyword is None:
                    out.open = True
                    continue
                out.items[arg.keyword.value] = self._classify(arg.value, scope, d, seen)
            return out
        if name in _NNX_STATE:
            # nnx keeps the optimizer state in the nnx.Optimizer, not in the model: the
            # state of a model (all of it, or its nnx.Param) holds no optimizer state.
            target = call_arg_expr(call, 0, None, strict=True)
            return Payload(self._nnx_state_kind(target, scope), call)
        if name and name.startswith("grain.") and name.rsplit(".", 1)[-1] in _GRAIN_ITERATOR_ARGS:
            return Payload("other", call)  # the data iterator's position
        if name in TRANSPARENT:
            inner = call_arg_expr(call, 0, None, strict=True)
            return self._classify(inner, scope, d, seen) if inner is not None else Payload("unknown", call)
        if name in TREE_MAPS:
            positional = [a for a in call.args if a.keyword is None and not a.star]
            if len(positional) >= 2:
                return self._classify(positional[1].value, scope, d, seen)
            return Payload("unknown", call)
        if name == "optax.apply_updates":
            return Payload("params", call)
        if self.is_train_state_create(call, scope):
            return Payload("train_state", call)
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method == "apply_gradients":
                return Payload("train_state", call)
            if method == "replace":
                inner = self._classify(func.value, scope, d, seen)
                if inner.kind in ("train_state", "cycle"):
                    return Payload(inner.kind, call)  # `state = state.replace(...)` keeps its kind
                return Payload("unknown", call)
            if method == "init" and self.facts.pipeline_for(func.value, scope) is not None:
                return Payload("opt_state", call)
        restore = self._restore_by_call.get(call)
        if restore is not None:
            if restore.target == "given" and restore.target_payload is not None:
                return restore.target_payload
            return Payload("unknown", call, reason="restored without a target")
        fn = self.function_of(call.func, scope)
        if fn is not None and fn[0] not in seen:
            return self._classify_returns(fn[0], d, seen | {fn[0]})
        return Payload("unknown", call)

    @functools.cached_property
    def _restore_by_call(self) -> dict[cst.Call, RestoreSite]:
        return {r.call: r for r in self.restores}

    def _classify_returns(self, fn: Scope, d: int, seen: frozenset, index: Optional[int] = None) -> Payload:
        kinds = []
        for ret in fn.returns:
            value = ret.node.value
            if value is None:
                continue
            if index is not None:
                if isinstance(value, (cst.Tuple, cst.List)) and index < len(value.elements):
                    value = value.elements[index].value
                else:
                    return Payload("unknown", value)
            kinds.append(self._classify(value, fn, d, seen))
        return _combine(kinds)

    def _classify_name(self, expr: cst.Name, scope: Scope, d: int, seen: frozenset) -> Payload:
        name = expr.value
        owner, bindings = lookup(name, scope)
        key = (name, id(owner))
        if key in seen:
            return Payload("cycle", expr)
        seen = seen | {key}
        kinds = []
        for b in bindings:
            kinds.append(self._classify_binding(b, d, seen))
        real = [k for k in kinds if k.kind != "cycle"]
        combined = _combine(real) if real else Payload("unknown", expr)
        if combined.kind in ("unknown", "dict") and params_name(name):
            return Payload("params", expr)
        if combined.kind == "unknown":
            if params_name(name):
                return Payload("params", expr)
            if opt_name(name):
                return Payload("opt_state", expr)
        if combined.kind == "dict" and len(real) != 1:
            return Payload("unknown", expr)
        return combined

    def _classify_binding(self, b: Binding, d: int, seen: frozenset) -> Payload:
        if b.kind == "param":
            param = b.node if isinstance(b.node, cst.Param) else None
            if param is not None and param.annotation is not None:
                text = node_text(param.annotation.annotation)
                if text.endswith("TrainState") or text.endswith("TrainState]"):
                    return Payload("train_state", param.name)
            return Payload("unknown", None)
        if b.kind in ("assign", "annassign", "with", "walrus") and b.value is not None and not b.index:
            if _threads(b.value, b.name):
                return Payload("cycle", b.value)
            return self._classify(b.value, b.scope, d, seen)
        if b.kind == "unpack" and b.value is not None:
            value = b.value
            if isinstance(value, (cst.Tuple, cst.List)) and len(b.index) == 1 and b.index[0] < len(value.elements):
                return self._classify(value.elements[b.index[0]].value, b.scope, d, seen)
            if isinstance(value, cst.Call):
                if _threads(value, b.name):
                    return Payload("cycle", value)
                fn = self.function_of(value.func, b.scope)
                if fn is not None and len(b.index) == 1 and fn[0] not in seen:
                    return self._classify_returns(fn[0], d, seen | {fn[0]}, index=b.index[0])
            return Payload("unknown", value)
        return Payload("unknown", None)

    def is_train_state_create(self, call: cst.Call, scope: Scope) -> bool:
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "create"):
            return False
        name = self.qual(func.value, scope)
        if name is not None and (name.endswith("TrainState") or name in (LINEN_TRAIN_STATE, NNX_TRAIN_STATE)):
            return True
        if isinstance(func.value, cst.Name):
            _, bindings = lookup(func.value.value, scope)
            for b in bindings:
                if b.kind == "class" and isinstance(b.node, cst.ClassDef):
                    for base in b.node.bases:
                        base_name = self.qual(base.value, b.scope) or node_text(base.value)
                        if base_name.endswith("TrainState"):
                            return True
            if not bindings and func.value.value.endswith("TrainState"):
                return True
        return False


def subscript_key(expr: cst.Subscript, scope: Scope) -> Optional[str]:
    """The string key of `x['key']` (a constant or a name bound to one)."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    key = value_of(expr.slice[0].slice.value, scope)
    return key if isinstance(key, str) else None


def _threads(value: cst.BaseExpression, name: str) -> bool:
    """`state = f(state, ...)` / `state, m = step(state, batch)`: the value is computed
    from the same name, so it is assumed to keep its kind (state threading)."""
    if not isinstance(value, cst.Call):
        return False
    for arg in value.args:
        if isinstance(arg.value, cst.Name) and arg.value.value == name:
            return True
    return False


def _combine(kinds: list[Payload]) -> Payload:
    if not kinds:
        return Payload("unknown", None)
    if any(k.kind == "unknown" for k in kinds):
        return Payload("unknown", kinds[0].node)
    distinct = {k.kind for k in kinds}
    if len(distinct) == 1:
        if kinds[0].kind == "dict" and len(kinds) > 1:
            return Payload("unknown", kinds[0].node)
        return kinds[0]
    return Payload("unknown", kinds[0].node)
