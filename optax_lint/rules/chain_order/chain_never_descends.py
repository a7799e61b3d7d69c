"""OPX104 chain-never-descends: A hand-built chain never negates the update, so
`apply_updates` climbs the loss."""

from __future__ import annotations

from optax_lint.facts.pipelines.build import Step
from optax_lint.facts.pipelines.sequences import parameter_paths
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.chain_order.signs import negative_alias_lr


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
