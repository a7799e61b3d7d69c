"""OPX307 schedule-in-microsteps: The learning-rate schedule of an optimizer wrapped in
MultiSteps is counted in micro-batches, so warmup and decay run k times too slowly."""

from __future__ import annotations

import math

import libcst as cst

from optax_lint.facts.schedules.analysis import (
    LrUse,
    code,
    drive_sites,
    factors,
    is_number,
    same_code,
)
from optax_lint.facts.schedules.calls import Schedule
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.schedules.wording import fmt, schedule_name
from optax_lint.syntax import edits as fixes

_LENGTH_PARAMS = ("warmup_steps", "decay_steps", "transition_steps", "transition_begin")


class ScheduleInMicrosteps(Rule):
    code = "OPX307"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sf = facts.schedule_analysis
        for use, schedule in sf.lr_schedules():
            ms = use.multisteps
            if ms is None or ms.args is None:
                continue
            k_expr = ms.args.expr("every_k_schedule")
            if k_expr is None:
                continue
            k = sf.read(k_expr, ms.scope)
            if is_number(k) and k <= 1:
                continue
            k_code = code(k_expr)
            found = self._multiplied_by_k(schedule, k_code)
            for param, expr in found:
                fix = None
                if isinstance(expr, cst.BinaryOperation):
                    other = expr.left if same_code(expr.right, k_expr) else expr.right if same_code(expr.left, k_expr) else None
                    if other is not None:
                        fix = fixes.replace(expr, other)
                detail = (
                    f"sizes {param}={code(expr)} in micro-batches (it multiplies by {k_code}, the MultiSteps k), "
                    f"but the wrapped optimizer's schedule advances once per real update, every {k_code} micro-batches"
                )
                ctx.report(expr, schedule=schedule_name(schedule), k=k_code, detail=detail, fix=fix,
                           fix_title=f"Count {param} in optimizer updates (drop the * {k_code})" if fix else None,
                           related=[(ms.call, "MultiSteps wrapper")])
            if found:
                continue
            self._loop_count(ctx, sf, use, schedule, k_expr, k)

    @staticmethod
    def _multiplied_by_k(schedule: Schedule, k_code: str) -> list:
        out = []
        for owner in [schedule, *schedule.pieces]:
            for param in _LENGTH_PARAMS:
                expr = owner.args.expr(param) if param in owner.entry.params else None
                if expr is None:
                    continue
                found = factors(expr, owner.scope)
                if len(found) > 1 and k_code in found:
                    out.append((param, expr))
        return out

    def _loop_count(self, ctx, sf, use: LrUse, schedule: Schedule, k_expr, k) -> None:
        if len({id(u.pipeline) for u in sf.lr_uses}) != 1:
            return
        shape = sf.shapes.shape(schedule)
        if not (shape.decays or shape.decay == "onecycle"):
            return
        end = shape.end_step
        for site in drive_sites(ctx.facts):
            loops = site.loops
            inner = loops[-1]
            match = len(loops) == 1 and same_code(shape.horizon_expr, inner.expr)
            values = [l.value for l in loops]
            if not match and is_number(end) and all(is_number(x) for x in values):
                match = end == math.prod(values)
            if not match:
                continue
            counted = code(inner.expr) if len(loops) == 1 and inner.expr is not None else fmt(end)
            detail = (
                f"lasts {counted} steps, the number of micro-batches the training loop feeds MultiSteps, but the wrapped "
                f"optimizer's schedule advances once per real update: by the end of the run it has covered only 1/{code(k_expr)} of its length"
            )
            ctx.report(shape.horizon_expr if shape.horizon_expr is not None else schedule.call, schedule=schedule_name(schedule),
                       k=code(k_expr), detail=detail,
                       related=[(use.multisteps.call, "MultiSteps wrapper"), (site.call.node, "one micro-batch per call")])
            return
