"""What the calls of a function in this module pass for one of its parameters: the
values a parameter takes when the module runs (`train(args)` from `__main__`)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.project.found import Found
from optax_lint.syntax.names import lookup
from optax_lint.syntax.walker import Binding, Scope

# Objects whose attributes are the keywords they are built with.
NAMESPACES = frozenset({"argparse.Namespace", "types.SimpleNamespace"})


def passed_arguments(facts, binding: Binding) -> Optional[list[tuple[cst.Arg, Scope]]]:
    """The argument every call of the parameter's function in this module passes for it,
    with the caller's scope; None when there is no call, a call leaves the parameter out
    or spreads *args/**kwargs, or the function is a method."""
    fn = binding.scope
    param = binding.node
    if fn.kind != "function" or not isinstance(fn.node, cst.FunctionDef) or not isinstance(param, cst.Param):
        return None
    if fn.parent is None or fn.parent.kind == "class":
        return None
    positional = list(fn.node.params.posonly_params) + list(fn.node.params.params)
    index = next((i for i, p in enumerate(positional) if p is param), None)
    passed = []
    for record in facts.calls_by_bare_name.get(fn.name, ()):
        _, targets = lookup(fn.name, record.scope)
        if len(targets) != 1 or targets[0].node is not fn.node:
            continue
        args = record.node.args
        if any(a.star for a in args):
            return None
        arg = next((a for a in args if a.keyword is not None and a.keyword.value == binding.name), None)
        if arg is None and index is not None and index < len(args) and args[index].keyword is None:
            arg = args[index]
        if arg is None:
            return None
        passed.append((arg, record.scope))
    return passed or None


def all_agree(found_all: list, detail: str) -> Optional[Found]:
    """One value that every caller's argument gives, at most medium confidence."""
    if not found_all or not all(isinstance(f, Found) for f in found_all):
        return None
    if any(f.value != found_all[0].value for f in found_all[1:]):
        return None
    return found_all[0].capped("medium", detail)
