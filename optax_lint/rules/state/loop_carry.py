"""Names a loop carries across its passes, bound before it and rebound in it: training
state, as opposed to a fresh start per pass (OPX606, OPX607)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.state.access import StateFacts
from optax_lint.syntax.nodes import base_name
from optax_lint.syntax.walker import Scope


def carried_arg(sf: StateFacts, call: cst.Call, loop: cst.CSTNode, scope: Scope, skip: Optional[str] = None,
                statement: Optional[cst.CSTNode] = None) -> bool:
    """An argument of `call` is carried across the loop's passes; with the call's
    `statement`, one that a pass binds afresh before it (`acts = init(...)` then
    `opt.init(acts)`, in `loop` or in a loop inside it around the call) is not."""
    for arg in call.args:
        base = base_name(arg.value)
        if base is not None and base != skip and sf.carried(base, loop, scope):
            if statement is None or sf.pass_binding(base, statement, outermost=loop) is None:
                return True
    return False


def owner_scope(name: str, scope: Scope) -> Optional[Scope]:
    from optax_lint.syntax.names import lookup

    owner, _ = lookup(name, scope)
    return owner
