"""A call's arguments: found by keyword or position, or mapped onto the callee's real
parameter names (`bind`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import libcst as cst

from optax_lint.core.optax_api import ApiEntry
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import Scope


@dataclass
class BoundArgs:
    call: cst.Call
    scope: Scope
    entry: Optional[ApiEntry]
    by_name: dict[str, cst.Arg] = field(default_factory=dict)
    varargs: list[cst.Arg] = field(default_factory=list)  # what lands in *args
    unmatched: list[cst.Arg] = field(default_factory=list)  # extra positionals / unknown keywords
    has_star: bool = False  # *x or **x: parameters may be filled invisibly

    def expr(self, name: str) -> Optional[cst.BaseExpression]:
        arg = self.by_name.get(name)
        return arg.value if arg is not None else None

    def given(self, name: str) -> bool:
        return name in self.by_name

    def value(self, name: str) -> Any:
        """The argument's static value, the signature default when not given, or Unknown."""
        arg = self.by_name.get(name)
        if arg is not None:
            return value_of(arg.value, self.scope)
        if self.has_star:
            return Unknown("arguments passed with * or **")
        if self.entry is not None:
            try:
                return self.entry.default(name)
            except KeyError:
                return Unknown(f"no default for '{name}'")
        return Unknown(f"'{name}' not given")

    def positional_count(self) -> int:
        return sum(1 for a in self.call.args if a.keyword is None and not a.star)


def bind(call: cst.Call, scope: Scope, entry: Optional[ApiEntry]) -> BoundArgs:
    bound = BoundArgs(call, scope, entry)
    params = entry.params if entry is not None else ()
    kwonly = entry.kwonly if entry is not None else ()
    position = 0
    for arg in call.args:
        if arg.star:
            bound.has_star = True
            if entry is not None and entry.varargs and arg.star == "*":
                bound.varargs.append(arg)
            continue
        if arg.keyword is not None:
            name = arg.keyword.value
            if entry is None or name in params or name in kwonly:
                bound.by_name[name] = arg
            else:
                bound.unmatched.append(arg)
            continue
        positional = [p for p in params if p not in kwonly and p != (entry.varargs if entry else "")]
        if entry is not None and entry.varargs and position >= len(positional):
            bound.varargs.append(arg)
        elif position < len(positional):
            bound.by_name[positional[position]] = arg
        elif entry is not None and entry.varargs:
            bound.varargs.append(arg)
        else:
            bound.unmatched.append(arg)
        position += 1
    return bound


def named_arg(call: cst.Call, name: str) -> Optional[cst.Arg]:
    """The argument passed as `name=...`."""
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def positional_args(call: cst.Call) -> list[cst.Arg]:
    """The arguments passed by position, `*x` left out."""
    return [a for a in call.args if a.keyword is None and not a.star]


def call_arg(call: cst.Call, position: Optional[int], keyword: Optional[str], *, strict: bool = False) -> Optional[cst.Arg]:
    """The argument passed as `keyword=...`, else the `position`-th positional one (`*x`
    not counted). `strict`: none by position once a `*x` comes before a positional
    argument, since where it puts them is unknown."""
    if keyword is not None:
        arg = named_arg(call, keyword)
        if arg is not None:
            return arg
    if position is None:
        return None
    positional = positional_args(call)
    if strict and any(a.star for a in call.args[: len(positional)]):
        return None
    return positional[position] if position < len(positional) else None


def call_arg_expr(call: cst.Call, position: Optional[int], keyword: Optional[str], *, strict: bool = False) -> Optional[cst.BaseExpression]:
    """The value of `call_arg`."""
    arg = call_arg(call, position, keyword, strict=strict)
    return arg.value if arg is not None else None


def param_arg(call: cst.Call, func: cst.FunctionDef, name: str) -> Optional[cst.BaseExpression]:
    """What a call of `func` passes for its parameter `name`, by keyword or position;
    None when a `*x`/`**x` may hide it."""
    if any(a.star for a in call.args):
        return None
    arg = named_arg(call, name)
    if arg is not None:
        return arg.value
    params = list(func.params.posonly_params) + list(func.params.params)
    index = next((i for i, param in enumerate(params) if param.name.value == name), None)
    positional = positional_args(call)
    if index is not None and index < len(positional):
        return positional[index].value
    return None
