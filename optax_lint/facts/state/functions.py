"""The module's own functions as the origin tracing sees them: their parameters,
whether they are jitted (and which arguments are static), their call sites (direct or
through `jax.jit(f)`), and whether they escape to code that cannot be followed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import Binding, CallRecord, Scope

JIT_WRAPPERS = frozenset(
    {"jax.jit", "jax.pmap", "flax.nnx.jit", "flax.nnx.pmap", "jax.experimental.pjit.pjit", "equinox.filter_jit"}
)


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


class FunctionTable:
    """The `FunctionInfo` of every function of one module, built up front."""

    def __init__(self, facts) -> None:
        self.facts = facts
        self.raw = facts.raw
        self.functions: dict[cst.FunctionDef, FunctionInfo] = {}
        self._callee_cache: dict[int, Optional[FunctionInfo]] = {}
        self._build()

    def _build(self) -> None:
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
