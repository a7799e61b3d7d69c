"""OPX113 negative-learning-rate-to-alias: A negative learning rate, or a schedule that
starts or peaks below zero, passed to an optimizer alias that negates the update
itself: it ascends."""

from __future__ import annotations

import re

import libcst as cst

from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.chain_order.signs import negative_alias_lr
from optax_lint.syntax.values import value_of

_ASCENT_WORDS = re.compile(r"\bascent\b|\bmaximi[sz]", re.IGNORECASE)


class NegativeLearningRateToAlias(Rule):
    """Deliberate gradient ascent is common in RL (`optax.sgd(-lr)` on a return to
    maximise), so a minus written in the alias call itself, or a file that speaks of
    ascent or maximising, is taken at its word."""

    code = "OPX113"

    def check(self, ctx: Context) -> None:
        seen: set = set()
        facts = ctx.facts
        for pipeline in facts.pipelines:
            for sequence in pipeline.sequences():
                for step in sequence:
                    if not negative_alias_lr(step):
                        continue
                    alias = step.origin
                    if alias.call is None or alias.call in seen:
                        continue
                    seen.add(alias.call)
                    param = step.passed.get("learning_rate", "learning_rate") if step.passed else "learning_rate"
                    expr = alias.args.expr(param) if alias.args is not None else None
                    if expr is None or _explicit_minus(expr):
                        continue
                    if _ASCENT_WORDS.search(facts.text or ""):
                        return
                    schedule = facts.schedule_of(expr, alias.scope)
                    if schedule is not None:
                        detail = f"the schedule {describe(schedule.call)} starts or peaks at a negative value"
                        related = [(schedule.call, "negative schedule built here")]
                    else:
                        value = value_of(expr, alias.scope)
                        shown = describe(expr)
                        if isinstance(value, (int, float)) and not isinstance(value, bool) and shown != repr(value):
                            shown = f"{shown} (= {value:g})"
                        detail = f"the learning rate {shown} is negative"
                        related = []
                    ctx.report(expr, alias=alias.short, detail=detail, related=related)


def _explicit_minus(expr: cst.BaseExpression) -> bool:
    """`sgd(-lr)`, `sgd(-1.0 * lr)`: the author wrote the sign at the call."""
    while isinstance(expr, cst.BinaryOperation):
        expr = expr.left
    return isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus)
