"""OPX302 warmup-length: The warmup lies outside 1-5% of the run, or is shorter than 2000
steps on a Transformer."""

from __future__ import annotations

import math

import libcst as cst

from optax_lint.core.protocol_table import suggested_warmup, warmup_range, warmup_value
from optax_lint.facts.schedules.analysis import (
    context_number,
    context_value,
    is_number,
    provenance,
)
from optax_lint.facts.schedules.calls import Schedule
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.schedules.literals import int_literal
from optax_lint.rules.schedules.regime import fine_tune_entry, transformer_entry
from optax_lint.rules.schedules.wording import fmt, schedule_name
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.values import single_binding


def _literal_like(old: cst.BaseExpression, n: int) -> cst.Integer:
    """`n` spelled the way the literal it replaces was: `2_000` where the user wrote `1_000`."""
    if isinstance(old, cst.Integer) and "_" in old.value:
        return cst.Integer(f"{n:_}")
    return int_literal(n)


class WarmupLength(Rule):
    code = "OPX302"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sf = facts.schedule_analysis
        warmups = []
        for use, schedule in sf.lr_schedules():
            shape = sf.shapes.shape(schedule)
            if is_number(shape.warmup) and shape.warmup > 0:  # none: OPX301/OPX304; negative: OPX305
                warmups.append((schedule, shape, shape.warmup))
        if not warmups:
            return
        steps = context_number(facts, "steps")
        if steps is None or steps < ctx.option("min_steps"):
            return  # below 10k steps the protocol's schedule is a constant LR: no warmup length to judge
        transformer = transformer_entry(facts)
        fine_tune = fine_tune_entry(facts)
        if fine_tune is not None:
            transformer = None  # the protocol's fine-tuning row warms up for 100 steps: no 2000-step minimum
        lo_frac, hi_frac, tf_min = ctx.option("min_fraction"), ctx.option("max_fraction"), ctx.option("transformer_min_warmup")
        lo, hi = warmup_range(steps, transformer is not None, lo_frac, hi_frac, tf_min)
        if fine_tune is not None:
            # A fine-tune warms up briefly (the row's 100 steps) or for up to 10% of a
            # short run (the BERT recipe): both are in range.
            lo = min(lo, warmup_value("fine_tune_steps"))
            hi = max(hi, math.floor(warmup_value("fine_tune_max_fraction") * steps))
        for schedule, shape, warmup in warmups:
            if lo <= warmup <= hi:
                continue
            detail = f"{fmt(warmup)} steps is {warmup / steps:.1%} of the {steps}-step run (steps {provenance(context_value(facts, 'steps'))})"
            span = f"{fmt(lo)} steps" if lo == hi else f"{fmt(lo)}-{fmt(hi)} steps"
            source = ""
            if hi == math.inf:
                rng = f"at least {tf_min} steps on a Transformer trained from scratch"
                source = f"; the model is a Transformer (arch {provenance(transformer)})"
            elif fine_tune is not None:
                rng = f"{span} (up to {warmup_value('fine_tune_max_fraction'):.0%} of a fine-tuning run)"
                source = f"; the run fine-tunes a pretrained model (fine_tune {provenance(fine_tune)})"
            else:
                rng = f"{span} ({lo_frac:.0%}-{hi_frac:.0%} of the run" + (f", at least {tf_min} on a Transformer)" if transformer is not None else ")")
            fix, title = None, None
            anchor = shape.warmup_expr if shape.warmup_expr is not None else schedule.call
            if schedule.key.startswith("warmup_") and shape.warmup_expr is not None:
                target = suggested_warmup(steps, transformer is not None, lo_frac, hi_frac, tf_min)
                if lo <= target <= hi and not (schedule.key == "warmup_cosine_decay_schedule" and not self._fits(sf, schedule, target)):
                    fix, title = self._set_warmup(schedule, shape.warmup_expr, target)
            ctx.report(anchor, schedule=schedule_name(schedule), detail=detail, range=rng, source=source, fix=fix, fix_title=title)

    @staticmethod
    def _set_warmup(schedule: Schedule, expr: cst.BaseExpression, target: int):
        """Edit the warmup where its value is written: the literal in the call, or the one
        assignment of the constant it names (so the constant and every use of it agree).
        A computed warmup (`int(0.01 * TOTAL)`) is left to the user."""
        if isinstance(expr, (cst.Integer, cst.Float)):
            return fixes.replace(expr, _literal_like(expr, target)), f"Set warmup_steps to {target}"
        if isinstance(expr, cst.Name):
            binding, _ = single_binding(expr.value, schedule.scope)
            if binding is not None and binding.kind in ("assign", "annassign") and not binding.index and isinstance(binding.value, (cst.Integer, cst.Float)):
                return fixes.replace(binding.value, _literal_like(binding.value, target)), f"Set {expr.value} to {target} where it is defined"
        return None, None

    @staticmethod
    def _fits(sf, schedule: Schedule, warmup: int) -> bool:
        decay = sf.shapes.value(schedule, "decay_steps")
        return is_number(decay) and decay > warmup
