"""OPX608 init-update-different-optimizers: `init` and `update` called on different
optimizer objects, e.g. a global shadowed by a local."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.state.access import Held, StateFacts
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.state.pipelines import update_pipeline
from optax_lint.rules.state.wording import call_text, describe_node
from optax_lint.syntax.nodes import node_text


def _state_held(sf: StateFacts, site) -> Optional[Held]:
    arg = site.arg(1, "state")
    held = sf.held(arg.value, site.record.scope) if arg is not None else None
    return held if held is not None and held.kind == "state" else None


class InitUpdateDifferentOptimizers(Rule):
    code = "OPX608"

    def check(self, ctx: Context) -> None:
        sites = [s for s in ctx.facts.update_sites if s.kind == "update"]
        if not sites:
            return
        sf = ctx.facts.state
        for site in sites:
            updater = update_pipeline(sf, site)
            state = _state_held(sf, site)
            if updater is None or state is None or state.inferred or state.path or state.origin is None:
                continue
            builder = state.pipeline
            if builder is updater or node_text(builder.call) == node_text(updater.call):
                continue
            same_shape = [[s.primitive for s in seq] for seq in builder.sequences()] == [[s.primitive for s in seq] for seq in updater.sequences()]
            consequence = (
                "the state fits, but it was built for other hyperparameters" if same_shape
                else "the state does not fit this optimizer, so update fails (ValueError or AttributeError)"
            )
            ctx.report(
                site.call,
                call=call_text(site.call),
                updater=describe_node(updater.root),
                builder=describe_node(builder.root),
                origin=call_text(state.origin) if isinstance(state.origin, cst.Call) else describe(state.origin),
                consequence=consequence,
                related=[(state.origin, "state initialised here"), (updater.call, "updating optimizer built here"), (builder.call, "initialising optimizer built here")],
            )
