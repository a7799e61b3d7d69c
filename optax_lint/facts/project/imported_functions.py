"""The function a call reaches in another module of the project: `checkpoint.save(...)`
or `from steps import train_step; train_step(...)`, read (never imported) through
facts/project. Callers say which words the module must mention (`need`) and which
texts are worth a parse (`accept`): a parse costs ~50x the read."""

from __future__ import annotations

from typing import Callable, Iterable

import libcst as cst

from optax_lint.syntax.names import lookup, module_function
from optax_lint.syntax.walker import CallRecord


def project_function(facts, record: CallRecord, need: Iterable[str], accept: Callable[[str, list[str]], bool]):
    """(module facts, the function's scope, its dotted name) when `record` calls, by an
    imported name, a function a project module defines at its top level; else None."""
    func = record.node.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        holder, name = func.value.value, func.attr.value
        _, bindings = lookup(holder, record.scope)
        if len(bindings) != 1 or bindings[0].kind != "import" or not bindings[0].qualname:
            return None
        qual = f"{bindings[0].qualname}.{name}"
    elif isinstance(func, cst.Name):
        _, bindings = lookup(func.value, record.scope)
        if len(bindings) != 1 or bindings[0].kind != "import" or not bindings[0].qualname:
            return None
        qual = bindings[0].qualname
    else:
        return None
    project = facts.project
    if project.file is None:
        return None
    found = project.module_of(qual, facts, tuple(need), accept=accept)
    if found is None or len(found[1]) != 1:
        return None
    module, (name,) = found
    function = module_function(module.raw, name)
    if function is None:
        return None
    return module, function, qual
