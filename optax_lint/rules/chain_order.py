"""Chain order (docs/protocol.md#chain-order): where clipping, decay and the LR step sit
in the *expanded* chain. Written once against primitives, so `adamw(...)`,
`chain(scale_by_adam(), scale_by_learning_rate(lr))` and every wrapper are judged alike."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline, Step, TxNode
from optax_lint.facts.pipelines.use import used_as_optimizer
from optax_lint.rules.base import Context, Rule, describe, register
from optax_lint.rules.weight_decay_masks import negative_alias_lr
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.values import Unknown

# Prefilter (optax_lint/engine/prefilter.py): chains are optax transforms, so "optax" is spelled.
TRIGGERS = ("optax",)


def _first_lr_step(sequence: list[Step]) -> Optional[int]:
    for i, step in enumerate(sequence):
        if step.is_lr_step and not step.maybe:
            return i
    return None


def _chain_slot(node: TxNode) -> Optional[tuple[cst.Call, cst.Arg]]:
    """The chain call and argument holding `node` (or its masked(...) wrapper), when it
    is written as a plain argument of the chain."""
    element = node.chain_element()
    if element is None or element.conditional:
        return None
    if isinstance(element.slot, cst.Arg) and element.slot_owner is not None and not element.slot.star:
        return element.slot_owner, element.slot
    return None


def _user_call(step: Step) -> Optional[cst.Call]:
    return step.origin.call


@register
class ClipAfterOptimizer(Rule):
    code = "OPX101"

    def check(self, ctx: Context) -> None:
        seen: set = set()
        for pipeline in ctx.facts.pipelines:
            for sequence in pipeline.sequences():
                lr_index = _first_lr_step(sequence)
                if lr_index is None:
                    continue
                lr_step = sequence[lr_index]
                for step in sequence[lr_index + 1 :]:
                    if not step.is_clip or step.origin is lr_step.origin:
                        continue
                    call = _user_call(step)
                    if call is None or call in seen:
                        continue
                    seen.add(call)
                    self._report(ctx, pipeline, step, lr_step)

    def _report(self, ctx: Context, pipeline: Pipeline, clip: Step, lr_step: Step) -> None:
        node = clip.origin
        fix = None
        slot = _chain_slot(node)
        if slot is not None and not node.conditional:
            chain_call, arg = slot
            fix = fixes.move_arg_to_front(chain_call, arg)
        ctx.report(
            node.call,
            clip=describe(node.call),
            optimizer=describe(lr_step.origin.call) if lr_step.origin.call is not None else lr_step.primitive,
            fix=fix,
            related=[(pipeline.call, "chain built here"), (lr_step.origin.call, "learning-rate step here")],
        )


@register
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
        decay_slot = _chain_slot(decay.origin)
        opt_slot = _chain_slot(optimizer)
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


_DECAY_ALIASES_PARAM = "weight_decay"


@register
class DoubleWeightDecay(Rule):
    code = "OPX103"

    def check(self, ctx: Context) -> None:
        for pipeline in ctx.facts.pipelines:
            decoupled = [
                n for n in pipeline.nodes()
                if n.kind == "alias" and n.entry is not None and any(s.step == "add_decayed_weights" for s in n.entry.expansion)
            ]
            explicit = [n for n in pipeline.nodes() if n.kind == "transform" and n.key == "add_decayed_weights"]
            if not decoupled or not explicit:
                continue
            for alias in decoupled:
                wd = alias.args.value(_DECAY_ALIASES_PARAM) if alias.args is not None else Unknown("")
                if isinstance(wd, Unknown) or wd is None or wd == 0 or isinstance(wd, bool):
                    continue
                for node in explicit:
                    extra = node.args.value("weight_decay") if node.args is not None else Unknown("")
                    if isinstance(extra, (int, float)) and not isinstance(extra, bool) and extra == 0:
                        continue
                    ctx.report(
                        node.call,
                        decay=describe(node.call),
                        optimizer=describe(alias.call),
                        weight_decay=_fmt(wd),
                        related=[(alias.call, f"{alias.short} already decays weights by {_fmt(wd)}")],
                    )
                break


@register
class ChainNeverDescends(Rule):
    code = "OPX104"

    def check(self, ctx: Context) -> None:
        used = None
        for pipeline in ctx.facts.pipelines:
            for sequence in pipeline.sequences():
                signs = [step.negates() for step in sequence]
                if not sequence or any(s is None for s in signs) or any(step.maybe for step in sequence):
                    continue
                if any(negative_alias_lr(step) for step in sequence):
                    continue  # an alias given a negative rate: OPX113 names the cause
                if not any(_moves_params(step) for step in sequence) or any(_zeroes(step) for step in sequence):
                    continue  # a lone clip handed to user code, or a frozen branch: nothing climbs
                flips = sum(1 for s in signs if s)
                if flips % 2 == 0:
                    # A building block (scale_by_adam(), a trace direction) never descends
                    # by design: judge only what the file shows being used as the optimizer.
                    used = used_as_optimizer(ctx.facts) if used is None else used
                    if id(pipeline.call) not in used:
                        break
                    ctx.report(
                        pipeline.call,
                        chain=describe(pipeline.call),
                        detail="no step negates the update" if flips == 0 else f"the update is negated {flips} times",
                        related=[],
                    )
                    break


def _moves_params(step: Step) -> bool:
    """A step that turns gradients into a step size (a preconditioner, momentum, a scale)."""
    return step.primitive.startswith("scale") or step.primitive in ("trace", "ema")


def _zeroes(step: Step) -> bool:
    if step.primitive in ("set_to_zero", "transforms.freeze", "freeze"):
        return True
    if step.primitive == "scale":
        value = step.arg_value("step_size")
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0
    return False


def _fmt(value) -> str:
    return repr(value) if not isinstance(value, float) else f"{value:g}"
