"""OPX404 warmup-not-scaled-with-devices: A data-parallel pmap step keeps a fixed per-
device batch but the LR warmup length is a literal with no device-count factor."""

from __future__ import annotations

from optax_lint.facts.parallel.devices import mentions_device_count
from optax_lint.rules.base import Context, describe
from optax_lint.rules.multi_device.linear_scaling import (
    ScalingRule,
    fmt_number,
    is_number,
    lr_sites,
    schedule_of,
)

_WARMUP_SCHEDULES = {"warmup_cosine_decay_schedule": "warmup_steps", "warmup_exponential_decay_schedule": "warmup_steps", "warmup_constant_schedule": "warmup_steps"}


def _warmups(schedule) -> list:
    """(expression, value, schedule call) for the warmup length(s) of a schedule."""
    out = []
    key = schedule.key
    if key in _WARMUP_SCHEDULES:
        arg = schedule.args.by_name.get(_WARMUP_SCHEDULES[key])
        if arg is not None:
            out.append((arg.value, schedule.value(_WARMUP_SCHEDULES[key]), schedule))
    elif key == "join_schedules" and schedule.pieces:
        first = schedule.pieces[0]
        if first.key == "linear_schedule":
            start, end = first.value("init_value"), first.value("end_value")
            if isinstance(start, (int, float)) and isinstance(end, (int, float)) and end > start:
                arg = first.args.by_name.get("transition_steps")
                if arg is not None:
                    out.append((arg.value, first.value("transition_steps"), first))
    return out


class WarmupNotScaled(ScalingRule):
    code = "OPX404"

    def check(self, ctx: Context) -> None:
        found = self.context(ctx)
        if found is None:
            return
        step, batch, known, device_names = found
        seen: set = set()
        numbers = self.sized_numbers(ctx, batch, known)
        for expr, scope, owner in lr_sites(ctx):
            schedule = schedule_of(ctx, expr, scope)
            if schedule is None or self.lr_sized(ctx, schedule, scope, numbers):
                continue  # no schedule, or one written for a known global batch
            for warmup_expr, value, piece in _warmups(schedule):
                if id(warmup_expr) in seen or not is_number(value) or value <= 0:
                    continue
                seen.add(id(warmup_expr))
                if mentions_device_count(ctx.facts, warmup_expr, piece.scope, device_names):
                    continue
                ctx.report(
                    warmup_expr,
                    warmup=fmt_number(value),
                    schedule=describe(piece.call),
                    step=step.describe(),
                    global_batch=self.global_batch(batch, known),
                    related=[(step.site, "data-parallel step mapped here")] + ([(batch.node, "per-device batch here")] if batch.node is not None else []),
                )
