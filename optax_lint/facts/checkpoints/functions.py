"""The module's locally defined functions, as checkpoint facts need them: which one a
callee evaluates to (through jit/pmap/partial wrappers), and whether a call runs in a
loop, directly or through the functions that call it."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.facts.checkpoints.vocabulary import FUNCTION_WRAPPERS
from optax_lint.syntax.names import lookup
from optax_lint.syntax.walker import CallRecord, Scope, children, walk


_BEST = re.compile(r"best", re.IGNORECASE)


def _mentions_best(test: cst.BaseExpression) -> bool:
    """A condition that compares with the best so far: `acc >= best_acc`, `loss <
    self.best`, or with the extreme of the earlier scores, `val_loss < min(val_scores)`."""
    for node in walk(test):
        if isinstance(node, cst.Name) and _BEST.search(node.value):
            return True
        if isinstance(node, cst.Comparison) and any(_extreme_of_scores(c.comparator) for c in node.comparisons):
            return True
    return False


def _extreme_of_scores(expr: cst.BaseExpression) -> bool:
    """`min(val_scores)`, `max(accs[:-1])`: the best of the values recorded so far."""
    return (
        isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("min", "max")
        and len(expr.args) == 1 and isinstance(expr.args[0].value, (cst.Name, cst.Attribute, cst.Subscript))
    )


def _under_best_guard(root: cst.CSTNode, target: cst.CSTNode) -> bool:
    """Whether `target` sits in the body of an `if` inside `root` whose condition compares
    with a best-so-far value."""
    stack: list[tuple[cst.CSTNode, bool]] = [(root, False)]
    while stack:
        node, guarded = stack.pop()
        if node is target:
            return guarded
        if isinstance(node, cst.If):
            stack.append((node.body, guarded or _mentions_best(node.test)))
            if node.orelse is not None:
                stack.append((node.orelse, guarded))
            continue
        stack.extend((child, guarded) for child in children(node))
    return False


class LocalFunctions:
    def __init__(self, facts) -> None:
        self.facts = facts
        self.raw = facts.raw
        self._callers: Optional[dict[Scope, list[CallRecord]]] = None
        self._periodic: dict[Scope, bool] = {}

    def qual(self, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
        return self.facts.canonical(expr, scope)

    def function_of(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Optional[tuple[Scope, int]]:
        """The locally defined function a callee evaluates to, with how many positional
        arguments a functools.partial already bound: `p_train_step` bound to
        `jax.pmap(functools.partial(train_step, ...))` -> (train_step's scope, 0)."""
        if depth > 6:
            return None
        if isinstance(expr, cst.Name):
            _, bindings = lookup(expr.value, scope)
            if len(bindings) != 1:
                return None
            b = bindings[0]
            if b.kind == "def" and isinstance(b.node, cst.FunctionDef):
                fn = self.raw.functions.get(b.node)
                return (fn, 0) if fn is not None else None
            if b.kind in ("assign", "annassign") and isinstance(b.value, cst.Call) and not b.index:
                return self._wrapped(b.value, b.scope, depth + 1)
            return None
        if isinstance(expr, cst.Call):
            return self._wrapped(expr, scope, depth + 1)
        return None

    def _wrapped(self, call: cst.Call, scope: Scope, depth: int) -> Optional[tuple[Scope, int]]:
        name = self.qual(call.func, scope)
        if name not in FUNCTION_WRAPPERS:
            return None
        positional = [a for a in call.args if a.keyword is None]
        if not positional or positional[0].star:
            return None
        inner = self.function_of(positional[0].value, scope, depth + 1)
        if inner is None:
            return None
        shift = len(positional) - 1 if name == "functools.partial" else 0
        if any(a.star for a in positional):
            return None
        return inner[0], inner[1] + shift

    def _callers_map(self) -> dict[Scope, list[CallRecord]]:
        if self._callers is None:
            callers: dict[Scope, list[CallRecord]] = {}
            names = {s.name for s in self.raw.functions.values()}
            for record in self.raw.calls:
                func = record.node.func
                if isinstance(func, cst.Name) and func.value in names:
                    fn = self.function_of(func, record.scope)
                    if fn is not None:
                        callers.setdefault(fn[0], []).append(record)
            self._callers = callers
        return self._callers

    def in_loop(self, record: CallRecord) -> bool:
        """Inside a for/while loop, directly or through functions called from one."""
        if record.loop_depth > 0:
            return True
        scope = record.scope
        while scope is not None and scope.kind not in ("function", "module"):
            scope = scope.parent
        return scope is not None and scope.kind == "function" and self._scope_called_in_loop(scope, 0)

    def keeps_best(self, record: CallRecord) -> bool:
        """Written only when a metric beats the best so far (early stopping's selection of
        a model): the call, or the call of the function that holds it (two levels up),
        is in the body of an `if` that compares with a best-so-far value."""
        node: cst.CSTNode = record.node
        scope: Optional[Scope] = record.scope
        for _ in range(3):
            while scope is not None and scope.kind not in ("function", "module"):
                scope = scope.parent
            if scope is None or scope.node is None:
                return False
            if _under_best_guard(scope.node, node):
                return True
            if scope.kind != "function":
                return False
            callers = self._callers_map().get(scope, [])
            if len(callers) != 1:
                return False  # called from several places: not one selection
            node, scope = callers[0].node, callers[0].scope
        return False

    def _scope_called_in_loop(self, scope: Scope, depth: int) -> bool:
        if scope in self._periodic:
            return self._periodic[scope]
        self._periodic[scope] = False  # recursion guard
        result = False
        if depth < 4:
            for caller in self._callers_map().get(scope, []):
                if caller.loop_depth > 0:
                    result = True
                    break
                outer = caller.scope
                if outer.kind == "function" and self._scope_called_in_loop(outer, depth + 1):
                    result = True
                    break
        self._periodic[scope] = result
        return result
