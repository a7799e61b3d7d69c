"""The small predicate language a weight-decay mask or a partition-label function is
compiled into, and its evaluator.

`extract.masks` compiles the user's mask function (a lambda over `flatten_dict`
keys, a `path_aware_map` callback, a `tree_map` over leaf ranks...) into this form
statically; nothing of the user's file is ever run. The same data is evaluated twice:
on the lint path against the parameter names the file's model produces (plain
Python, no jax), and in the verification worker against a real synthetic params
tree. Expressions are JSON lists:

    ["const", v]            ["path"]            ["leaf"]           ["var", name]
    ["attr", e, name]       ["index", e, i]     ["slice", e, lo, hi]
    ["cmp", op, a, b]       ["and", [..]]       ["or", [..]]       ["not", e]
    ["ifexp", test, a, b]   ["method", e, name, [args]]            ["call", fn, [args]]
    ["gen", "any"|"all", var, iterable, body]   ["tuple", [..]]
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

# What `path` is, by how the mask function reaches the leaves:
NAMES = "names"  # flatten_dict keys / path_aware_map paths: ('Dense_0', 'kernel')
KEYS = "keys"  # jax tree_map_with_path: (DictKey(key='Dense_0'), DictKey(key='kernel'))
# flatten_dict(params, sep="/") keys are joined strings: "joined:/" -> 'Dense_0/kernel'

_CMP = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
    "is": operator.is_, "is not": operator.is_not,
}
STR_METHODS = frozenset({"endswith", "startswith", "lower", "upper", "split", "join", "strip", "replace", "find", "count"})
ATTRS = frozenset({"key", "name", "idx", "ndim", "shape", "size"})
CALLS = frozenset({"len", "str", "any", "all", "tuple", "list", "set", "keystr", "bool"})


class EvalError(Exception):
    """The predicate does something the language does not model (or that would raise)."""


@dataclass(frozen=True)
class DictKey:
    """Stand-in for jax's DictKey on the lint path (jax is never imported there)."""

    key: str

    def __str__(self) -> str:  # as jax prints it: keystr((DictKey('a'),)) == "['a']"
        return f"[{self.key!r}]"


@dataclass(frozen=True)
class Leaf:
    shape: tuple[int, ...]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        out = 1
        for n in self.shape:
            out *= n
        return out


def path_value(names: tuple[str, ...], kind: str | None, key_type=DictKey):
    """The `path` a mask function of this kind sees for a leaf at `names`."""
    if kind == NAMES:
        return tuple(names)
    if kind == KEYS:
        return tuple(key_type(n) for n in names)
    if kind and kind.startswith("joined:"):
        return kind[len("joined:"):].join(names)
    return None


def evaluate(expr: list, env: dict) -> Any:
    """Value of `expr` with env = {"path": ..., "leaf": ..., vars...}; EvalError on
    anything outside the language. Only our own data (str, tuple, int, DictKey,
    Leaf or jax's key entries) ever reaches an operator here."""
    return _eval(expr, env, 0)


