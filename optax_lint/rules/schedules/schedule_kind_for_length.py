"""OPX304 schedule-kind-for-length: The LR schedule's kind does not match the run length:
<10k constant, 10k-100k warmup+cosine, >100k warmup+linear, fine-tuning
warmup+constant."""

from __future__ import annotations

from optax_lint.core.diagnostics import Severity
from optax_lint.facts.schedules.analysis import (
    Shape,
    context_number,
    context_value,
    is_number,
    provenance,
)
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.schedules.regime import fine_tune_entry
from optax_lint.rules.schedules.wording import schedule_name

# When a variant of the recommended decay is the right choice after all.
_UNLESS = {
    "step": "step decay is the classic recipe for CNNs trained with SGD, such as ResNet on ImageNet; keep it there",
    "cosine": "cosine decay is also common on long runs; keep it if your recipe was tuned with it",
    "linear": "linear decay works as well on shorter runs; keep it if your recipe was tuned with it",
    "exponential": "keep it if the recipe you reproduce was tuned with it",
    "polynomial": "keep it if the recipe you reproduce was tuned with it",
    "onecycle": "one-cycle schedules are a deliberate recipe of their own; keep it if you follow one",
}


class ScheduleKindForLength(Rule):
    code = "OPX304"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sf = facts.schedule_analysis
        pairs = sf.lr_schedules()
        if not pairs:
            return
        steps = context_number(facts, "steps")
        if steps is None:
            return
        steps_entry = context_value(facts, "steps")
        fine_tune = fine_tune_entry(facts)
        short, long = ctx.option("short_run_steps"), ctx.option("long_run_steps")
        for use, schedule in pairs:
            shape = sf.shapes.shape(schedule)
            if shape.kind in ("unknown", "constant") or shape.decay in ("unknown", "other"):
                continue
            if shape.kind == "onecycle":
                warm = True
            elif is_number(shape.warmup):
                warm = shape.warmup > 0
            else:
                continue
            if not warm:
                continue  # a decay that starts at its peak has no warmup: OPX301's finding
            decay = shape.decay
            where = f"steps {provenance(steps_entry)}"
            if fine_tune is not None:
                if decay == "constant":
                    continue
                regime, expected = f"fine-tuning (fine_tune {provenance(fine_tune)})", "warmup + constant"
                verdict = "info"
                unless = "a decay after the warmup is a common fine-tuning variant; keep it if your recipe uses one"
            elif steps < short:
                continue  # the recommended constant LR; a schedule on a short run costs nothing: not reported
            else:
                wanted = "cosine" if steps <= long else "linear"
                regime = f"a {steps}-step run ({where})"
                expected = f"warmup + {wanted} decay"
                if decay == wanted:
                    continue
                if decay == "constant":
                    verdict, unless = "warning", ""
                else:
                    verdict = "info"
                    unless = _UNLESS.get(decay, "keep it if the recipe you reproduce uses it")
            have = self._describe_kind(shape, warm)
            detail = f"is {have}; for {regime} the recommended schedule is {expected}"
            if verdict == "info":
                detail += f" (advice, not a mistake: {unless})"
            finding = ctx.report(schedule.call, schedule=schedule_name(schedule), detail=detail)
            if verdict == "info":
                finding.severity = Severity.INFO

    @staticmethod
    def _describe_kind(shape: Shape, warm: bool) -> str:
        names = {
            "cosine": "cosine decay", "linear": "linear decay", "polynomial": "polynomial decay",
            "exponential": "exponential decay", "step": "a step (piecewise-constant) decay",
            "onecycle": "a one-cycle schedule", "constant": "constant",
        }
        decay = names.get(shape.decay, shape.decay)
        if shape.kind == "onecycle":
            return decay
        if decay == "constant":
            return "warmup + constant (it never decays)" if warm else "constant"
        return f"warmup + {decay}" if warm else f"{decay} with no warmup"
