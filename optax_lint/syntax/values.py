"""Static values of expressions: literals, simple arithmetic, and what names stand for.
Anything else is Unknown: a rule that needs a value it cannot know stays silent.

One evaluator serves every reader of values. Where a name or an expression it cannot
compute itself (an attribute path, a call, a subscript) gets its value is asked of
pluggable resolvers, in order:
- `LocalNames`: a name assigned once in the module or the enclosing function
  (`value_of` uses only this one);
- `ClassFields`: `cfg.field` where `cfg = Config(...)` is an instance of a class of the
  file (the schedule facts);
- the project resolver (facts/project/evaluate.py): config objects, flags, argparse
  options and the project modules they are read from, with provenance.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import libcst as cst

from optax_lint.syntax.names import lookup
from optax_lint.syntax.walker import Binding, RawFacts, Scope


@dataclass(frozen=True)
class Unknown:
    reason: str

    def __bool__(self) -> bool:  # an Unknown is never mistaken for a truthy value
        return False


_BINOPS = {
    cst.Add: operator.add,
    cst.Subtract: operator.sub,
    cst.Multiply: operator.mul,
    cst.Divide: operator.truediv,
    cst.FloorDivide: operator.floordiv,
    cst.Modulo: operator.mod,
    cst.Power: operator.pow,
}
_SAFE_BUILTINS = {"int": int, "float": float, "round": round, "abs": abs, "min": min, "max": max}


def single_binding(name: str, scope: Scope) -> tuple[Optional[Binding], str]:
    """The one unconditional assignment of `name`, or None with the reason."""
    _, bindings = lookup(name, scope)
    if not bindings:
        return None, f"'{name}' is not assigned in this file"
    if len(bindings) > 1:
        return None, f"'{name}' is assigned more than once"
    binding = bindings[0]
    if binding.kind not in ("assign", "annassign", "unpack") or binding.value is None:
        return None, f"'{name}' is a {binding.kind}, not a plain assignment"
    # A name bound once, even under an `if`, can only ever hold that value: where the
    # branch was not taken, using it raises NameError rather than giving another value.
    return binding, ""


class Resolver:
    """Where names and the expressions the evaluator cannot compute get their values.
    Each method answers a result of the evaluator, Unknown(reason), or None: not mine,
    ask the next resolver."""

    def name(self, ev: "Evaluator", name: str, scope: Scope, depth: int) -> Any:
        return None

    def expression(self, ev: "Evaluator", expr: cst.BaseExpression, scope: Scope, depth: int) -> Any:
        """An attribute path, a call that is not a known builtin, a subscript, ..."""
        return None


class LocalNames(Resolver):
    """A name assigned once in scope: the value of its assignment."""

    def name(self, ev: "Evaluator", name: str, scope: Scope, depth: int) -> Any:
        binding, reason = single_binding(name, scope)
        if binding is None:
            return Unknown(reason)
        return ev.bound(ev.eval(binding.value, binding.scope, depth), binding)


LOCAL_NAMES = LocalNames()


def unpack(value: Any, binding: Binding) -> Any:
    """The item an unpacking target (`a, b = value`) takes from `value`, or Unknown."""
    for i in binding.index:
        if isinstance(value, (tuple, list)) and i < len(value):
            value = value[i]
        else:
            return Unknown(f"'{binding.name}' is unpacked from an unknown value")
    return value


class Evaluator:
    """The value of an expression, or Unknown(reason). Never evaluates user code.

    Results are plain values here; a subclass may carry more in each result (the
    project evaluator: confidence and where the value was written) by overriding the
    result methods below."""

    max_depth = 24

    def __init__(self, resolvers: Sequence[Resolver] = (LOCAL_NAMES,)) -> None:
        self.resolvers = tuple(resolvers)

    # -- results ------------------------------------------------------------------
    def constant(self, value: Any, node: cst.CSTNode) -> Any:
        """A value written at `node`."""
        return value

    def plain(self, result: Any) -> Any:
        """The value a (known) result holds."""
        return result

    def computed(self, value: Any, operands: list, node: cst.CSTNode) -> Any:
        """A value computed from known operands (arithmetic, a builtin)."""
        return value

    def collected(self, value: Any, items: list, node: cst.CSTNode) -> Any:
        """A tuple or list of known items."""
        return value

    def bound(self, result: Any, binding: Binding) -> Any:
        """What the name `binding` binds holds, given the value of its assignment."""
        return unpack(result, binding) if binding.index else result

    # -- evaluation ---------------------------------------------------------------
    def name(self, name: str, scope: Scope, depth: int = 0) -> Any:
        """The value of the name `name` as seen from `scope`."""
        for resolver in self.resolvers:
            found = resolver.name(self, name, scope, depth)
            if found is not None:
                return found
        return Unknown(f"'{name}' is not assigned in this file")

    def eval(self, expr: Optional[cst.BaseExpression], scope: Scope, depth: int = 0) -> Any:
        if expr is None:
            return Unknown("no expression")
        if depth > self.max_depth:
            return Unknown("expression too deep")
        d = depth + 1
        if isinstance(expr, cst.Integer):
            return self._known(_literal_number(expr.value, int), expr)
        if isinstance(expr, cst.Float):
            return self._known(_literal_number(expr.value, float), expr)
        if isinstance(expr, cst.SimpleString):
            return self._known(_string(expr), expr)
        if isinstance(expr, cst.ConcatenatedString):
            left, right = self.eval(expr.left, scope, d), self.eval(expr.right, scope, d)
            if isinstance(left, Unknown) or isinstance(right, Unknown):
                return Unknown("string concatenation")
            left, right = self.plain(left), self.plain(right)
            if isinstance(left, str) and isinstance(right, str):
                return self.constant(left + right, expr)
            return Unknown("string concatenation")
        if isinstance(expr, cst.Name):
            if expr.value in _CONSTANTS:
                return self.constant(_CONSTANTS[expr.value], expr)
            return self.name(expr.value, scope, d)
        if isinstance(expr, cst.UnaryOperation):
            return self._unary(expr, scope, d)
        if isinstance(expr, cst.BinaryOperation):
            return self._binary(expr, scope, d)
        if isinstance(expr, (cst.Tuple, cst.List)):
            items = []
            for element in expr.elements:
                if isinstance(element, cst.StarredElement):
                    return Unknown("starred element")
                item = self.eval(element.value, scope, d)
                if isinstance(item, Unknown):
                    return item
                items.append(item)
            values = [self.plain(item) for item in items]
            return self.collected(tuple(values) if isinstance(expr, cst.Tuple) else values, items, expr)
        if isinstance(expr, cst.Dict):
            # A dict literal is read as plain values: config dicts are followed key by
            # key by the project resolver instead.
            return self._known(_plain_dict(expr, scope, d), expr)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in _SAFE_BUILTINS:
            return self._builtin(expr, scope, d)
        for resolver in self.resolvers:
            found = resolver.expression(self, expr, scope, d)
            if found is not None:
                return found
        return Unknown(f"not a literal ({type(expr).__name__})")

    def _known(self, value: Any, node: cst.CSTNode) -> Any:
        return value if isinstance(value, Unknown) else self.constant(value, node)

    def _unary(self, expr: cst.UnaryOperation, scope: Scope, d: int) -> Any:
        inner = self.eval(expr.expression, scope, d)
        if isinstance(inner, Unknown):
            return inner
        value = self.plain(inner)
        if not _is_number(value):
            return Unknown("unary operation")
        if isinstance(expr.operator, cst.Minus):
            return self.computed(-value, [inner], expr)
        if isinstance(expr.operator, cst.Plus):
            return inner
        return Unknown("unary operation")

    def _binary(self, expr: cst.BinaryOperation, scope: Scope, d: int) -> Any:
        op = _BINOPS.get(type(expr.operator))
        if op is None:
            return Unknown("operator")
        left = self.eval(expr.left, scope, d)
        if isinstance(left, Unknown):
            return left
        right = self.eval(expr.right, scope, d)
        if isinstance(right, Unknown):
            return right
        a, b = self.plain(left), self.plain(right)
        if not (_is_number(a) and _is_number(b)):
            return Unknown("arithmetic on non-numbers")
        if op is operator.pow and (abs(b) > 64 or abs(a) > 1e6):
            return Unknown("power too large")
        try:
            result = op(a, b)
        except (ZeroDivisionError, OverflowError, ValueError):
            return Unknown("arithmetic error")
        if isinstance(result, float) and not math.isfinite(result):
            return Unknown("non-finite arithmetic")
        return self.computed(result, [left, right], expr)

    def _builtin(self, expr: cst.Call, scope: Scope, d: int) -> Any:
        """int(0.05 * total_steps) and friends: pure builtins on known numbers only."""
        name = expr.func.value
        _, bindings = lookup(name, scope)
        if bindings:
            return Unknown(f"'{name}' is shadowed")
        if any(arg.keyword is not None or arg.star for arg in expr.args) or not expr.args:
            return Unknown("builtin call form")
        operands = [self.eval(arg.value, scope, d) for arg in expr.args]
        unknown = next((v for v in operands if isinstance(v, Unknown)), None)
        if unknown is not None:
            return unknown
        values = [self.plain(v) for v in operands]
        if name in ("int", "float") and len(values) == 1 and isinstance(values[0], str):
            values = [_number_text(values[0], _SAFE_BUILTINS[name])]  # int("20"): an environment default
        if not all(_is_number(v) for v in values):
            return Unknown("builtin on non-numbers")
        try:
            return self.computed(_SAFE_BUILTINS[name](*values), operands, expr)
        except (TypeError, ValueError, OverflowError):
            return Unknown("builtin error")


_CONSTANTS = {"True": True, "False": False, "None": None}
_PLAIN = Evaluator()


def value_of(expr: Optional[cst.BaseExpression], scope: Scope, _depth: int = 0) -> Any:
    """The Python value of `expr`, or Unknown(reason): literals, arithmetic, names
    assigned once. Never evaluates user code."""
    return _PLAIN.eval(expr, scope, _depth)


def _plain_dict(expr: cst.Dict, scope: Scope, d: int) -> Any:
    out = {}
    for element in expr.elements:
        if not isinstance(element, cst.DictElement):
            return Unknown("dict unpacking")
        key = _PLAIN.eval(element.key, scope, d)
        value = _PLAIN.eval(element.value, scope, d)
        if isinstance(key, Unknown) or isinstance(value, Unknown):
            return Unknown("dict with unknown entries")
        try:
            out[key] = value
        except TypeError:
            return Unknown("unhashable dict key")
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number_text(text: str, kind) -> Any:
    """`text` read as int() or float() would, when it is a finite number; else Unknown."""
    try:
        number = kind(text)
    except (TypeError, ValueError, OverflowError):
        return Unknown("not a number")
    return number if math.isfinite(number) else Unknown("not a finite number")


def _literal_number(text: str, kind):
    try:
        return kind(text.replace("_", "")) if kind is float else int(text.replace("_", ""), 0)
    except ValueError:
        try:
            return float(text.replace("_", ""))
        except ValueError:
            return Unknown("number literal")


def _string(expr: cst.SimpleString) -> Any:
    try:
        prefix = expr.prefix.lower()
        if "b" in prefix or "f" in prefix:
            return Unknown("bytes or f-string")
        return expr.raw_value if "r" in prefix else _unescape(expr.raw_value)
    except Exception:  # pragma: no cover - defensive: odd escapes
        return Unknown("string literal")


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    return raw.encode("latin-1", "backslashreplace").decode("unicode_escape")


class ClassFields(Resolver):
    """`cfg.field` where `cfg = Config(...)` (assigned once, keyword arguments only) is an
    instance of a class of this file whose body gives `field` a value, or the call passes
    it; and nothing in the file assigns `cfg.field` later. Numbers only."""

    def __init__(self, raw: RawFacts, text: Optional[str]) -> None:
        self.raw = raw
        self.text = text
        self._class_scopes: Optional[dict] = None

    def expression(self, ev: Evaluator, expr: cst.BaseExpression, scope: Scope, depth: int) -> Any:
        if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)):
            return None
        value = self._field(expr.value.value, expr.attr.value, scope)
        return None if value is None else ev.constant(value, expr)

    def _field(self, obj: str, attr: str, scope: Scope) -> Any:
        binding, _ = single_binding(obj, scope)
        if binding is None or binding.index or not isinstance(binding.value, cst.Call):
            return None
        call = binding.value
        if not isinstance(call.func, cst.Name):
            return None
        class_scope = self._class_scope(call.func.value, binding.scope)
        if class_scope is None:
            return None
        text = self.text
        if text is None or re.search(rf"\b{re.escape(obj)}\s*\.\s*{re.escape(attr)}\s*(?:[-+*/]|//)?=(?!=)", text):
            return None  # assigned after construction (or we cannot tell)
        if any(a.star for a in call.args) or any(a.keyword is None for a in call.args):
            return None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == attr:
                return _finite(value_of(arg.value, binding.scope))
        bindings = class_scope.bindings.get(attr, [])
        if len(bindings) != 1 or bindings[0].kind not in ("assign", "annassign") or bindings[0].value is None:
            return None
        return _finite(value_of(bindings[0].value, class_scope))

    def _class_scope(self, name: str, scope: Scope) -> Optional[Scope]:
        _, bindings = lookup(name, scope)
        if len(bindings) != 1 or bindings[0].kind != "class":
            return None
        if self._class_scopes is None:
            self._class_scopes = {s.node: s for s in self.raw.scopes if s.kind == "class"}
        return self._class_scopes.get(bindings[0].node)


def _finite(value: Any) -> Optional[float]:
    return value if _is_number(value) and math.isfinite(value) else None


_LR_NAME = re.compile(
    r"(^|_)(lr|learning_rate|step_size|eta|peak_lr|base_lr|init_lr|max_lr|wd|weight_decay|decay_rate|l2|l2_reg)($|_)",
    re.IGNORECASE,
)


def sign_of(expr: Optional[cst.BaseExpression], scope: Scope, _depth: int = 0) -> Optional[int]:
    """-1, 0 or +1 when the sign of `expr` is known, else None.

    Beyond static values, this knows two facts of every real training script: a
    parameter's literal default shows its sign, and a variable named like a
    learning rate or a weight decay (`lr`, `learning_rate`, `config.base_lr`, `wd`,
    `weight_decay`) is positive, so `optax.scale(-learning_rate)` descends and
    `add_decayed_weights(-lr * wd)` adds a negative decay.
    """
    if expr is None or _depth > 12:
        return None
    value = value_of(expr, scope)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (value > 0) - (value < 0)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = sign_of(expr.expression, scope, _depth + 1)
        return None if inner is None else -inner
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Divide, cst.FloorDivide)):
        left, right = sign_of(expr.left, scope, _depth + 1), sign_of(expr.right, scope, _depth + 1)
        return None if left is None or right is None else left * right
    if isinstance(expr, cst.Name):
        _, bindings = lookup(expr.value, scope)
        signs = set()
        for binding in bindings:
            if binding.kind == "param":
                default = binding.node.default
                parent = binding.scope.parent or binding.scope
                signs.add(sign_of(default, parent, _depth + 1) if default is not None else None)
            elif binding.kind in ("assign", "annassign") and binding.value is not None and not binding.index:
                signs.add(sign_of(binding.value, binding.scope, _depth + 1))
            else:
                signs.add(None)
        if len(signs) == 1 and None not in signs:
            return signs.pop()
        if signs - {None}:
            return None  # assignments disagree, or some are unknown while others are not
        return 1 if _LR_NAME.search(expr.value) else None
    if isinstance(expr, cst.Attribute):
        return 1 if _LR_NAME.search(expr.attr.value) else None
    return None
