"""OPX305 invalid-schedule-arguments: Schedule arguments that optax rejects, or silently
turns into a constant (warmup_constant_schedule(0.0, peak, 0) trains at LR 0 forever)."""

from __future__ import annotations

from optax_lint.facts.schedules.analysis import is_number
from optax_lint.facts.schedules.calls import Schedule
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.schedules.wording import fmt, schedule_name


class InvalidScheduleArguments(Rule):
    code = "OPX305"

    def check(self, ctx: Context) -> None:
        sf = ctx.facts.schedule_analysis
        for schedule in ctx.facts.schedules:
            for node, detail in self._problems(sf, schedule):
                ctx.report(node if node is not None else schedule.call, schedule=schedule_name(schedule), detail=detail)

    def _problems(self, sf, s: Schedule):
        k = s.key
        v = lambda p: sf.shapes.value(s, p)  # noqa: E731
        e = s.args.expr
        out = []
        if k == "warmup_cosine_decay_schedule":
            w, d, peak, end = v("warmup_steps"), v("decay_steps"), v("peak_value"), v("end_value")
            if is_number(w) and is_number(d) and d <= w:
                out.append((e("decay_steps"), (
                    f"has decay_steps={fmt(d)} <= warmup_steps={fmt(w)}: optax raises ValueError at construction "
                    f"('cosine_decay_schedule requires positive decay_steps, got decay_steps={fmt(d - w)}'); "
                    f"decay_steps is the total length, warmup included"
                )))
            if is_number(w) and w < 0:
                out.append((e("warmup_steps"), f"has a negative warmup_steps={fmt(w)}: optax accepts it silently and starts part-way down the cosine, with no warmup"))
            if is_number(peak) and is_number(end) and peak > 0 and end > peak:
                out.append((e("end_value"), f"has end_value={fmt(end)} > peak_value={fmt(peak)}: the 'decay' rises to {fmt(end)} instead"))
        elif k == "cosine_decay_schedule":
            d, alpha = v("decay_steps"), v("alpha")
            if is_number(d) and d <= 0:
                out.append((e("decay_steps"), f"has decay_steps={fmt(d)}: optax raises ValueError ('requires positive decay_steps')"))
            if is_number(alpha) and alpha > 1:
                out.append((e("alpha"), f"has alpha={fmt(alpha)} > 1: alpha is the final value as a fraction of init_value, so the 'decay' rises to {fmt(alpha)}x the initial value"))
        elif k in ("linear_schedule", "polynomial_schedule"):
            ts, init, end = v("transition_steps"), v("init_value"), v("end_value")
            if is_number(ts) and ts <= 0 and not (is_number(init) and is_number(end) and init == end):
                out.append((e("transition_steps"), (
                    f"has transition_steps={fmt(ts)}: optax silently returns a constant init_value"
                    f"{f' ({fmt(init)})' if is_number(init) else ''} and never moves towards end_value (logged only at absl INFO)"
                )))
        elif k == "warmup_constant_schedule":
            w, init, peak = v("warmup_steps"), v("init_value"), v("peak_value")
            if is_number(w) and w <= 0 and not (is_number(init) and is_number(peak) and init == peak):
                stuck = f" ({fmt(init)}{', so training never moves' if is_number(init) and init == 0 else ''})" if is_number(init) else ""
                out.append((e("warmup_steps"), (
                    f"has warmup_steps={fmt(w)}: the warmup is a linear_schedule with transition_steps <= 0, which optax turns "
                    f"into a constant init_value{stuck} forever, logged only at absl INFO"
                )))
        elif k in ("exponential_decay", "warmup_exponential_decay_schedule"):
            start = "init_value" if k == "exponential_decay" else "peak_value"
            ts, rate, init, end = v("transition_steps"), v("decay_rate"), v(start), v("end_value")
            if is_number(ts) and ts <= 0:
                out.append((e("transition_steps"), f"has transition_steps={fmt(ts)}: optax silently returns a constant {start} (no decay), logged only at absl INFO"))
            elif is_number(rate) and rate == 0:
                out.append((e("decay_rate"), f"has decay_rate=0: optax silently returns a constant {start} (no decay), logged only at absl INFO"))
            elif is_number(rate) and 0 < rate < 1 and is_number(init) and is_number(end) and init > 0 and end > init:
                out.append((e("end_value"), f"has end_value={fmt(end)} > {start}={fmt(init)} with decay_rate < 1: end_value is a lower bound, so the LR is {fmt(end)} throughout the decay"))
            if k == "warmup_exponential_decay_schedule":
                w = v("warmup_steps")
                if is_number(w) and w < 0:
                    out.append((e("warmup_steps"), f"has a negative warmup_steps={fmt(w)}: optax accepts it silently (no warmup)"))
        elif k in ("cosine_onecycle_schedule", "linear_onecycle_schedule"):
            ts = v("transition_steps")
            if is_number(ts) and ts <= 0:
                out.append((e("transition_steps"), f"has transition_steps={fmt(ts)}: optax raises ValueError at construction"))
        elif k in ("piecewise_constant_schedule", "piecewise_interpolate_schedule"):
            scales = v("boundaries_and_scales")
            if isinstance(scales, dict) and any(is_number(x) and x < 0 for x in scales.values()):
                out.append((e("boundaries_and_scales"), "has a negative scale: optax raises ValueError ('expects non-negative scale factors')"))
            if k == "piecewise_interpolate_schedule":
                kind = v("interpolate_type")
                if isinstance(kind, str) and kind not in ("linear", "cosine"):
                    out.append((e("interpolate_type"), f"has interpolate_type={kind!r}: optax raises ValueError (must be 'linear' or 'cosine')"))
        return [(node, detail) for node, detail in out]
