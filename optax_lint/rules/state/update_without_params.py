"""OPX601 update-without-params: `tx.update(grads, opt_state)` without params, for an
optimizer that needs them: the update raises."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline, TxNode
from optax_lint.facts.state.access import StateFacts
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.state.call_args import keyword_arg, positional_args
from optax_lint.rules.state.pipelines import under_condition, update_pipeline
from optax_lint.rules.state.wording import call_text, describe_node
from optax_lint.syntax import edits as fixes


def params_needer(pipeline: Pipeline) -> Optional[TxNode]:
    """The first transformation of a pipeline whose update needs params (wrappers inherit)."""
    for node in pipeline.nodes():
        if node.entry is not None and node.entry.needs_params and node.kind != "unknown" and not under_condition(node):
            return node
    return None


class UpdateWithoutParams(Rule):
    code = "OPX601"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sites = [s for s in facts.update_sites if s.kind == "update"]
        if not sites:
            return
        sf = facts.state
        for site in sites:
            call = site.call
            if site.has_star or len(positional_args(call)) != 2 or keyword_arg(call, "params") is not None:
                continue
            pipeline = update_pipeline(sf, site)
            if pipeline is None:
                continue
            needer = params_needer(pipeline)
            if needer is None:
                continue
            detail = ""
            if needer.args is not None and "weight_decay" in (needer.entry.params if needer.entry else ()):
                wd = needer.args.value("weight_decay")
                if isinstance(wd, (int, float)) and not isinstance(wd, bool) and wd == 0:
                    detail = " (a weight_decay of 0 does not help: optax checks for params first)"
            bare = pipeline.root is needer and needer.kind == "transform"
            ctx.report(
                call,
                call=call_text(call),
                needer=describe_node(needer),
                detail=detail,
                exception="TypeError (missing 'params')" if bare else "ValueError (\"...requires the current value of parameters\")",
                fix=self._fix(sf, site),
                related=[(pipeline.call, "optimizer built here")],
            )

    @staticmethod
    def _fix(sf: StateFacts, site):
        scope = site.record.scope
        owner = scope
        bindings = owner.bindings.get("params")
        if bindings:
            return fixes.replace(site.call, fixes.insert_positional(site.call, cst.Name("params")))
        state_arg = site.arg(1, "state")
        if state_arg is not None and isinstance(state_arg.value, cst.Attribute) and state_arg.value.attr.value == "opt_state":
            holder = state_arg.value.value
            held = sf.held(holder, scope)
            if held is not None and held.kind == "train_state":
                value = cst.Attribute(value=holder, attr=cst.Name("params"))
                return fixes.replace(site.call, fixes.insert_positional(site.call, value))
        return None
