"""OPX204 fine-tune-learning-rate: Fine-tuning a pretrained model with a peak learning
rate above 1e-4."""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from optax_lint.facts.pipelines.build import Step
from optax_lint.facts.pipelines.sequences import expanded_sequences
from optax_lint.facts.schedules.analysis import ADAPTIVE_ALIASES, ADAPTIVE_PRIMITIVES
from optax_lint.facts.schedules.calls import Schedule
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.protocol.numbers import fmt, is_number


def _lr(value: Any) -> str:
    """0.0005 -> '5e-4', 0.0016 -> '1.6e-3', 0.1 -> '0.1'."""
    if not is_number(value) or value == 0 or abs(value) >= 0.01:
        return fmt(value)
    mantissa, exponent = f"{value:.3e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


_PEAK_PARAM = {
    "warmup_cosine_decay_schedule": ("peak_value",),
    "warmup_exponential_decay_schedule": ("peak_value",),
    "warmup_constant_schedule": ("peak_value",),
    "cosine_onecycle_schedule": ("peak_value",),
    "linear_onecycle_schedule": ("peak_value",),
    "linear_schedule": ("init_value", "end_value"),
    "polynomial_schedule": ("init_value", "end_value"),
    "cosine_decay_schedule": ("init_value",),
    "exponential_decay": ("init_value", "end_value"),
    "constant_schedule": ("value",),
}


def schedule_peak(schedule: Schedule, depth: int = 0, read=None) -> Optional[float]:
    """The largest value a schedule reaches, or None when it cannot be known. `read`
    (schedule, parameter) -> value reads the arguments (default: as written in the file)."""
    key = schedule.key.rsplit(".", 1)[-1]
    value_of_arg = (lambda param: read(schedule, param)) if read is not None else schedule.value
    if depth > 6:
        return None
    if key == "join_schedules":
        pieces = schedule.args.expr("schedules")
        if not schedule.pieces or pieces is None:
            return None
        if isinstance(pieces, (cst.List, cst.Tuple)) and len(pieces.elements) != len(schedule.pieces):
            return None  # some piece is not an optax schedule
        peaks = [schedule_peak(p, depth + 1, read) for p in schedule.pieces]
        return None if any(p is None for p in peaks) else max(peaks)
    if key == "piecewise_constant_schedule":
        init = value_of_arg("init_value")
        scales = value_of_arg("boundaries_and_scales")
        if not is_number(init) or not isinstance(scales, dict):
            return None
        best, current = init, init
        try:
            for boundary in sorted(scales):
                current *= scales[boundary]
                best = max(best, current)
        except TypeError:
            return None
        return best
    params = _PEAK_PARAM.get(key)
    if params is None:
        return None
    values = [value_of_arg(p) for p in params]
    if key == "exponential_decay":
        rate = value_of_arg("decay_rate")
        if not is_number(rate):
            return None
        values = [values[0]] if rate <= 1 else values
        if rate > 1 and not is_number(values[1]):
            return None
    values = [v for v in values if v is not None]
    if not values or not all(is_number(v) for v in values):
        return None
    return max(values)


def learning_rate_peak(ctx: Context, step: Step) -> tuple[Optional[float], Optional[cst.CSTNode]]:
    """(peak LR, the expression that sets it) for an LR step."""
    origin = step.origin
    if origin.args is None:
        return None, None
    if step.primitive == "scale":
        if "step_size" in step.const:
            return None, None  # a built-in sign flip (adafactor's trailing scale(-1)), not a learning rate
        value = step.arg_value("step_size")
        return (-value, origin.call) if is_number(value) and value < 0 else (None, None)
    if step.primitive != "scale_by_learning_rate":
        return None, None
    name = step.passed.get("learning_rate", "learning_rate") if step.passed else "learning_rate"
    expr = origin.args.expr(name)
    if expr is None:
        return None, None
    schedule = ctx.facts.schedule_of(expr, origin.scope)
    if schedule is not None:
        return schedule_peak(schedule), schedule.call
    value = step.arg_value("learning_rate")
    return (value, expr) if is_number(value) else (None, None)


