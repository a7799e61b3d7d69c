"""OPX306 join-schedules-boundaries: join_schedules with the wrong number of boundaries,
unsorted boundaries, or a boundary that disagrees with the preceding piece's length."""

from __future__ import annotations

from typing import Optional

from optax_lint.facts.schedules.analysis import Shape, is_number
from optax_lint.facts.schedules.calls import Schedule
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.schedules.wording import fmt, schedule_name


class JoinSchedulesBoundaries(Rule):
    code = "OPX306"

    def check(self, ctx: Context) -> None:
        sf = ctx.facts.schedule_analysis
        for schedule in ctx.facts.schedules:
            if schedule.key != "join_schedules":
                continue
            piece_exprs, bound_exprs = sf.shapes.join_parts(schedule)
            if piece_exprs is None or bound_exprs is None:
                continue
            bounds_node = schedule.args.expr("boundaries")
            n, m = len(piece_exprs), len(bound_exprs)
            if m != n - 1:
                what = "the extra schedules are silently never used" if m < n - 1 else "the extra boundaries are silently ignored"
                ctx.report(bounds_node, schedule=schedule_name(schedule),
                           detail=f"joins {n} schedules with {m} {'boundary' if m == 1 else 'boundaries'} (it needs {n - 1}): optax validates nothing, {what}")
                continue
            bounds = [sf.read(b, schedule.scope) for b in bound_exprs]
            if all(is_number(b) for b in bounds) and any(b2 < b1 for b1, b2 in zip(bounds, bounds[1:])):
                ctx.report(bounds_node, schedule=schedule_name(schedule),
                           detail=f"has unsorted boundaries [{', '.join(fmt(b) for b in bounds)}]: optax does not sort them, a later boundary overrides an earlier one and a piece is skipped")
                continue
            if len(schedule.pieces) != n:
                continue
            self._lengths(ctx, sf, schedule, bound_exprs, bounds)

    def _lengths(self, ctx, sf, schedule: Schedule, bound_exprs, bounds) -> None:
        previous = 0
        for i, piece in enumerate(schedule.pieces):
            if i > 0 and "transition_begin" in piece.entry.params:
                begin = sf.shapes.value(piece, "transition_begin")
                boundary = bounds[i - 1]
                if is_number(begin) and begin > 0 and is_number(boundary) and begin == boundary:
                    ctx.report(piece.args.expr("transition_begin"), schedule=schedule_name(schedule), detail=(
                        f"gives piece {i + 1} ({piece.key}) transition_begin={fmt(begin)}, equal to its boundary: join_schedules already "
                        f"calls later pieces with step - boundary, so this piece waits another {fmt(begin)} steps"
                    ))
            if i >= len(bounds):
                continue
            boundary, bexpr = bounds[i], bound_exprs[i]
            shape = sf.shapes.shape(piece)
            length = self._piece_length(sf, piece, shape)
            segment = boundary - previous if is_number(boundary) and is_number(previous) else None
            previous = boundary
            if length is None or segment is None:
                continue
            if length > segment:
                ctx.report(bexpr, schedule=schedule_name(schedule), detail=(
                    f"cuts piece {i + 1} ({piece.key}, {fmt(length)} steps long) after {fmt(segment)} steps: "
                    f"the next piece starts before this one reaches its end value"
                ))
            elif length < segment and shape.decays:
                ctx.report(bexpr, schedule=schedule_name(schedule), detail=(
                    f"starts piece {i + 2} at step {fmt(boundary)}, but piece {i + 1} ({piece.key}) reaches its end value after "
                    f"{fmt(length)} steps: the LR sits at that end value for {fmt(segment - length)} steps"
                ))

    @staticmethod
    def _piece_length(sf, piece: Schedule, shape: Shape) -> Optional[float]:
        if shape.kind in ("ramp", "warmup_constant"):
            w = shape.warmup
            return float(w) if is_number(w) and w > 0 else None
        if shape.decays and is_number(shape.end_step) and shape.kind != "join":
            return float(shape.end_step)
        return None
