"""What the calls of a function in this module pass for one of its parameters: the
values a parameter takes when the module runs (`train(args)` from `__main__`)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.project.found import Found
from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import Unknown
from optax_lint.syntax.walker import Binding, Scope

# Objects whose attributes are the keywords they are built with.
NAMESPACES = frozenset({"argparse.Namespace", "types.SimpleNamespace"})


def passed_arguments(facts, binding: Binding) -> Optional[list[tuple[cst.Arg, Scope]]]:
    """The argument every call of the parameter's function in this module passes for it,
    with the caller's scope; None when there is no call, a call leaves the parameter out
    or spreads *args/**kwargs, or the function is a method."""
    passed = _arguments(facts, binding)
    return None if passed is None or any(arg is None for arg, _ in passed) else passed


def omitted_by_every_call(facts, binding: Binding) -> bool:
    """The parameter's function is called in this module, and no call passes it (nor
    spreads *args/**kwargs): running the module, it keeps its default."""
    passed = _arguments(facts, binding)
    return passed is not None and all(arg is None for arg, _ in passed)


def default_used_here(facts, binding: Binding) -> bool:
    """Some call of the parameter's function in this module leaves the parameter out:
    the module runs the function with its default."""
    passed = _arguments(facts, binding)
    return passed is not None and any(arg is None for arg, _ in passed)


def called_as(fn: Scope) -> str:
    """The name the calls of a function use: its class's for an `__init__`."""
    if fn.name == "__init__" and fn.parent is not None and fn.parent.kind == "class":
        return fn.parent.name
    return fn.name


def _arguments(facts, binding: Binding) -> Optional[list[tuple[Optional[cst.Arg], Scope]]]:
    """What each call of the parameter's function in this module passes for it (None
    for a call that leaves it out); None when there is no call, a call spreads
    *args/**kwargs, or the function is a method other than `__init__` (whose calls are
    those of its class: `TinyConfig()` passes nothing for `__init__(self, d_model=128)`)."""
    fn = binding.scope
    param = binding.node
    if fn.kind != "function" or not isinstance(fn.node, cst.FunctionDef) or not isinstance(param, cst.Param):
        return None
    if fn.parent is None:
        return None
    positional = list(fn.node.params.posonly_params) + list(fn.node.params.params)
    callee, defined = called_as(fn), fn.node
    if fn.parent.kind == "class":
        if fn.name != "__init__" or not isinstance(fn.parent.node, cst.ClassDef) or fn.parent.parent is None:
            return None
        defined = fn.parent.node
        positional = positional[1:]  # self
    index = next((i for i, p in enumerate(positional) if p is param), None)
    passed = []
    for record in facts.calls_by_bare_name.get(callee, ()):
        _, targets = lookup(callee, record.scope)
        if len(targets) != 1 or targets[0].node is not defined:
            continue
        args = record.node.args
        if any(a.star for a in args):
            return None
        arg = next((a for a in args if a.keyword is not None and a.keyword.value == binding.name), None)
        if arg is None and index is not None and index < len(args) and args[index].keyword is None:
            arg = args[index]
        passed.append((arg, record.scope))
    return passed or None


def all_agree(found_all: list, detail: Optional[str]) -> Optional[Found]:
    """One value that every caller's argument gives, at most medium confidence (with
    `detail`, or the value's own when None)."""
    if not found_all or not all(isinstance(f, Found) for f in found_all):
        return None
    if any(f.value != found_all[0].value for f in found_all[1:]):
        return None
    return found_all[0].capped("medium", detail)


def namespace_field(evaluator, call: cst.Call, binding, names: list[str], depth: int):
    """`args = argparse.Namespace(lr=1e-5, ...)`: `args.lr` is the keyword's value,
    unless the module sets `args.lr` anywhere (in any function: which runs first is not
    known)."""
    if len(names) > 1:
        return Unknown(f"{binding.name}.{'.'.join(names)}: a field of a namespace's field")
    arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == names[0]), None)
    if arg is None or any(a.star for a in call.args):
        return Unknown(f"{binding.name}.{names[0]} is not given to the namespace")
    for target, _, _ in evaluator.facts.raw.attribute_stores:
        if target.attr.value == names[0] and isinstance(target.value, cst.Name) and target.value.value == binding.name:
            return Unknown(f"{binding.name}.{names[0]} is set again")
    return evaluator.eval(arg.value, binding.scope, depth + 1)
