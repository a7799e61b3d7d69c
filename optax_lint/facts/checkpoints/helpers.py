"""Checkpoints written and read through the project's own helper module:
`checkpoint.save(ckpt_dir, step, params)` where `checkpoint` is a project module whose
`save` hands one of its parameters to orbax, flax or pickle. The helper is read (never
imported) through facts/project; the call site then counts as a save (or restore) of
the argument it passes for that parameter."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.checkpoints.targets import anchors
from optax_lint.facts.checkpoints.vocabulary import RESTORE_ARGS, SAVE_ARGS, orbax_member
from optax_lint.syntax.arguments import call_arg_expr, param_arg
from optax_lint.facts.project.files import defines_function
from optax_lint.facts.project.imported_functions import project_function
from optax_lint.syntax.names import lookup
from optax_lint.syntax.walker import CallRecord, Scope, inside_scope

_NEED = ("save", "restore", "dump", "to_bytes", "checkpoint")
# What a helper hands its parameter to: a module naming none of these saves nothing we
# model, so it is not parsed (a parse costs ~50x the read).
_LIBRARIES = (
    "orbax", "checkpoints.", "save_checkpoint", "restore_checkpoint", "serialization", "pickle",
    "np.save", "np.load", "numpy.save", "numpy.load", "msgpack",
)


def _may_wrap_a_library(text: str, rest: list[str]) -> bool:
    return defines_function(text, rest) and any(word in text for word in _LIBRARIES)


def helper_function(facts, record: CallRecord):
    """(helper module facts, the helper's function scope, its dotted name) when `record`
    calls a function of a project module (`checkpoint.save(...)`, `from ckpt import
    save; save(...)`) that may save or restore; None otherwise."""
    return project_function(facts, record, _NEED, _may_wrap_a_library)


def _param_of(module, expr: Optional[cst.BaseExpression], scope: Scope, wrappers) -> Optional[str]:
    """The helper's parameter an expression is: `tree`, or `ocp.args.StandardSave(tree)`."""
    if isinstance(expr, cst.Call) and orbax_member(module.checkpoints.qual(expr.func, scope)) in wrappers:
        positional = [a for a in expr.args if a.keyword is None and not a.star]
        expr = positional[0].value if positional else None
    if not isinstance(expr, cst.Name):
        return None
    _, bindings = lookup(expr.value, scope)
    return expr.value if len(bindings) == 1 and bindings[0].kind == "param" else None


def _caller_path(site, function: Scope, record: CallRecord) -> Optional[cst.BaseExpression]:
    """What the caller passes for the helper parameter the inner site's path (or its
    manager's directory) is built from: `ckpt.save(WORKDIR, i, tree)` -> WORKDIR."""
    where = site.path
    if where is None and site.obj is not None and site.obj.call is not None:
        where = call_arg_expr(site.obj.call, 0, "directory", strict=True)
    if where is None or not isinstance(function.node, cst.FunctionDef):
        return None
    params = {p.name.value for p in function.node.params.params}
    names = anchors(where)
    for _ in range(3):  # `path = os.path.join(workdir, ...)` inside the helper: follow it
        followed = set()
        for name in names - params:
            _, bindings = lookup(name, site.record.scope)
            if len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
                followed |= anchors(bindings[0].value)
        names |= followed
    for name in sorted(names & params):
        arg = param_arg(record.node, function.node, name)
        if arg is not None:
            return arg
    return None


def helper_save(facts, record: CallRecord) -> Optional[tuple[str, cst.BaseExpression, Optional[cst.BaseExpression], str]]:
    """(callee text, the argument the caller saves, where it writes, the library the
    helper writes with) when `record` calls a project helper that saves one of its
    parameters."""
    found = helper_function(facts, record)
    if found is None:
        return None
    module, function, qual = found
    sites = [site for site in module.checkpoints.saves if inside_scope(site.record.scope, function)]
    saved = {_param_of(module, site.payload_expr, site.record.scope, SAVE_ARGS) for site in sites}
    saved.discard(None)
    if len(saved) != 1:
        return None
    arg = param_arg(record.node, function.node, saved.pop())
    return (qual, arg, _caller_path(sites[0], function, record), sites[0].api) if arg is not None else None


def helper_restore(facts, record: CallRecord) -> Optional[tuple[str, Optional[cst.BaseExpression], Optional[cst.BaseExpression]]]:
    """(callee text, the target the caller passes, where it reads) when `record` calls
    a project helper whose body restores a checkpoint; the target is the argument for
    the parameter the helper hands orbax as its target (None when it passes none)."""
    found = helper_function(facts, record)
    if found is None:
        return None
    module, function, qual = found
    restores = [site for site in module.checkpoints.restores if inside_scope(site.record.scope, function)]
    if len(restores) != 1:
        return None
    site = restores[0]
    param = _param_of(module, site.target_expr, site.record.scope, RESTORE_ARGS)
    path = _caller_path(site, function, record)
    if param is None:
        return qual, None, path
    return qual, param_arg(record.node, function.node, param), path