def _scheduled_peak(ctx: Context, scheduled: Step, scale: Step) -> tuple[Optional[float], Optional[cst.CSTNode]]:
    """(peak LR, the schedule) of a hand-built chain that scales by a schedule and then by
    a negative constant (`scale_by_schedule(s)`, `scale(-1.0)`): the rate is the
    schedule's times the constant's size."""
    origin = scheduled.origin
    expr = origin.args.expr("step_size_fn") if origin.args is not None else None
    schedule = ctx.facts.schedule_of(expr, origin.scope) if expr is not None else None
    peak = schedule_peak(schedule) if schedule is not None else None
    factor = scale.arg_value("step_size") if scale.origin.args is not None and "step_size" not in scale.const else None
    if peak is None or not is_number(factor) or factor >= 0:
        return None, None
    return peak * -factor, schedule.call


def _relative_step(step: Step) -> bool:
    """adafactor with multiply_by_parameter_scale on (its default) or not known off: its
    learning rate scales each update by the parameter's RMS, so 1e-3 moves a weight of
    RMS 0.02 about 2e-5 per step (measured, optax 0.2.8), not 1e-3."""
    origin = step.origin
    if origin.short != "adafactor" or origin.args is None:
        return False
    expr = origin.args.expr("multiply_by_parameter_scale")
    return not (isinstance(expr, cst.Name) and expr.value == "False")


def _adaptive(seq: list[Step], index: int) -> bool:
    """Whether the learning-rate step at `index` scales a per-coordinate normalised
    direction (Adam and kin), so that each weight moves by about the rate: the scale
    the 1e-4 ceiling is stated in. SGD's step is the rate times the gradient."""
    origin = seq[index].origin
    if origin.kind == "alias":
        return origin.key in ADAPTIVE_ALIASES
    return any(s.primitive in ADAPTIVE_PRIMITIVES for s in seq[:index])


class FineTuneLearningRate(Rule):
    code = "OPX204"

    def check(self, ctx: Context) -> None:
        threshold = float(ctx.option("max_learning_rate"))
        found = []
        for pipeline in ctx.facts.pipelines:
            for seq in expanded_sequences(ctx.facts, pipeline):
                scheduled = None
                for i, step in enumerate(seq):
                    if step.primitive == "scale_by_schedule":
                        scheduled = step
                    if not step.is_lr_step or step.maybe:
                        continue
                    if _relative_step(step):
                        break  # a fraction of each weight's RMS, not an Adam-scale step
                    if not _adaptive(seq, i):
                        break  # SGD: the rate times the gradient, not an Adam-scale step
                    if scheduled is not None and step.primitive == "scale":
                        # scale_by_schedule applied the rate; this scale(-1.0) flips the sign
                        peak, where = _scheduled_peak(ctx, scheduled, step)
                        step = scheduled
                    else:
                        peak, where = learning_rate_peak(ctx, step)
                    if peak is not None and peak > threshold and step.origin.call is not None:
                        found.append((pipeline, step, peak, where))
                    break
        if not found:
            return
        fine_tune = ctx.facts.run_context.get("fine_tune")
        if fine_tune is None or fine_tune.value is not True:
            return
        if ctx.facts.adapters_only is not None:
            return  # only LoRA adapters train: the pretrained weights stay frozen at any rate
        seen = set()
        for pipeline, step, peak, where in found:
            if step.origin.call in seen:
                continue
            seen.add(step.origin.call)
            ctx.report(
                step.origin.call,
                optimizer=describe(step.origin.call),
                lr=_lr(peak),
                evidence=fine_tune.cite(),
                threshold=_lr(threshold),
                related=[(where, "the peak learning rate is set here")] if where is not None and where is not step.origin.call else [],
            )
