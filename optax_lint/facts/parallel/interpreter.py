"""A small abstract interpreter over a function body, and the abstract values it shares
between the gradient (grads.py) and host-side (host.py) interpreters. Whatever cannot be
followed is `UNK`; values that carry nothing of interest are `CLEAN`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import libcst as cst

from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import value_of
from optax_lint.syntax.walker import Scope, iter_children


@dataclass(frozen=True)
class AUnknown:
    why: str = ""


UNK = AUnknown()


@dataclass(frozen=True)
class AClean:
    pass


CLEAN = AClean()


@dataclass(frozen=True, eq=False)
class ATuple:
    items: tuple


@dataclass(frozen=True, eq=False)
class AContainer:
    """A dict (or other container) literal: what matters is what it holds."""

    items: tuple


@dataclass(frozen=True)
class ALocalFn:
    scope: Scope = field(repr=False)
    bound: tuple = ()  # abstract values of partial-bound positional arguments


class Interpreter:
    """Sequential abstract execution of a function body over a small value domain.

    Subclasses give `call`, `join2` and the global fallback; this class walks the
    statements, binds targets (tuple unpacking included), joins branches and
    evaluates expressions structurally."""

    MAX_DEPTH = 4

    def __init__(self, pf) -> None:
        # pf: the module's ParallelFacts (steps.py), for its sites and collectives.
        self.pf = pf
        self.facts = pf.facts
        self.stack: list[Scope] = []
        self._memo: dict = {}

    # -- entry --------------------------------------------------------------
    def run(self, scope: Scope, args: dict[str, Any]) -> Any:
        if len(self.stack) >= self.MAX_DEPTH or scope in self.stack:
            return UNK
        self.stack.append(scope)
        try:
            env = Frame(scope, dict(args))
            node = scope.node
            if isinstance(node, cst.Lambda):
                return self.eval(node.body, env)
            if isinstance(node, cst.Module):
                self.block(node.body, env)
                return CLEAN
            self.block(node.body.body if isinstance(node.body, cst.IndentedBlock) else node.body.body, env)
            return env.returned if env.returned is not None else CLEAN
        finally:
            self.stack.pop()

    # -- statements ---------------------------------------------------------
    def block(self, body, env: "Frame") -> None:
        for stmt in body:
            self.stmt(stmt, env)

    def suite(self, suite, env) -> None:
        self.block(suite.body, env)

    def stmt(self, stmt, env: "Frame") -> None:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self.small(small, env, stmt)
        elif isinstance(stmt, cst.If):
            self.eval(stmt.test, env)
            then = env.copy()
            self.suite(stmt.body, then)
            other = env.copy()
            if stmt.orelse is not None:
                if isinstance(stmt.orelse, cst.If):
                    self.stmt(stmt.orelse, other)
                else:
                    self.suite(stmt.orelse.body, other)
            env.merge([then, other], self)
        elif isinstance(stmt, (cst.For, cst.While)):
            if isinstance(stmt, cst.For):
                self.eval(stmt.iter, env)
            else:
                self.eval(stmt.test, env)
            body = env.copy()
            if isinstance(stmt, cst.For):
                self.bind(stmt.target, CLEAN, body, stmt)
            self.suite(stmt.body, body)
            if stmt.orelse is not None:
                self.suite(stmt.orelse.body, body)
            env.merge([env.copy(), body], self)
        elif isinstance(stmt, cst.With):
            for item in stmt.items:
                value = self.eval(item.item, env)
                if item.asname is not None:
                    self.bind(item.asname.name, value, env, stmt)
            self.suite(stmt.body, env)
        elif isinstance(stmt, cst.Try) or type(stmt).__name__ == "TryStar":
            branches = []
            body = env.copy()
            self.suite(stmt.body, body)
            if stmt.orelse is not None:
                self.suite(stmt.orelse.body, body)
            branches.append(body)
            for handler in stmt.handlers:
                h = env.copy()
                self.suite(handler.body, h)
                branches.append(h)
            env.merge(branches, self)
            if stmt.finalbody is not None:
                self.suite(stmt.finalbody.body, env)
        elif isinstance(stmt, cst.FunctionDef):
            fn = self.facts.raw.functions.get(stmt)
            env.values[stmt.name.value] = self.function_value(fn) if fn is not None else UNK
        elif isinstance(stmt, cst.ClassDef):
            env.values[stmt.name.value] = UNK
        elif type(stmt).__name__ == "Match":
            self.eval(stmt.subject, env)
            branches = []
            for case in stmt.cases:
                c = env.copy()
                self.suite(case.body, c)
                branches.append(c)
            branches.append(env.copy())
            env.merge(branches, self)

    def small(self, node, env: "Frame", line) -> None:
        if isinstance(node, cst.Assign):
            value = self.eval(node.value, env)
            for target in node.targets:
                self.bind(target.target, value, env, line)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self.bind(node.target, self.eval(node.value, env), env, line)
        elif isinstance(node, cst.AugAssign):
            value = self.binop(self.eval(node.target, env), self.eval(node.value, env))
            if isinstance(node.target, cst.Name):
                env.set(node.target.value, value, line)
        elif isinstance(node, cst.Expr):
            self.eval(node.value, env)
        elif isinstance(node, cst.Return):
            value = self.eval(node.value, env) if node.value is not None else CLEAN
            env.returned = value if env.returned is None else self.join2(env.returned, value)
        else:
            for child in iter_children(node):
                if isinstance(child, cst.BaseExpression):
                    self.eval(child, env)

    def bind(self, target, value, env: "Frame", line) -> None:
        if isinstance(target, cst.Name):
            env.set(target.value, value, line)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            starred = any(isinstance(e, cst.StarredElement) for e in elements)
            for i, element in enumerate(elements):
                if isinstance(value, ATuple) and not starred and len(value.items) == len(elements):
                    item = value.items[i]
                elif isinstance(value, ATuple):
                    item = UNK
                else:
                    item = self.element_of(value)
                self.bind(element.value, item, env, line)
        else:
            self.eval(target, env)

    def element_of(self, value) -> Any:
        """A part of a value unpacked without a known structure."""
        return value

    # -- expressions --------------------------------------------------------
    def eval(self, expr, env: "Frame") -> Any:
        if expr is None:
            return CLEAN
        if isinstance(expr, cst.Name):
            if expr.value in env.values:
                return env.values[expr.value]
            return self.global_value(expr, env)
        if isinstance(expr, cst.Call):
            return self.call(expr, env)
        if isinstance(expr, cst.Attribute):
            return self.attribute(self.eval(expr.value, env), expr)
        if isinstance(expr, cst.Subscript):
            base = self.eval(expr.value, env)
            index = None
            if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
                inner = expr.slice[0].slice.value
                self.eval(inner, env)
                if isinstance(inner, cst.Integer) or (isinstance(inner, cst.UnaryOperation) and isinstance(inner.expression, cst.Integer)):
                    index = value_of(inner, env.scope)
            if isinstance(base, ATuple):
                if isinstance(index, int) and -len(base.items) <= index < len(base.items):
                    return base.items[index]
                return UNK
            return self.subscript(base, expr)
        if isinstance(expr, (cst.Tuple, cst.List)):
            items = []
            for element in expr.elements:
                value = self.eval(element.value, env)
                if isinstance(element, cst.StarredElement):
                    return AContainer(tuple(items + [value]))
                items.append(value)
            return ATuple(tuple(items)) if isinstance(expr, cst.Tuple) else AContainer(tuple(items))
        if isinstance(expr, cst.Dict):
            items = []
            for element in expr.elements:
                if isinstance(element, cst.DictElement):
                    self.eval(element.key, env)
                items.append(self.eval(element.value, env))
            return AContainer(tuple(items))
        if isinstance(expr, cst.BinaryOperation):
            return self.binop(self.eval(expr.left, env), self.eval(expr.right, env))
        if isinstance(expr, cst.UnaryOperation):
            return self.eval(expr.expression, env)
        if isinstance(expr, cst.Lambda):
            scope = self.pf.sites.lambda_scopes.get(expr)
            return ALocalFn(scope) if scope is not None else UNK
        if isinstance(expr, (cst.BaseNumber, cst.BaseString)):
            return CLEAN
        # Anything else: evaluate the parts (calls inside still count), then give up
        # on the value itself unless nothing interesting went in.
        values = [self.eval(child, env) for child in iter_children(expr) if isinstance(child, cst.BaseExpression)]
        return self.opaque(values)

    def opaque(self, values: list) -> Any:
        return CLEAN if all(v == CLEAN for v in values) else UNK

    def binop(self, left, right) -> Any:
        return self.opaque([left, right])

    def attribute(self, base, expr: cst.Attribute) -> Any:
        return base if base == CLEAN else UNK

    def subscript(self, base, expr: cst.Subscript) -> Any:
        return base if base == CLEAN else UNK

    def function_value(self, scope: Scope) -> Any:
        return ALocalFn(scope)

    def global_value(self, expr: cst.Name, env: "Frame") -> Any:
        _, bindings = lookup(expr.value, env.scope)
        if len(bindings) == 1 and bindings[0].kind == "def":
            fn = self.facts.raw.functions.get(bindings[0].node)
            if fn is not None:
                return self.function_value(fn)
        if len(bindings) == 1 and bindings[0].kind == "param":
            return CLEAN
        return UNK if bindings and bindings[0].kind != "import" else CLEAN

    def join2(self, a, b) -> Any:
        if a is b or a == b:
            return a
        return UNK

    def call(self, call: cst.Call, env: "Frame") -> Any:  # pragma: no cover - subclasses
        raise NotImplementedError

    # -- helpers ------------------------------------------------------------
    def eval_args(self, call: cst.Call, env) -> list:
        return [self.eval(arg.value, env) for arg in call.args]

    def call_local(self, fn: ALocalFn, call: cst.Call, env, arg_values: Optional[list] = None) -> Any:
        """Run a local function with the abstract values of the call's arguments."""
        scope = fn.scope
        node = scope.node
        params = node.params
        if arg_values is None:
            arg_values = [self.eval(a.value, env) for a in call.args]
        ordered = [p.name.value for p in list(params.posonly_params) + list(params.params)]
        values: dict[str, Any] = {}
        for name in list(scope.params):
            values[name] = CLEAN
        positional = list(fn.bound)
        if any(a.star for a in call.args):
            for name in scope.params:
                values[name] = UNK
        else:
            positional += [v for a, v in zip(call.args, arg_values) if a.keyword is None]
            for name, value in zip(ordered, positional):
                values[name] = value
            for a, v in zip(call.args, arg_values):
                if a.keyword is not None and a.keyword.value in values:
                    values[a.keyword.value] = v
        return self.run_memo(scope, values)

    def run_memo(self, scope: Scope, values: dict) -> Any:
        """`run`, once per function and abstract arguments: keeps helper-heavy files
        linear instead of exponential in the call depth."""
        try:
            key = (scope, tuple(sorted(values.items(), key=lambda kv: kv[0])))
            hash(key)
        except TypeError:
            return self.run(scope, values)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = UNK  # recursion guard while it runs
        result = self.run(scope, values)
        self._memo[key] = result
        return result


