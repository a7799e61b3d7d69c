"""OPX405 state-not-replicated: Host-side state (fresh from create/init or a restore) is
passed to a pmapped step on a mapped axis without being replicated."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.core.diagnostics import Applicability
from optax_lint.facts.parallel.host import AFresh, Crossing
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.multi_device.local_names import import_name
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.nodes import node_text


def _source(node) -> str:
    if isinstance(node, cst.Call):
        return node_text(node.func) + "(...)"
    return describe(node)


def _replicate_fix(ctx: Context, crossing: Crossing) -> Optional[fixes.ModuleEdit]:
    """`state = jax_utils.replicate(state)` right before the statement (the training
    loop, usually) that holds the pmapped call, in the block where the one statement
    binding the passed name (outside any loop and branch) sits; with flax.jax_utils
    already imported (nothing is added to the imports). Host-side uses in between
    (`int(state.step)`) keep the unreplicated value; inside the loop the step's own
    output rebinds the name and already has the device axis."""
    node = crossing.arg.value
    if not isinstance(node, cst.Name):
        return None
    replicate = import_name(ctx, "flax.jax_utils")
    if replicate is None:
        return None
    raw = ctx.facts.raw
    order = {id(r.node): i for i, r in enumerate(raw.calls)}
    at = order.get(id(crossing.call), -1)
    bindings = crossing.scope.bindings.get(node.value, [])
    before = [b for b in bindings if b.order <= at and not b.in_loop]
    if len(before) != 1:
        return None
    binding = before[0]
    if binding.kind != "assign" or binding.conditional or not isinstance(binding.node, cst.SimpleStatementLine):
        return None
    if any(b is not binding and not b.in_loop for b in bindings):
        return None  # rebound later outside the loop: which value reaches the call is unclear
    parent = raw.parent_stmt.get(binding.node)
    record = ctx.facts.record_of.get(crossing.call)
    anchor = record.statement if record is not None else None
    while anchor is not None and raw.parent_stmt.get(anchor) is not parent:
        anchor = raw.parent_stmt.get(anchor)
    if parent is None or anchor is None or not isinstance(anchor, (cst.SimpleStatementLine, cst.For, cst.While)):
        return None
    name = node.value
    statement = cst.parse_statement(f"{name} = {replicate}.replicate({name})\n")
    return fixes.insert_statement_after(parent, anchor, statement, before=True)


class StateNotReplicated(Rule):
    code = "OPX405"

    def check(self, ctx: Context) -> None:
        pf = ctx.facts.parallel
        seen: set = set()
        for crossing in pf.crossings:
            value = crossing.value
            if not isinstance(value, AFresh) or crossing.step.kind != "pmap":
                continue
            if not isinstance(crossing.axis, int) or isinstance(crossing.axis, bool):
                continue
            node = crossing.arg.value
            if id(node) in seen:
                continue
            seen.add(id(node))
            fix = _replicate_fix(ctx, crossing)
            ctx.report(
                node,
                fix=fix,
                applicability=Applicability.UNSAFE if fix is not None else None,
                value=node_text(node),
                step=crossing.step.describe(),
                source=_source(value.node),
                axis=crossing.axis,
                related=[(value.node, "created here, on the host, without a device axis"), (crossing.step.site, "mapped here")],
            )
