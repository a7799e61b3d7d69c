"""OPX101 clip-after-optimizer: Gradient clipping placed after the learning-rate step
clips the updates, not the gradients."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline, Step
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.chain_order.chain_slots import chain_slot
from optax_lint.syntax import edits as fixes


def _first_lr_step(sequence: list[Step]) -> Optional[int]:
    for i, step in enumerate(sequence):
        if step.is_lr_step and not step.maybe:
            return i
    return None


def _user_call(step: Step) -> Optional[cst.Call]:
    return step.origin.call


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
        slot = chain_slot(node)
        if slot is not None and not node.conditional:
            chain_call, arg = slot
            fix = fixes.move_arg_to_front(chain_call, arg)
        ctx.report(
            node.call,
            clip=describe(node.call),
            optimizer=describe(lr_step.origin.call) if lr_step.origin.call is not None else lr_step.primitive,
            fix=fix,
            changes_state=True,
            related=[(pipeline.call, "chain built here"), (lr_step.origin.call, "learning-rate step here")],
        )
