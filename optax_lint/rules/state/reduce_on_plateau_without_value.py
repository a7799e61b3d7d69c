"""OPX609 reduce-on-plateau-without-value: `optax.contrib.reduce_on_plateau` in a
pipeline whose update is called without `value=`."""

from __future__ import annotations

from typing import Optional

from optax_lint.facts.pipelines.build import Pipeline, TxNode
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.state.call_args import keyword_arg
from optax_lint.rules.state.pipelines import under_condition
from optax_lint.rules.state.wording import call_text, describe_node


def _plateau(pipeline: Pipeline) -> Optional[TxNode]:
    for node in pipeline.nodes():
        if node.key == "contrib.reduce_on_plateau" and not under_condition(node):
            return node
    return None


class ReduceOnPlateauWithoutValue(Rule):
    code = "OPX609"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        if not any(n.key == "contrib.reduce_on_plateau" for p in facts.pipelines for n in p.nodes()):
            return
        sf = facts.state
        for site in facts.update_sites:
            if site.receiver is None or site.kind not in ("update", "apply_gradients"):
                continue
            held = sf.held(site.receiver, site.record.scope)
            if site.kind == "apply_gradients":
                if held is None or held.kind != "train_state":
                    continue
                node = _plateau(held.pipeline)
                if node is None:
                    continue
                ctx.report(
                    site.call,
                    call=call_text(site.call),
                    plateau=describe_node(node),
                    problem="TrainState.apply_gradients cannot pass value= to tx.update (its keyword arguments only replace fields)",
                    related=[(held.pipeline.call, "optimizer built here")],
                )
                continue
            pipeline = held.pipeline if held is not None and held.kind in ("tx", "nnx") else site.pipeline
            if pipeline is None or site.has_star or keyword_arg(site.call, "value") is not None:
                continue
            node = _plateau(pipeline)
            if node is None:
                continue
            ctx.report(
                site.call,
                call=call_text(site.call),
                plateau=describe_node(node),
                problem="the call passes no value=",
                related=[(pipeline.call, "optimizer built here")],
            )
