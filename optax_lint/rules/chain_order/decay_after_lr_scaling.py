"""OPX102 decay-after-lr-scaling: `add_decayed_weights` after the update was negated: the
weights grow every step."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline, Step, TxNode
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.chain_order.chain_slots import chain_slot
from optax_lint.syntax import edits as fixes


class DecayAfterLrScaling(Rule):
    code = "OPX102"

    def check(self, ctx: Context) -> None:
        seen: set = set()
        for pipeline in ctx.facts.pipelines:
            for sequence in pipeline.sequences():
                flips = 0
                last_flip: Optional[Step] = None
                for step in sequence:
                    negates = step.negates()
                    if negates is None or (negates and step.maybe):
                        break  # sign unknown from here on: say nothing
                    if step.primitive == "add_decayed_weights" and flips % 2 == 1 and step.origin.kind == "transform":
                        call = step.origin.call
                        if call is not None and call not in seen and _decay_sign(step) == 1:
                            seen.add(call)
                            self._report(ctx, pipeline, step, last_flip)
                    if negates:
                        flips += 1
                        last_flip = step

    def _report(self, ctx: Context, pipeline: Pipeline, decay: Step, flip: Step) -> None:
        optimizer = flip.origin
        fix, title = None, None
        decay_slot = chain_slot(decay.origin)
        opt_slot = chain_slot(optimizer)
        if decay_slot and opt_slot and decay_slot[0] is opt_slot[0] and not decay.origin.conditional:
            chain_call = decay_slot[0]
            if optimizer.kind == "alias" and optimizer.key == "adam" and isinstance(optimizer.call, cst.Call):
                fix, title = self._decoupled_fix(chain_call, decay_slot[1], optimizer, decay.origin)
            if fix is None:
                fix = fixes.move_arg_to_front(chain_call, decay_slot[1])
                title = "Move {decay} to the front of the chain (coupled L2; or use adamw for decoupled decay)"
        ctx.report(
            decay.origin.call,
            decay=describe(decay.origin.call),
            optimizer=describe(optimizer.call) if optimizer.call is not None else flip.primitive,
            fix=fix,
            fix_title=title,
            changes_state=True,
            related=[(pipeline.call, "chain built here"), (optimizer.call, "the update is negated here")],
        )

    @staticmethod
    def _decoupled_fix(chain_call: cst.Call, decay_arg: cst.Arg, adam: TxNode, decay: TxNode):
        """chain(adam(lr), add_decayed_weights(wd[, mask])) -> chain(adamw(lr, weight_decay=wd[, mask=...]))."""
        assert decay.args is not None and adam.args is not None
        wd = decay.args.expr("weight_decay")
        if wd is None or adam.args.has_star or decay.args.has_star:
            return None, None
        mask = decay.args.expr("mask")
        element = decay.chain_element()
        if element is not decay:
            # masked(add_decayed_weights(wd), m) carries its mask on the wrapper.
            if element is None or element.short != "masked" or mask is not None or element.args is None:
                return None, None
            mask = element.args.expr("mask")
            if mask is None:
                return None, None
        func = adam.call.func
        if isinstance(func, cst.Attribute):
            new_func = func.with_changes(attr=cst.Name("adamw"))
        else:
            return None, None  # `from optax import adam`: adamw may not be imported
        new_adam = fixes.add_keyword(adam.call.with_changes(func=new_func), "weight_decay", wd)
        if mask is not None:
            new_adam = fixes.add_keyword(new_adam, "mask", mask)
        without = fixes.remove_arg(chain_call, decay_arg)
        new_chain = without.deep_replace(adam.call, new_adam)
        return fixes.replace(chain_call, new_chain), "Use decoupled weight decay: {optimizer} -> adamw(..., weight_decay=...)"


def _decay_sign(step: Step) -> Optional[int]:
    """The sign of the decay rate: a negative rate after the sign flip is a correct
    (hand-negated) decoupled decay; an unknown sign (`mult - 1`) says nothing."""
    if not step.origin.args or not step.origin.args.given("weight_decay"):
        value = step.arg_value("weight_decay")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return (value > 0) - (value < 0)
        return None
    return step.arg_sign("weight_decay")
