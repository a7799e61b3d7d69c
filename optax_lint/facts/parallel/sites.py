"""Mapped steps: every pmap, shard_map / smap, vmap and jit site (decorator, call, or
`functools.partial(jax.pmap, ...)`), with the local function it maps (resolved through
names, `functools.partial` and lambdas), its axis names, `in_axes` and
`static_broadcasted_argnums`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import libcst as cst

from optax_lint.facts.parallel.calls import has_star, positional_args
from optax_lint.facts.parallel.mesh import (
    mesh_axis_names,
    mesh_axis_sizes,
    partition_spec_replicated,
)
from optax_lint.facts.parallel.names import (
    MAPPER_POSITIONAL,
    MAPPERS,
    PARTIAL,
    PMAP,
    SHARD_MAP,
    VMAP,
    axis_set,
    fmt_axes,
)
from optax_lint.syntax.names import lookup
from optax_lint.syntax.nodes import last_name, node_text
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import CallRecord, Scope


@dataclass(eq=False)
class MappedStep:
    kind: str  # pmap | shard_map | vmap | jit
    mapper: str  # canonical name of the mapper (jax.pmap, jax.shard_map, ...)
    site: cst.CSTNode  # the call (or decorator expression) that maps
    scope: Scope  # the scope the site is written in
    target: Optional[cst.BaseExpression]  # the mapped function expression (None for decorators)
    function: Optional[Scope]  # the local function (def or lambda) that is mapped
    params: dict[str, cst.Arg] = field(default_factory=dict)  # mapper arguments by name
    has_star: bool = False
    bound_positional: int = 0  # arguments bound by functools.partial(f, a, b)
    bound_keywords: frozenset = frozenset()
    decorated: Optional[cst.FunctionDef] = None
    name: Optional[str] = None  # the variable holding the mapped callable (or the def name)
    arg_call: Optional[cst.Call] = None  # the call carrying the mapper's arguments (pmap(...) or partial(...))
    facts: Any = field(default=None, repr=False)

    def arg_value(self, name: str) -> Any:
        arg = self.params.get(name)
        if arg is None:
            return Unknown("arguments passed with * or **") if self.has_star else None
        return value_of(arg.value, self.scope)

    @property
    def axis_names(self) -> Any:
        """frozenset of the names this site binds, None when it binds none, or Unknown."""
        if self.kind == "jit":
            return None
        if self.kind == "shard_map":
            if "axis_name" in self.params:  # jax.smap
                return axis_set(self.arg_value("axis_name"))
            if "axis_names" in self.params:
                value = self.arg_value("axis_names")
                if isinstance(value, (set, frozenset, tuple, list)) and all(isinstance(v, str) for v in value):
                    return frozenset(value) if value else self.mesh_axes()
                return Unknown("axis_names is not static")
            return self.mesh_axes()
        if self.has_star and "axis_name" not in self.params:
            return Unknown("arguments passed with * or **")
        return axis_set(self.arg_value("axis_name"))

    def mesh_axes(self) -> Any:
        arg = self.params.get("mesh")
        if arg is None:
            return Unknown("the mesh comes from the context")
        return mesh_axis_names(self.facts, arg.value, self.scope)

    @property
    def in_axes(self) -> Any:
        if "in_axes" not in self.params:
            return Unknown("* arguments") if self.has_star else 0
        return self.arg_value("in_axes")

    @property
    def static_broadcasted_argnums(self) -> Any:
        if "static_broadcasted_argnums" not in self.params:
            return Unknown("* arguments") if self.has_star else ()
        value = self.arg_value("static_broadcasted_argnums")
        if isinstance(value, int) and not isinstance(value, bool):
            return (value,)
        if isinstance(value, (tuple, list)) and all(isinstance(v, int) for v in value):
            return tuple(value)
        return Unknown("static_broadcasted_argnums is not static")

    def axis_of_arg(self, index: int) -> Any:
        """The mapped axis of the call's positional argument `index`: int, None
        (broadcast or static), or Unknown."""
        static = self.static_broadcasted_argnums
        if isinstance(static, Unknown):
            return static
        if index in static:
            return None
        axes = self.in_axes
        if isinstance(axes, Unknown):
            return axes
        if axes is None or (isinstance(axes, int) and not isinstance(axes, bool)):
            return axes
        if isinstance(axes, (tuple, list)):
            return axes[index] if index < len(axes) and (axes[index] is None or isinstance(axes[index], int)) else Unknown("in_axes entry")
        return Unknown("in_axes is not static")

    @property
    def check_vma(self) -> Any:
        for name in ("check_vma", "check_rep"):
            if name in self.params:
                return self.arg_value(name)
        return True

    @property
    def sharded_jit(self) -> bool:
        return self.kind == "jit" and any(k in self.params for k in ("in_shardings", "out_shardings"))

    def __repr__(self) -> str:
        return f"MappedStep({self.kind}, {self.describe()}, axes={fmt_axes(self.axis_names)})"

    def param_index(self, name: str) -> Optional[int]:
        """Position of the mapped function's parameter `name` among the arguments the
        mapped callable receives (after functools.partial's bound positionals)."""
        if self.function is None or not isinstance(self.function.node, (cst.FunctionDef, cst.Lambda)):
            return None
        params = self.function.node.params
        ordered = [p.name.value for p in list(params.posonly_params) + list(params.params)]
        if name not in ordered:
            return None
        index = ordered.index(name) - self.bound_positional
        return index if index >= 0 else None

    def in_spec_replicated(self, index: int) -> Optional[bool]:
        """shard_map: whether argument `index` comes in replicated (P()), sharded
        (False), or unknown (None)."""
        arg = self.params.get("in_specs")
        if arg is None:
            return None
        expr, scope = arg.value, self.scope
        if isinstance(expr, cst.Name):
            _, bindings = lookup(expr.value, scope)
            if len(bindings) != 1 or bindings[0].value is None or bindings[0].index:
                return None
            expr, scope = bindings[0].value, bindings[0].scope
        if isinstance(expr, (cst.Tuple, cst.List)):
            if any(isinstance(e, cst.StarredElement) for e in expr.elements) or index >= len(expr.elements):
                return None
            return partition_spec_replicated(self.facts, expr.elements[index].value, scope)
        return partition_spec_replicated(self.facts, expr, scope)

    def mesh_sizes(self) -> dict:
        """{axis name: size} when the mesh is built here with literal sizes."""
        arg = self.params.get("mesh")
        return mesh_axis_sizes(self.facts, arg.value, self.scope) if arg is not None else {}

    def describe(self) -> str:
        short = self.mapper.rsplit(".", 1)[-1]
        target = self.function.name if self.function is not None and self.function.kind == "function" else None
        if target is None and self.target is not None:
            target = node_text(self.target)
            if len(target) > 40:
                target = target[:37] + "..."
        return f"{short}({target})" if target else short


class SiteFinder:
    """Finds a module's mapped steps, and the local function an expression names."""

    def __init__(self, facts) -> None:
        self.facts = facts
        self.raw = facts.raw
        self.lambda_scopes = {s.node: s for s in self.raw.scopes if s.kind == "lambda"}

    def find(self) -> list[MappedStep]:
        steps: list[MappedStep] = []
        decorator_nodes: set = set()
        for fdef, fscope in self.raw.functions.items():
            for decorator in fdef.decorators:
                expr = decorator.decorator
                decorator_nodes.add(expr)
                step = self._decorator(expr, fdef, fscope)
                if step is not None:
                    steps.append(step)
        for record in self.raw.calls:
            if record.node in decorator_nodes:
                continue
            step = self._call(record)
            if step is not None:
                steps.append(step)
        return steps

    # -- recognising a mapper ----------------------------------------------
    def _mapper(self, expr: cst.BaseExpression, scope: Scope) -> Optional[tuple[str, Optional[cst.Call]]]:
        """(mapper name, the partial(...) call carrying its arguments) for `jax.pmap`
        or `functools.partial(jax.pmap, ...)`."""
        name = self.facts.canonical(expr, scope)
        if name in MAPPERS:
            return name, None
        if isinstance(expr, cst.Call) and self.facts.canonical(expr.func, scope) in PARTIAL:
            positional = positional_args(expr)
            if positional:
                inner = self.facts.canonical(positional[0].value, scope)
                if inner in MAPPERS:
                    return inner, expr
        return None

    def _bind(self, step: MappedStep, call: Optional[cst.Call], skip: int) -> None:
        """Mapper arguments of `call` (after the first `skip` positionals) by name."""
        if call is None:
            return
        step.arg_call = call
        names = MAPPER_POSITIONAL.get(step.mapper, ())
        for i, arg in enumerate(a for a in call.args if a.keyword is None):
            if arg.star:
                step.has_star = True
                continue
            j = i - skip
            if 0 <= j < len(names):
                step.params[names[j]] = arg
            elif j >= 0:
                step.has_star = True  # an argument we cannot place
        for arg in call.args:
            if arg.keyword is not None:
                step.params[arg.keyword.value] = arg
            elif arg.star == "**":
                step.has_star = True

    def _make(self, mapper: str, site, scope) -> MappedStep:
        kind = "pmap" if mapper in PMAP else "shard_map" if mapper in SHARD_MAP else "vmap" if mapper in VMAP else "jit"
        return MappedStep(kind, mapper, site, scope, None, None, facts=self.facts)

    def _decorator(self, expr, fdef: cst.FunctionDef, fscope: Scope) -> Optional[MappedStep]:
        scope = fscope.parent
        found = self._mapper(expr, scope)
        if found is not None:  # @jax.pmap / @partial(jax.pmap, axis_name=...)
            mapper, partial_call = found
            step = self._make(mapper, expr, scope)
            self._bind(step, partial_call, 1)
        elif isinstance(expr, cst.Call) and self.facts.canonical(expr.func, scope) in MAPPERS and not positional_args(expr):
            # @jax.shard_map(mesh=..., in_specs=..., out_specs=...) / @jax.jit(...)-style factories
            step = self._make(self.facts.canonical(expr.func, scope), expr, scope)
            self._bind(step, expr, 0)
        else:
            return None
        step.function = fscope
        step.decorated = fdef
        step.name = fdef.name.value
        return step

    def _call(self, record: CallRecord) -> Optional[MappedStep]:
        call, scope = record.node, record.scope
        found = self._mapper(call.func, scope)
        if found is not None and found[1] is not None:
            # functools.partial(jax.pmap, axis_name=...)(train_step)
            mapper, partial_call = found
            positional = positional_args(call)
            if not positional:
                return None
            step = self._make(mapper, call, scope)
            self._bind(step, partial_call, 1)
            step.target = positional[0].value
        else:
            mapper = self.facts.canonical(call.func, scope)
            if mapper not in MAPPERS:
                return None
            positional = [a for a in call.args if a.keyword is None]
            if not positional or positional[0].star:
                return None  # a decorator factory (shard_map(mesh=...)) used as a value
            step = self._make(mapper, call, scope)
            self._bind(step, call, 1)
            step.target = positional[0].value
        self._resolve_target(step)
        if isinstance(record.assigned_to, cst.Name):
            step.name = record.assigned_to.value
        return step

    def _resolve_target(self, step: MappedStep) -> None:
        fn, positional, keywords = self.resolve_function(step.target, step.scope)
        step.function, step.bound_positional, step.bound_keywords = fn, positional, frozenset(keywords)

    def _method(self, owner: str, name: str, scope: Scope) -> tuple[Optional[Scope], int, set]:
        """`self.train_step` inside a method, or `Trainer.train_step`: the method the class
        defines, with `self` bound for the first (a staticmethod binds nothing)."""
        cls: Optional[Scope] = None
        if owner == "self":
            cls = scope.enclosing_class()
        else:
            _, bindings = lookup(owner, scope)
            if len(bindings) == 1 and bindings[0].kind == "class":
                cls = next((s for s in self.raw.scopes if s.node is bindings[0].node), None)
        defs = cls.bindings.get(name, []) if cls is not None else []
        method = self.raw.functions.get(defs[0].node) if len(defs) == 1 and defs[0].kind == "def" else None
        if method is None:
            return None, 0, set()
        decorators = {last_name(d.decorator) for d in method.node.decorators}
        if "staticmethod" in decorators:
            return method, 0, set()
        if decorators - {"classmethod"}:
            return None, 0, set()  # a property or a wrapped method: not the function itself
        # Through the instance (or a classmethod through either), the first parameter is bound.
        return method, 1 if owner == "self" or "classmethod" in decorators else 0, set()

    def resolve_function(self, expr, scope, depth: int = 0) -> tuple[Optional[Scope], int, set]:
        """The local function an expression names: def, lambda, or functools.partial of one."""
        if expr is None or depth > 6:
            return None, 0, set()
        if isinstance(expr, cst.Lambda):
            return self.lambda_scopes.get(expr), 0, set()
        if isinstance(expr, cst.Name):
            _, bindings = lookup(expr.value, scope)
            if len(bindings) != 1:
                return None, 0, set()
            binding = bindings[0]
            if binding.kind == "def":
                return self.raw.functions.get(binding.node), 0, set()
            if binding.kind in ("assign", "annassign") and binding.value is not None and not binding.index:
                return self.resolve_function(binding.value, binding.scope, depth + 1)
            return None, 0, set()
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            return self._method(expr.value.value, expr.attr.value, scope)
        if isinstance(expr, cst.Call) and self.facts.canonical(expr.func, scope) in PARTIAL and not has_star(expr):
            positional = positional_args(expr)
            if not positional:
                return None, 0, set()
            fn, n, kws = self.resolve_function(positional[0].value, scope, depth + 1)
            kws = set(kws) | {a.keyword.value for a in expr.args if a.keyword is not None}
            return fn, n + len(positional) - 1, kws
        return None, 0, set()
