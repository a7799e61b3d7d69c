"""OPX405 state-not-replicated: Host-side state (fresh from create/init or a restore) is
passed to a pmapped step on a mapped axis without being replicated."""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.parallel.host import AFresh
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.syntax.nodes import node_text


def _source(node) -> str:
    if isinstance(node, cst.Call):
        return node_text(node.func) + "(...)"
    return describe(node)


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
            ctx.report(
                node,
                value=node_text(node),
                step=crossing.step.describe(),
                source=_source(value.node),
                axis=crossing.axis,
                related=[(value.node, "created here, on the host, without a device axis"), (crossing.step.site, "mapped here")],
            )
