"""Optimizer state: where an `opt_state` comes from, what it looks like, and where it is read.

Three facts, all static and all allowed to be "unknown":

- **Origins.** What an expression holds, traced back through the module: an optimizer
  (`tx`), the state one of them built (`opt_state = tx.init(params)`, carried through
  `updates, opt_state = tx.update(...)`, the returns of jitted steps and their callers,
  and `TrainState.opt_state`), a flax `TrainState` or nnx `Optimizer` holding one, or the
  updates an optax `update` produced. A state keeps the pipeline whose `init` built it,
  so `update` on another optimizer can be told apart (OPX608).
- **Layouts.** The shape of a pipeline's state: `chain` is a tuple (one element per
  transformation), `named_chain` a dict, `inject_hyperparams` an
  `InjectStatefulHyperparamsState` with its hyperparameters (and which are scheduled),
  `MultiSteps` a `MultiStepsState` holding `.inner_opt_state`, `masked`/`apply_if_finite`
  an `.inner_state`, `multi_transform` `.inner_states[label].inner_state`.
- **Accesses.** `X.hyperparams[...]` reads and `optax.tree_utils.tree_get/tree_set`
  (and `optax.tree.get/set`) calls, each linked to the origin of `X`.

Everything is computed from the walker's records and short walks of the subtrees that
matter; whatever cannot be followed resolves to nothing, and the rules stay silent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional, Union

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline, TxNode
from optax_lint.facts.pipelines.updates import NNX_OPTIMIZER, TRAIN_STATE_CREATE
from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import (
    AttributeRecord,
    Binding,
    CallRecord,
    Scope,
    iter_children,
    walk,
)

JIT_WRAPPERS = frozenset(
    {"jax.jit", "jax.pmap", "flax.nnx.jit", "flax.nnx.pmap", "jax.experimental.pjit.pjit", "equinox.filter_jit"}
)
TREE_GET = "optax.tree_utils.tree_get"
TREE_SET = "optax.tree_utils.tree_set"
# Calls that hand back their first argument's pytree unchanged in structure.
_PRESERVING = frozenset(
    {"jax.device_put", "jax.block_until_ready", "flax.jax_utils.replicate", "flax.jax_utils.unreplicate", TREE_SET}
)
# Attributes of optax state NamedTuples that lead to an inner state.
STATE_ATTRS = frozenset({"inner_opt_state", "inner_state", "inner_states", "hyperparams", "hyperparams_states"})
INJECT_WRAPPERS = frozenset({"inject_hyperparams", "inject_stateful_hyperparams"})
# TxNode.reason of unknown chain elements that may stand for any number of elements.
_MULTI_ELEMENT_REASONS = ("*arguments not a list", "not a list built in this function", "** arguments", "with an unknown value", "insert at an unknown index")

Step = tuple  # ("index", int) | ("key", str) | ("attr", str)


# ---------------------------------------------------------------------------
# Origins


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


@dataclass(eq=False)
class FunctionInfo:
    scope: Scope
    node: cst.FunctionDef
    params: list[str]  # positional parameters in order
    kwonly: list[str]
    method: bool = False
    jitted: bool = False
    static: set[str] = field(default_factory=set)  # static_argnums / static_argnames
    calls: list[CallRecord] = field(default_factory=list)  # call sites (directly or through jit(f))
    escapes: bool = False  # passed to something we cannot follow (scan, partial, ...)

    @property
    def name(self) -> str:
        return self.node.name.value

    def arg_for(self, call: cst.Call, param: str) -> Optional[cst.Arg]:
        """The argument a call passes for `param` (None when missing, or possibly hidden
        in a `*args` before its position or in a `**kwargs`)."""
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == param:
                return arg
        if param not in self.params:
            return None
        position = self.params.index(param)
        seen = 0
        for arg in call.args:
            if arg.keyword is not None or arg.star == "**":
                break
            if arg.star == "*":
                return None
            if seen == position:
                return arg
            seen += 1
        return None


# ---------------------------------------------------------------------------
# Layouts


@dataclass(eq=False)
class Layout:
    kind: str  # tuple | dict | inject | fields | opaque | unknown
    node: Optional[TxNode] = None
    items: list["Layout"] = field(default_factory=list)  # tuple elements
    exact_upto: int = 0  # tuple: items[:exact_upto] are surely at their index
    keys: dict = field(default_factory=dict)  # dict: named_chain names / partition labels
    keys_complete: bool = True
    fields: tuple = ()  # NamedTuple fields (inject / fields kinds)
    inner_field: str = ""  # the field holding the inner state
    inner: Optional["Layout"] = None
    hyper: dict = field(default_factory=dict)  # inject: name -> "const" | "sched" | "unknown"
    hyper_complete: bool = False
    state_name: str = ""  # for messages

    def __repr__(self) -> str:
        inside = ""
        if self.kind == "tuple":
            inside = ", ".join(map(repr, self.items)) + ("" if self.exact_upto == len(self.items) else f"; exact_upto={self.exact_upto}")
        elif self.kind == "dict":
            inside = ", ".join(f"{k!r}: {v!r}" for k, v in self.keys.items())
        elif self.kind == "inject":
            inside = f"{self.hyper}, {self.inner!r}"
        elif self.kind == "fields":
            inside = f"{self.inner_field}={self.inner!r}"
        elif self.node is not None:
            inside = self.node.key
        return f"{self.kind}({inside})"

    def walk(self) -> Iterator["Layout"]:
        yield self
        for item in self.items:
            yield from item.walk()
        for value in self.keys.values():
            yield from value.walk()
        if self.inner is not None:
            yield from self.inner.walk()

    @property
    def complete(self) -> bool:
        """Every part of the state is known (no unknown transformation, no unknown element count)."""
        for layout in self.walk():
            if layout.kind == "unknown" or not layout.keys_complete:
                return False
            if layout.kind == "tuple" and layout.exact_upto < len(layout.items):
                return False
        return True

    def injects(self, prefix: tuple = ()) -> list[tuple[Optional[tuple], "Layout"]]:
        """Every inject_hyperparams state, with its path (None when its index is uncertain)."""
        out: list[tuple[Optional[tuple], Layout]] = []
        if self.kind == "inject":
            out.append((prefix, self))
        if self.kind == "tuple":
            for i, item in enumerate(self.items):
                path = prefix + (("index", i),) if prefix is not None and i < self.exact_upto else None
                out.extend(item.injects(path))
        elif self.kind == "dict":
            for key, item in self.keys.items():
                out.extend(item.injects(prefix + (("key", key),) if prefix is not None else None))
        if self.inner is not None:
            out.extend(self.inner.injects(prefix + (("attr", self.inner_field),) if prefix is not None else None))
        return out

    def follow(self, steps: tuple) -> tuple[Optional["Layout"], str]:
        """The layout at `steps`: (layout, ""), (None, error) when the access fails at
        run time, or (None, "") when it cannot be known."""
        layout: Layout = self
        for step in steps:
            kind, value = step
            if layout.kind == "unknown":
                return None, ""
            if layout.kind == "tuple":
                if kind == "index":
                    n = len(layout.items)
                    if layout.exact_upto == n and not -n <= value < n:
                        return None, f"index {value} is out of range for a chain of {n}"
                    if 0 <= value < layout.exact_upto or (layout.exact_upto == n and value < 0):
                        layout = layout.items[value]
                        continue
                    return None, ""
                return None, f"the chain's state is a tuple, it has no {_step_text(step)}"
            if layout.kind == "dict":
                if kind == "key" and value in layout.keys:
                    layout = layout.keys[value]
                    continue
                if not layout.keys_complete:
                    return None, ""
                return None, f"{layout.state_name} has no key {value!r}"
            if layout.kind in ("inject", "fields"):
                name = value if kind == "attr" else (layout.fields[value] if kind == "index" and -len(layout.fields) <= value < len(layout.fields) else None)
                if name is None:
                    return None, f"{layout.state_name} has no {_step_text(step)}"
                if name == layout.inner_field:
                    layout = layout.inner if layout.inner is not None else Layout("unknown")
                    continue
                if name in layout.fields:
                    layout = Layout("leaf", state_name=f"{layout.state_name}.{name}")
                    continue
                return None, f"{layout.state_name} has no attribute {name!r}"
            if layout.kind == "opaque":
                if kind == "attr" and value in STATE_ATTRS:
                    return None, f"{layout.state_name} has no attribute {value!r}"
                return None, ""  # inside a transformation's own state: not modelled
            if layout.kind == "leaf":
                return None, f"{layout.state_name} has no {_step_text(step)}"
            return None, ""
        return layout, ""


def _step_text(step: Step) -> str:
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


# ---------------------------------------------------------------------------
# Access sites


@dataclass(eq=False)
class HyperparamsAccess:
    node: cst.Attribute  # `X.hyperparams`
    record: AttributeRecord
    key: Optional[str]  # literal key of X.hyperparams["..."], if any
    held: Optional[Held]  # origin of X (a state, with its path)
    base: Optional[cst.BaseExpression]  # X with the trailing state steps removed
    base_held: Optional[Held]
    steps: tuple  # the steps from `base` to X, as written
    guarded: bool  # behind hasattr/isinstance/try

    @property
    def scope(self) -> Scope:
        return self.record.scope


@dataclass(eq=False)
class TreeAccess:
    kind: str  # get | set
    record: CallRecord
    state_arg: Optional[cst.Arg]
    held: Optional[Held]
    key: Optional[str]  # get: the key
    names: tuple[str, ...]  # set: the keyword names
    filtered: bool  # a filtering function is given
    complete: bool  # every argument is visible (no * / **)

    @property
    def call(self) -> cst.Call:
        return self.record.node


# ---------------------------------------------------------------------------


class StateFacts:
    def __init__(self, facts) -> None:
        self.facts = facts
        self.raw = facts.raw
        self._cache: dict[tuple[int, int], Optional[Held]] = {}
        self._stack: set = set()
        self._budget = 0
        self._layouts: dict[int, Layout] = {}
        self.functions: dict[cst.FunctionDef, FunctionInfo] = {}
        self._callee_cache: dict[int, Optional[FunctionInfo]] = {}
        self._reads: Optional[list] = None
        self._build_functions()

    # -- functions, jit, call sites --------------------------------------
    def _build_functions(self) -> None:
        for node, scope in self.raw.functions.items():
            params = node.params
            positional = [p.name.value for p in list(params.posonly_params) + list(params.params)]
            kwonly = [p.name.value for p in params.kwonly_params]
            parent = scope.parent
            info = FunctionInfo(scope, node, positional, kwonly, method=parent is not None and parent.kind == "class")
            for decorator in node.decorators:
                spec = self.jit_spec(decorator.decorator, parent, decorator_form=True)
                if spec is not None:
                    info.jitted = True
                    info.static |= self._static_names(spec, info)
            self.functions[node] = info
        if not self.functions:
            return
        # Names that can reach a local function: the defs, and names bound to jit(def).
        def_names = {info.name for info in self.functions.values()}
        reaching = set(def_names)
        for record in self.raw.calls:
            call = record.node
            func = call.func
            first = call.args[0].value if call.args and call.args[0].keyword is None else None
            target = None
            if isinstance(first, cst.Name) and first.value in def_names and isinstance(func, (cst.Name, cst.Attribute, cst.Call)):
                spec = self.jit_spec(call, record.scope, decorator_form=False)
                if spec is not None:
                    target = self._def_of(first.value, record.scope)
                    if target is not None:
                        target.jitted = True
                        target.static |= self._static_names(spec, target)
                        if isinstance(record.assigned_to, cst.Name):
                            reaching.add(record.assigned_to.value)
            for i, arg in enumerate(call.args):
                value = arg.value
                if isinstance(value, cst.Name) and value.value in def_names and not (target is not None and i == 0):
                    escaped = self._def_of(value.value, record.scope)
                    if escaped is not None:
                        escaped.escapes = True
        for record in self.raw.calls:
            func = record.node.func
            if isinstance(func, cst.Name) and func.value not in reaching:
                continue
            if isinstance(func, cst.Attribute):
                continue
            info = self.callee(record.node, record.scope)
            if info is not None:
                info.calls.append(record)

    def _def_of(self, name: str, scope: Scope) -> Optional[FunctionInfo]:
        _, bindings = lookup(name, scope)
        defs = [b for b in bindings if b.kind == "def"]
        if len(defs) != 1:
            return None
        others = [b for b in bindings if b.kind != "def"]
        # `train_step = jax.jit(train_step)` rebinds the name to the jitted function.
        if any(not self._is_jit_of(b, name) for b in others):
            return None
        return self.functions.get(defs[0].node)

    def _is_jit_of(self, binding: Binding, name: str) -> bool:
        value = binding.value
        return (
            binding.kind == "assign" and isinstance(value, cst.Call) and self.jit_spec(value, binding.scope, decorator_form=False) is not None
            and bool(value.args) and isinstance(value.args[0].value, cst.Name) and value.args[0].value.value == name
        )

    def jit_spec(self, expr: cst.BaseExpression, scope: Optional[Scope], *, decorator_form: bool) -> Optional[dict]:
        """The keyword arguments (static_argnums, ...) when `expr` jits a function, else None.

        Decorators: `@jax.jit`, `@partial(jax.jit, ...)`, `@nnx.jit(...)`.
        Wrapper calls: `jax.jit(f, ...)`, `partial(jax.jit, ...)(f)`.
        """
        if scope is None:
            return None
        canonical = self.facts.canonical
        if decorator_form:
            if not isinstance(expr, cst.Call):
                return {} if canonical(expr, scope) in JIT_WRAPPERS else None
            keywords = {a.keyword.value: a.value for a in expr.args if a.keyword is not None}
            callee = canonical(expr.func, scope)
            positional = [a for a in expr.args if a.keyword is None]
            if callee in JIT_WRAPPERS and not positional:
                return keywords
            if callee == "functools.partial" and len(positional) == 1 and canonical(positional[0].value, scope) in JIT_WRAPPERS:
                return keywords
            return None
        if not isinstance(expr, cst.Call) or not expr.args or expr.args[0].keyword is not None:
            return None
        if isinstance(expr.func, cst.Call):
            return self.jit_spec(expr.func, scope, decorator_form=True)
        if canonical(expr.func, scope) in JIT_WRAPPERS:
            return {a.keyword.value: a.value for a in expr.args if a.keyword is not None}
        return None

    def _static_names(self, spec: dict, info: FunctionInfo) -> set[str]:
        out: set[str] = set()
        scope = info.scope.parent or info.scope
        nums = value_of(spec["static_argnums"], scope) if "static_argnums" in spec else ()
        names = value_of(spec["static_argnames"], scope) if "static_argnames" in spec else ()
        for value, kind in ((nums, "num"), (names, "name")):
            if isinstance(value, Unknown):
                out.add("*")  # unknown static arguments
                continue
            items = value if isinstance(value, (tuple, list)) else (value,)
            for item in items:
                if kind == "num" and isinstance(item, int) and -len(info.params) <= item < len(info.params):
                    out.add(info.params[item])
                elif kind == "name" and isinstance(item, str):
                    out.add(item)
        return out

    def callee(self, call: cst.Call, scope: Scope) -> Optional[FunctionInfo]:
        """The module's own function a call runs (directly, or through `jax.jit(f)`)."""
        key = id(call)
        if key in self._callee_cache:
            return self._callee_cache[key]
        info = None
        func = call.func
        if isinstance(func, cst.Name):
            info = self._def_of(func.value, scope)
            if info is None:
                _, bindings = lookup(func.value, scope)
                if len(bindings) == 1 and bindings[0].kind == "assign" and isinstance(bindings[0].value, cst.Call):
                    wrapper = bindings[0].value
                    if self.jit_spec(wrapper, bindings[0].scope, decorator_form=False) is not None and wrapper.args and isinstance(wrapper.args[0].value, cst.Name):
                        info = self._def_of(wrapper.args[0].value.value, bindings[0].scope)
        elif isinstance(func, cst.Call) and self.jit_spec(func, scope, decorator_form=False) is not None:
            if func.args and isinstance(func.args[0].value, cst.Name):
                info = self._def_of(func.args[0].value.value, scope)
        if info is not None and info.method:
            info = None
        self._callee_cache[key] = info
        return info

    def function_of(self, scope: Scope) -> Optional[FunctionInfo]:
        """The function a scope belongs to (the innermost enclosing def)."""
        while scope is not None and scope.kind not in ("function", "module"):
            scope = scope.parent
        if scope is None or scope.kind != "function":
            return None
        return self.functions.get(scope.node)

    # -- origins -----------------------------------------------------------
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
        info = self.functions.get(scope.node)
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
        info = self.callee(call, scope)
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
        if not (isinstance(func, cst.Attribute) and func.attr.value == "create" and isinstance(func.value, cst.Name)):
            return False
        _, bindings = lookup(func.value.value, scope)
        if len(bindings) != 1 or bindings[0].kind != "class":
            return False
        klass = bindings[0].node
        for base in klass.bases:
            name = self.facts.canonical(base.value, bindings[0].scope) or ""
            if name.endswith("TrainState"):
                return True
        return False

    # -- layouts -----------------------------------------------------------
    def layout(self, pipeline: Pipeline) -> Layout:
        key = id(pipeline)
        if key not in self._layouts:
            self._layouts[key] = self._layout(pipeline.root)
        return self._layouts[key]

    def _layout(self, node: TxNode) -> Layout:
        short = node.short
        if node.kind == "unknown":
            return Layout("unknown", node)
        if node.kind in ("alias", "transform"):
            return Layout("opaque", node, state_name=f"the state of {node.short}")
        if short in INJECT_WRAPPERS:
            child = node.children[0] if node.children else None
            inner = self._layout(child) if child is not None and child.kind != "unknown" else Layout("unknown", child)
            layout = Layout(
                "inject", node, fields=("count", "hyperparams", "hyperparams_states", "inner_state"),
                inner_field="inner_state", inner=inner, state_name="an InjectStatefulHyperparamsState",
            )
            layout.hyper, layout.hyper_complete = self._hyperparams(node, child)
            return layout
        if short == "chain":
            items = [self._layout(c) for c in node.children]
            exact = 0
            for child in node.children:
                if child.conditional or (child.kind == "unknown" and (child.slot is None or any(r in child.reason for r in _MULTI_ELEMENT_REASONS))):
                    break
                exact += 1
            return Layout("tuple", node, items=items, exact_upto=exact, state_name="the chain's state (a tuple)")
        if short == "named_chain":
            keys, complete = {}, True
            for label, child in zip(node.labels, node.children):
                if isinstance(label, str) and not child.conditional:
                    keys[label] = self._layout(child)
                else:
                    complete = False
            if len(node.labels) != len(node.children):
                complete = False
            return Layout("dict", node, keys=keys, keys_complete=complete, state_name="the named_chain's state (a dict)")
        if short == "MultiSteps":
            inner = self._layout(node.children[0]) if node.children else Layout("unknown")
            return Layout(
                "fields", node, fields=("mini_step", "gradient_step", "inner_opt_state", "acc_grads", "skip_state"),
                inner_field="inner_opt_state", inner=inner, state_name="a MultiStepsState",
            )
        if short == "apply_if_finite":
            inner = self._layout(node.children[0]) if node.children else Layout("unknown")
            return Layout(
                "fields", node, fields=("notfinite_count", "last_finite", "total_notfinite", "inner_state"),
                inner_field="inner_state", inner=inner, state_name="an ApplyIfFiniteState",
            )
        if short == "masked":
            inner = self._layout(node.children[0]) if node.children else Layout("unknown")
            return Layout("fields", node, fields=("inner_state",), inner_field="inner_state", inner=inner, state_name="a MaskedState")
        if short in ("multi_transform", "partition"):
            keys, complete = {}, len(node.labels) == len(node.children)
            for label, child in zip(node.labels, node.children):
                if isinstance(label, str):
                    keys[label] = Layout("fields", child, fields=("inner_state",), inner_field="inner_state", inner=self._layout(child), state_name="a MaskedState")
                else:
                    complete = False
            states = Layout("dict", node, keys=keys, keys_complete=complete, state_name="PartitionState.inner_states (a dict)")
            return Layout("fields", node, fields=("inner_states",), inner_field="inner_states", inner=states, state_name="a PartitionState")
        return Layout("unknown", node)

    def _hyperparams(self, wrapper: TxNode, child: Optional[TxNode]) -> tuple[dict, bool]:
        """The hyperparams dict of an inject_hyperparams state: name -> const | sched | unknown."""
        static: set[str] = set()
        complete = True
        if wrapper.args is not None and wrapper.args.given("static_args"):
            value = wrapper.args.value("static_args")
            if isinstance(value, str):
                static = {value}
            elif isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
                static = set(value)
            else:
                complete = False
        out: dict[str, str] = {}
        if child is None:
            return out, False
        entry = child.entry
        if entry is None or child.args is None:
            call = child.call
            if isinstance(call, cst.Call):
                for arg in call.args:
                    if arg.keyword is not None and arg.keyword.value not in static:
                        kind = self.classify(arg.value, child.scope)
                        if kind is not None:
                            out[arg.keyword.value] = kind
            return out, False
        args = child.args
        if args.has_star or args.unmatched:
            complete = False
        for param in entry.params + tuple(p for p in entry.kwonly if p not in entry.params):
            if param in static:
                continue
            expr = args.expr(param)
            if expr is not None:
                kind = self.classify(expr, child.scope)
            elif param in entry.defaults:
                default = entry.defaults[param]
                kind = "const" if isinstance(default, (int, float)) and not isinstance(default, bool) else None
            elif param in entry.none_defaults or param not in entry.params:
                kind = None
            else:
                kind = "unknown"  # a non-literal default (a dtype, a function)
            if kind is not None:
                out[param] = kind
        return out, complete

    def classify(self, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
        """How inject_hyperparams treats an argument: const (numeric), sched (callable),
        None (bool/None/str: not a hyperparameter), unknown."""
        if self.facts.schedule_of(expr, scope) is not None or isinstance(expr, cst.Lambda):
            return "sched"
        if isinstance(expr, cst.Name):
            _, bindings = lookup(expr.value, scope)
            if len(bindings) == 1 and bindings[0].kind == "def":
                return "sched"
        value = value_of(expr, scope)
        if isinstance(value, Unknown):
            return "unknown"
        if isinstance(value, bool) or value is None or isinstance(value, (str, dict, list, tuple)):
            return None
        if isinstance(value, (int, float)):
            return "const"
        return "unknown"

    # -- accesses ----------------------------------------------------------
    def hyperparams_accesses(self) -> list[HyperparamsAccess]:
        out = []
        for record in self.raw.attributes:
            node = record.node
            if node.attr.value != "hyperparams":
                continue
            base, steps = split_state_expr(node.value)
            held = self.held(node.value, record.scope)
            base_held = self.held(base, record.scope) if base is not node.value else held
            out.append(
                HyperparamsAccess(
                    node, record, self._subscript_key(record.statement, node),
                    held if held is not None and held.kind == "state" else None,
                    base, base_held if base_held is not None and base_held.kind == "state" else None,
                    steps, self._guarded(record.statement, record.scope),
                )
            )
        return out

    def tree_accesses(self) -> list[TreeAccess]:
        out = []
        by_name = self.facts.calls_by_name
        for kind, name in (("get", TREE_GET), ("set", TREE_SET)):
            for record in by_name.get(name, ()):
                call = record.node
                complete = not any(a.star for a in call.args)
                positional = [a for a in call.args if a.keyword is None and not a.star]
                keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
                state_arg = positional[0] if positional else keywords.get("tree")
                held = self.held(state_arg.value, record.scope) if state_arg is not None else None
                if held is not None and held.kind != "state":
                    held = None
                if kind == "get":
                    key_arg = positional[1] if len(positional) > 1 else keywords.get("key")
                    key = value_of(key_arg.value, record.scope) if key_arg is not None else None
                    filtered = len(positional) > 3 or "filtering" in keywords
                    out.append(TreeAccess("get", record, state_arg, held, key if isinstance(key, str) else None, (), filtered, complete))
                else:
                    names = tuple(k for k in keywords if k != "tree")
                    out.append(TreeAccess("set", record, state_arg, held, None, names, len(positional) > 1, complete))
        return out

    @staticmethod
    def _subscript_key(statement: cst.CSTNode, attribute: cst.Attribute) -> Optional[str]:
        for node in walk(statement):
            if isinstance(node, cst.Subscript) and node.value is attribute:
                step = subscript_step(node)
                return step[1] if step is not None and step[0] == "key" else None
        return None

    def _guarded(self, statement: cst.CSTNode, scope: Scope) -> bool:
        """Behind `hasattr(x, "hyperparams")`, an isinstance check, or inside a try."""
        current: Optional[cst.CSTNode] = statement
        first = True
        while current is not None and not isinstance(current, (cst.Module, cst.FunctionDef, cst.ClassDef)):
            if isinstance(current, cst.Try) and not first:
                return True
            probe = current.test if isinstance(current, (cst.If, cst.While)) else (current if first else None)
            if probe is not None and self._has_guard_call(probe, scope):
                return True
            first = False
            current = self.raw.parent_stmt.get(current)
        return False

    def _has_guard_call(self, node: cst.CSTNode, scope: Scope) -> bool:
        for sub in walk(node):
            if isinstance(sub, cst.Call) and isinstance(sub.func, cst.Name) and sub.func.value in ("hasattr", "isinstance", "getattr"):
                return True
        return False

    def state_reads(self) -> list[tuple[cst.CSTNode, Scope, Held]]:
        """Every `x[i]` / `x.inner_state`-style read whose value is an optimizer state
        (computed on demand: only fixes that move a state need it)."""
        if self._reads is None:
            reads = []
            for scope in self.raw.scopes:
                root = scope.node
                if scope.kind not in ("module", "function"):
                    continue
                for node in walk_scope(root.body if isinstance(root, cst.FunctionDef) else root):
                    if isinstance(node, cst.Subscript) or (
                        isinstance(node, cst.Attribute) and node.attr.value in ("inner_opt_state", "inner_state", "inner_states")
                    ):
                        held = self.held(node, scope)
                        if held is not None and held.kind == "state":
                            reads.append((node, scope, held))
            self._reads = reads
        return self._reads

    # -- helpers for rules ---------------------------------------------------
    def enclosing_loop(self, statement: cst.CSTNode) -> tuple[Optional[cst.CSTNode], bool]:
        """The innermost for/while around a statement (in its function), and whether an
        if/try/match stands between them."""
        conditional = False
        current = self.raw.parent_stmt.get(statement)
        while current is not None and not isinstance(current, (cst.Module, cst.FunctionDef, cst.ClassDef)):
            if isinstance(current, (cst.For, cst.While)):
                return current, conditional
            if isinstance(current, (cst.If, cst.Try)) or type(current).__name__ in ("Match", "TryStar"):
                conditional = True
            current = self.raw.parent_stmt.get(current)
        return None, conditional

    def inside(self, statement: cst.CSTNode, ancestor: cst.CSTNode) -> bool:
        current: Optional[cst.CSTNode] = statement
        while current is not None:
            if current is ancestor:
                return True
            current = self.raw.parent_stmt.get(current)
        return False


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


def walk_scope(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Pre-order walk of a scope's own code: nested functions and classes are skipped
    (lambdas are kept: their bodies are where tree-map arithmetic lives)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if node is not root and isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        children = list(iter_children(node))
        children.reverse()
        stack.extend(children)


def name_uses(root: cst.CSTNode, name: str) -> list[cst.Name]:
    """Every `Name` node spelling `name` under `root` (attribute names excluded)."""
    out = []
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            if node.value == name:
                out.append(node)
            continue
        if isinstance(node, cst.Attribute):
            stack.append(node.value)
            continue
        stack.extend(iter_children(node))
    return out


def state_facts(facts) -> StateFacts:
    return facts.memo("state_access", StateFacts)

