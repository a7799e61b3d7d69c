"""Who reads a replicated checkpoint back: the project's scripts beside the one that
saves it.

A pmapped run that saves its replicated state writes one copy per device. That is a
defect when a restore expects one copy (a target to match, a resume on another device
count), and a project's format when every script that reads the directory back restores
it as saved (no target) and takes one copy with `unreplicate`: an evaluation script
beside a training script, the layout of many research repositories. Only the second
case is read here, and only from what is certain: a directory written as a string the
save and the reader both spell, reads in the `.py` files of the saving script's folder
(the script itself included), each one a restore without a target whose result goes
straight into `unreplicate`. Anything else (a directory built at run time, a reader
elsewhere, a restore into a template) leaves the save a finding.
"""

from __future__ import annotations

import os
from typing import Optional

import libcst as cst

from optax_lint.core import readlog
from optax_lint.syntax.arguments import call_arg_expr
from optax_lint.syntax.names import qualified_name
from optax_lint.syntax.nodes import base_name, is_none, last_name
from optax_lint.syntax.values import value_of

# Bounds: a folder of scripts is small; a folder of generated files is not read whole.
_MAX_SIBLINGS = 40

_FLAX_SAVE = "flax.training.checkpoints.save_checkpoint"
_FLAX_RESTORE = "flax.training.checkpoints.restore_checkpoint"
_UNREPLICATE = "flax.jax_utils.unreplicate"


def unreplicating_readers(facts, save) -> Optional[str]:
    """Where the project reads back the directory `save` writes, when every read there
    restores it as saved and unreplicates it (`eval.py:40`); None otherwise."""
    if qualified_name(save.call.func, save.scope) != _FLAX_SAVE:
        return None
    directory = _directory(save.call, save.scope)
    if directory is None:
        return None
    project = facts.project
    if project.dir is None:
        return None
    reads: list[tuple[str, bool]] = []  # (where, unreplicated)
    for module, shown in _modules_beside(facts, project, directory):
        for record in module.raw.calls:
            if qualified_name(record.node.func, record.scope) != _FLAX_RESTORE:
                continue
            if _directory(record.node, record.scope) != directory:
                continue
            line = module.source_positions.span(record.node).line
            reads.append((f"{shown}:{line}", _restored_as_saved(record) and _unreplicated(module, record)))
    if not reads or not all(ok for _, ok in reads):
        return None
    return ", ".join(where for where, _ in reads)


def _directory(call: cst.Call, scope) -> Optional[str]:
    """The checkpoint directory (`ckpt_dir`) as a string the code spells (a literal, or a
    name bound once to one), else None."""
    expr = call_arg_expr(call, 0, "ckpt_dir", strict=True)
    value = value_of(expr, scope) if expr is not None else None
    return value if isinstance(value, str) and value else None


def _modules_beside(facts, project, directory: str):
    """The linted module and the parsed `.py` files of its folder that spell `directory`."""
    yield facts, os.path.basename(facts.path or "")
    try:
        names = sorted(readlog.listdir(project.dir, project.files.log))
    except OSError:
        return
    here = os.path.basename(project.file or "")
    siblings = [n for n in names if n.endswith(".py") and n != here][:_MAX_SIBLINGS]
    for name in siblings:
        module = project.load(os.path.join(project.dir, name), need=(directory,))
        if module is not None and "restore_checkpoint" in (module.text or ""):
            yield module, name


def _restored_as_saved(record) -> bool:
    """restore_checkpoint(dir, None) / target=None: the tree as written, no template."""
    target = call_arg_expr(record.node, 1, "target", strict=True)
    return target is not None and is_none(target)


def _unreplicated(module, record) -> bool:
    """The restored tree, bound to a name by the restore's own statement, goes into
    `unreplicate` (`unreplicate(state)`, `unreplicate(state["params"])`) in the reader's
    scope; `restore_checkpoint(...)["params"]` is not followed."""
    if not isinstance(record.assigned_to, cst.Name):
        return False
    name = record.assigned_to.value
    for other in module.raw.calls:
        if other.scope is not record.scope or not other.node.args:
            continue
        if qualified_name(other.node.func, other.scope) != _UNREPLICATE and last_name(other.node.func) != "unreplicate":
            continue
        if base_name(other.node.args[0].value) == name:
            return True
    return False
