"""OPX104 chain-never-descends: A hand-built chain never negates the update, so
`apply_updates` climbs the loss."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.core.diagnostics import Applicability
from optax_lint.facts.pipelines.build import Step
from optax_lint.facts.pipelines.sequences import parameter_paths
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.chain_order.signs import negative_alias_lr
from optax_lint.syntax import edits as fixes

_BARE = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)


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
                if any(_zeroes(step) for step in sequence):
                    continue  # a frozen branch: nothing climbs
                # Masked param groups: each parameter is negated by its own group's steps.
                paths = [p for p in parameter_paths(sequence) if any(_moves_params(step) for step in p)]
                if not paths:
                    continue  # a lone clip handed to user code: nothing climbs
                counts = [sum(1 for step in path if step.negates()) for path in paths]
                flips = max(counts)
                if all(count % 2 == 0 for count in counts):
                    # A building block (scale_by_adam(), a trace direction) never descends
                    # by design: judge only what the file shows being used as the optimizer.
                    used = ctx.facts.used_as_optimizer if used is None else used
                    if id(pipeline.call) not in used:
                        break
                    fix = _negate_last_scale(sequence) if flips == 0 else None
                    ctx.report(
                        pipeline.call,
                        chain=describe(pipeline.call),
                        detail="no step negates the update" if flips == 0 else f"the update is negated {flips} times",
                        fix=fix,
                        fix_title=_FIX_TITLE if fix is not None else None,
                        applicability=Applicability.UNSAFE if fix is not None else None,
                        related=[],
                    )
                    break


_FIX_TITLE = "Negate the last step size: scale(lr) -> scale(-lr), scale_by_schedule(s) -> scale_by_learning_rate(s)"


def _negate_last_scale(sequence: list[Step]) -> Optional[fixes.ModuleEdit]:
    """When the chain's last step-size step is a `scale(x)` or `scale_by_schedule(s)`
    written as a call, give it the sign apply_updates needs: `scale(-x)`, or
    `scale_by_learning_rate(s)` (which negates). Nothing else in the chain changes."""
    step = sequence[-1]
    origin = step.origin
    call, args = origin.call, origin.args
    if origin.kind != "transform" or call is None or args is None or args.has_star or args.unmatched:
        return None
    if step.primitive == "scale" and origin.short == "scale":
        expr = args.expr("step_size")
        if expr is None:
            return None
        inner = expr if isinstance(expr, _BARE) else expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return fixes.replace(expr, cst.UnaryOperation(operator=cst.Minus(), expression=inner))
    if step.primitive == "scale_by_schedule" and origin.short == "scale_by_schedule":
        if not isinstance(call.func, (cst.Attribute, cst.Name)) or len(call.args) != 1:
            return None
        arg = call.args[0]
        if arg.keyword is not None and arg.keyword.value != "step_size_fn":
            return None
        func = (call.func.with_changes(attr=cst.Name("scale_by_learning_rate")) if isinstance(call.func, cst.Attribute)
                else None)
        if func is None:
            return None  # a bare imported name: renaming it needs an import edit
        new_arg = arg.with_changes(keyword=cst.Name("learning_rate")) if arg.keyword is not None else arg
        return fixes.replace(call, call.with_changes(func=func, args=[new_arg]))
    return None


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
