"""Static values of argument expressions: literals, simple arithmetic, and names
assigned once in the module or the enclosing function. Anything else is Unknown:
a rule that needs a value it cannot know stays silent.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

from optax_lint.syntax.names import lookup
from optax_lint.syntax.walker import Binding, Scope


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
_MAX_DEPTH = 24


def is_known(value: Any) -> bool:
    return not isinstance(value, Unknown)


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


def value_of(expr: Optional[cst.BaseExpression], scope: Scope, _depth: int = 0) -> Any:
    """The Python value of `expr`, or Unknown(reason). Never evaluates user code."""
    if expr is None:
        return Unknown("no expression")
    if _depth > _MAX_DEPTH:
        return Unknown("expression too deep")
    d = _depth + 1
    if isinstance(expr, cst.Integer):
        return _literal_number(expr.value, int)
    if isinstance(expr, cst.Float):
        return _literal_number(expr.value, float)
    if isinstance(expr, cst.SimpleString):
        try:
            prefix = expr.prefix.lower()
            if "b" in prefix or "f" in prefix:
                return Unknown("bytes or f-string")
            return expr.raw_value if "r" in prefix else _unescape(expr.raw_value)
        except Exception:  # pragma: no cover - defensive: odd escapes
            return Unknown("string literal")
    if isinstance(expr, cst.ConcatenatedString):
        left, right = value_of(expr.left, scope, d), value_of(expr.right, scope, d)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        return Unknown("string concatenation")
    if isinstance(expr, cst.Name):
        if expr.value in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[expr.value]
        binding, reason = single_binding(expr.value, scope)
        if binding is None:
            return Unknown(reason)
        value = value_of(binding.value, binding.scope, d)
        if binding.index:
            for i in binding.index:
                if isinstance(value, (tuple, list)) and i < len(value):
                    value = value[i]
                else:
                    return Unknown(f"'{expr.value}' is unpacked from an unknown value")
        return value
    if isinstance(expr, cst.UnaryOperation):
        inner = value_of(expr.expression, scope, d)
        if not _is_number(inner):
            return inner if isinstance(inner, Unknown) else Unknown("unary operation")
        if isinstance(expr.operator, cst.Minus):
            return -inner
        if isinstance(expr.operator, cst.Plus):
            return +inner
        return Unknown("unary operation")
    if isinstance(expr, cst.BinaryOperation):
        op = _BINOPS.get(type(expr.operator))
        if op is None:
            return Unknown("operator")
        left = value_of(expr.left, scope, d)
        if isinstance(left, Unknown):
            return left
        right = value_of(expr.right, scope, d)
        if isinstance(right, Unknown):
            return right
        if not (_is_number(left) and _is_number(right)):
            return Unknown("arithmetic on non-numbers")
        if op is operator.pow and (abs(right) > 64 or abs(left) > 1e6):
            return Unknown("power too large")
        try:
            result = op(left, right)
        except (ZeroDivisionError, OverflowError, ValueError):
            return Unknown("arithmetic error")
        if isinstance(result, float) and not math.isfinite(result):
            return Unknown("non-finite arithmetic")
        return result
    if isinstance(expr, (cst.Tuple, cst.List)):
        items = []
        for element in expr.elements:
            if isinstance(element, cst.StarredElement):
                return Unknown("starred element")
            value = value_of(element.value, scope, d)
            if isinstance(value, Unknown):
                return value
            items.append(value)
        return tuple(items) if isinstance(expr, cst.Tuple) else items
    if isinstance(expr, cst.Dict):
        out = {}
        for element in expr.elements:
            if not isinstance(element, cst.DictElement):
                return Unknown("dict unpacking")
            key = value_of(element.key, scope, d)
            value = value_of(element.value, scope, d)
            if isinstance(key, Unknown) or isinstance(value, Unknown):
                return Unknown("dict with unknown entries")
            try:
                out[key] = value
            except TypeError:
                return Unknown("unhashable dict key")
        return out
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in _SAFE_BUILTINS:
        # int(0.05 * total_steps) and friends: pure builtins on known numbers only.
        _, bindings = lookup(expr.func.value, scope)
        if bindings:
            return Unknown(f"'{expr.func.value}' is shadowed")
        if any(arg.keyword is not None or arg.star for arg in expr.args) or not expr.args:
            return Unknown("builtin call form")
        values = [value_of(arg.value, scope, d) for arg in expr.args]
        if not all(_is_number(v) for v in values):
            return next((v for v in values if isinstance(v, Unknown)), Unknown("builtin on non-numbers"))
        try:
            return _SAFE_BUILTINS[expr.func.value](*values)
        except (TypeError, ValueError, OverflowError):
            return Unknown("builtin error")
    return Unknown(f"not a literal ({type(expr).__name__})")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _literal_number(text: str, kind):
    try:
        return kind(text.replace("_", "")) if kind is float else int(text.replace("_", ""), 0)
    except ValueError:
        try:
            return float(text.replace("_", ""))
        except ValueError:
            return Unknown("number literal")


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    return raw.encode("latin-1", "backslashreplace").decode("unicode_escape")


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