class Frame:
    def __init__(self, scope: Scope, values: dict, origins: Optional[dict] = None) -> None:
        self.scope = scope
        self.values = values
        self.origins: dict[str, Optional[cst.CSTNode]] = origins if origins is not None else {}
        self.returned = None

    def set(self, name: str, value, line) -> None:
        self.values[name] = value
        self.origins[name] = line

    def copy(self) -> "Frame":
        frame = Frame(self.scope, dict(self.values), dict(self.origins))
        frame.returned = self.returned
        return frame

    def merge(self, branches: list["Frame"], interp: Interpreter) -> None:
        names = set()
        for b in branches:
            names |= set(b.values)
        for name in names:
            vals = [b.values.get(name, _MISSING) for b in branches]
            present = [v for v in vals if v is not _MISSING]
            value = present[0]
            for other in present[1:]:
                value = interp.join2(value, other)
            if len(present) < len(vals):
                value = interp.join2(value, UNK)  # unbound on some path
            self.values[name] = value
            origins = {id(b.origins.get(name)) for b in branches}
            self.origins[name] = branches[0].origins.get(name) if len(origins) == 1 else None
        returned = [b.returned for b in branches if b.returned is not None]
        if returned:
            value = returned[0]
            for other in returned[1:]:
                value = interp.join2(value, other)
            self.returned = value


_MISSING = object()
