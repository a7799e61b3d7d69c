"""The update's sign: an alias given a negative learning rate negates twice (OPX113
reports it; OPX104 leaves such chains to it)."""

from __future__ import annotations

from optax_lint.facts.pipelines.build import Step


def negative_alias_lr(step: Step) -> bool:
    """An alias's own learning-rate step given a negative rate: it negates twice."""
    if step.primitive != "scale_by_learning_rate" or step.origin.kind != "alias":
        return False
    if step.arg_value("flip_sign") is False:
        return False
    return step.arg_sign("learning_rate") == -1