def _eval(e: list, env: dict, depth: int) -> Any:
    if depth > 64 or not isinstance(e, list) or not e:
        raise EvalError("malformed expression")
    d = depth + 1
    op = e[0]
    if op == "const":
        return _tuples(e[1])
    if op in ("path", "leaf"):
        if env.get(op) is None:
            raise EvalError(f"no {op}")
        return env[op]
    if op == "var":
        if e[1] not in env:
            raise EvalError(f"unbound {e[1]}")
        return env[e[1]]
    if op == "tuple":
        return tuple(_eval(x, env, d) for x in e[1])
    if op == "attr":
        obj, name = _eval(e[1], env, d), e[2]
        if name not in ATTRS or isinstance(obj, (str, tuple, int, float, bool)) or obj is None:
            raise EvalError(f"attribute {name}")
        try:
            return getattr(obj, name)
        except AttributeError as exc:
            raise EvalError(str(exc)) from None
    if op == "index":
        obj = _eval(e[1], env, d)
        if not isinstance(obj, (str, tuple)):
            raise EvalError("index of a non-sequence")
        try:
            return obj[e[2]]
        except (IndexError, TypeError):
            raise EvalError("index out of range") from None
    if op == "slice":
        obj = _eval(e[1], env, d)
        if not isinstance(obj, (str, tuple)):
            raise EvalError("slice of a non-sequence")
        return obj[e[2]:e[3]]
    if op == "cmp":
        left, right = _eval(e[2], env, d), _eval(e[3], env, d)
        if e[1] in ("in", "not in") and not isinstance(right, (str, tuple)):
            raise EvalError("membership in a non-container")
        if e[1] in ("in", "not in") and isinstance(right, str) and not isinstance(left, str):
            raise EvalError("non-string in a string")  # Python raises TypeError here
        if e[1] in ("<", "<=", ">", ">=") and not (_number(left) and _number(right)):
            raise EvalError("ordering of non-numbers")
        return _CMP[e[1]](left, right)
    if op == "and":
        result: Any = True
        for x in e[1]:
            result = _eval(x, env, d)
            if not result:
                return result
        return result
    if op == "or":
        result = False
        for x in e[1]:
            result = _eval(x, env, d)
            if result:
                return result
        return result
    if op == "not":
        return not _eval(e[1], env, d)
    if op == "ifexp":
        return _eval(e[2], env, d) if _eval(e[1], env, d) else _eval(e[3], env, d)
    if op == "method":
        obj, name = _eval(e[1], env, d), e[2]
        args = [_eval(a, env, d) for a in e[3]]
        if not isinstance(obj, str) or name not in STR_METHODS:
            raise EvalError(f".{name}() on {type(obj).__name__}")
        if name == "join" and not (len(args) == 1 and isinstance(args[0], tuple) and all(isinstance(a, str) for a in args[0])):
            raise EvalError("join of non-strings")
        if any(not isinstance(a, (str, int, tuple)) for a in args):
            raise EvalError("method argument")
        try:
            return getattr(obj, name)(*args)
        except (TypeError, ValueError):
            raise EvalError(f".{name}() arguments") from None
    if op == "call":
        name = e[1]
        if name not in CALLS:
            raise EvalError(f"call {name}")
        args = [_eval(a, env, d) for a in e[2]]
        if len(args) != 1:
            raise EvalError(f"{name} arity")
        (arg,) = args
        if name == "keystr":
            if not isinstance(arg, tuple) or any(isinstance(k, str) for k in arg):
                raise EvalError("keystr of a non-key path")
            return "".join(str(k) for k in arg)
        if name == "str":
            return str(arg)
        if name == "bool":
            return bool(arg)
        if not isinstance(arg, (tuple, str)):
            raise EvalError(f"{name} of {type(arg).__name__}")
        return {"len": len, "any": any, "all": all, "tuple": tuple, "list": tuple, "set": tuple}[name](arg)
    if op == "gen":
        kind, var, iterable, body = e[1], e[2], _eval(e[3], env, d), e[4]
        if not isinstance(iterable, (tuple, str)):
            raise EvalError("generator over a non-sequence")
        values = (_eval(body, {**env, var: item}, d) for item in iterable)
        return any(values) if kind == "any" else all(values)
    raise EvalError(f"unknown form {op}")


def _tuples(value: Any) -> Any:
    """JSON lists back to the tuples they were written as."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def walk(e: list):
    """Every sub-expression, pre-order."""
    yield e
    if not isinstance(e, list) or not e or e[0] == "const":
        return
    for part in e[1:]:
        if isinstance(part, list) and part and isinstance(part[0], str):
            yield from walk(part)
        elif isinstance(part, list):
            for item in part:
                if isinstance(item, list) and item and isinstance(item[0], str):
                    yield from walk(item)


def uses(e: list, what: str) -> bool:
    """Whether the predicate reads the path ("path") or the leaf array ("leaf")."""
    return any(isinstance(x, list) and x and x[0] == what for x in walk(e))


def string_literals(e: list) -> list[str]:
    out = []
    for x in walk(e):
        if x[0] == "const":
            value = x[1]
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, list):
                out.extend(v for v in value if isinstance(v, str))
    return out
