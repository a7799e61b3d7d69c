"""OPX303 schedule-horizon-mismatch: The LR schedule reaches its end value before
training ends, or never reaches it (incl. decay_steps = total - warmup, and one-epoch
schedules in multi-epoch loops)."""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.schedules.analysis import (
    LrUse,
    Shape,
    code,
    context_number,
    context_value,
    drive_sites,
    is_number,
    provenance,
    same_code,
)
from optax_lint.facts.schedules.calls import Schedule
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.schedules.wording import fmt, schedule_name
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.values import single_binding


def _stepped_by_the_run(facts, use: LrUse) -> bool:
    """Whether the run length read from the file's training loop can speak for `use`'s
    optimizer: it is the file's only optimizer, or the file ties it to its updates (an
    `update` call on it, a TrainState or nnx.Optimizer that holds it). With several
    optimizers, one handed to something else (a solver's `optimizer` argument) may run
    a loop of its own."""
    optimizers = [p for p in facts.pipelines if any(n.kind == "alias" for n in p.nodes())]
    if len(optimizers) <= 1:
        return True
    holders = [site.pipeline for site in facts.update_sites] + [c.pipeline for c in facts.consumers]
    return any(held is use.pipeline for held in holders)


def _tol(ctx: Context) -> float:
    return float(ctx.option("tolerance"))


class ScheduleHorizonMismatch(Rule):
    code = "OPX303"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sf = facts.schedule_analysis
        pairs = sf.lr_schedules()
        if not pairs:
            return
        steps = context_number(facts, "steps")
        steps_entry = context_value(facts, "steps")
        tol = _tol(ctx)
        for use, schedule in pairs:
            shape = sf.shapes.shape(schedule)
            if self._misread_decay_steps(ctx, sf, schedule, shape, steps, tol):
                continue
            if self._one_epoch(ctx, sf, use, schedule, shape):
                continue
            if steps is not None and steps >= ctx.option("min_run_steps"):
                inferred = getattr(steps_entry, "source", "") == "inferred"
                if use.multisteps is not None and inferred:
                    continue  # an inferred loop count may be micro-batches: OPX307's business
                if inferred and not _stepped_by_the_run(facts, use):
                    continue  # another optimizer's loop: its length says nothing of this schedule
                self._against_steps(ctx, sf, schedule, shape, steps, steps_entry, tol)

    # decay_steps = total - warmup inside warmup_cosine_decay_schedule
    def _misread_decay_steps(self, ctx, sf, schedule: Schedule, shape: Shape, steps, tol) -> bool:
        if schedule.key != "warmup_cosine_decay_schedule":
            return False
        decay, warmup = schedule.args.expr("decay_steps"), schedule.args.expr("warmup_steps")
        if decay is None or warmup is None:
            return False
        written, binding = decay, None
        if isinstance(decay, cst.Name):
            binding, _ = single_binding(decay.value, schedule.scope)
            if binding is not None and not binding.index:
                written = binding.value
        if not (isinstance(written, cst.BinaryOperation) and isinstance(written.operator, cst.Subtract) and same_code(written.right, warmup)):
            return False
        length = shape.end_step
        if steps is not None and is_number(length):
            total_value = sf.read(written.left, schedule.scope if written is decay else binding.scope)
            closer = abs(steps - length) < abs(steps - total_value) if is_number(total_value) else length == steps
            if closer:
                return False  # the run really is `total - warmup` long: the schedule matches it
        fix = fixes.replace(written, written.left) if written is decay else None
        total = code(written.left)
        detail = (
            f"sets decay_steps={code(written)}, but optax's decay_steps already includes the warmup "
            f"(the cosine runs for decay_steps - warmup_steps): the schedule reaches its end value "
            f"{code(warmup)} steps before {total}"
        )
        ctx.report(decay, schedule=schedule_name(schedule), detail=detail, fix=fix,
                   fix_title=f"Pass decay_steps={total} (the total length, warmup included)" if fix else None)
        return True

    # a schedule sized to one epoch inside an epoch loop
    def _one_epoch(self, ctx, sf, use: LrUse, schedule: Schedule, shape: Shape) -> bool:
        if not (shape.decays or shape.decay == "onecycle") or use.injected:
            return False
        if len({id(u.pipeline) for u in sf.lr_uses}) != 1:
            return False  # several optimizers: cannot tell which loop steps which
        if use.pipeline.record.loop_depth or ctx.facts.record_of.get(schedule.call) is None or ctx.facts.record_of[schedule.call].loop_depth:
            return False  # rebuilt inside a loop
        schedule_record = ctx.facts.record_of[schedule.call]
        for scope in (use.pipeline.record.scope, schedule_record.scope):
            if scope.kind == "function" and self._called_in_loop(ctx.facts, scope.name):
                return False  # rebuilt (with a fresh schedule) every time round some loop
        horizon = shape.horizon_expr
        end = shape.end_step
        for site in drive_sites(ctx.facts):
            if len(site.loops) < 2:
                continue
            inner, outers = site.loops[-1], site.loops[:-1]
            matches = same_code(horizon, inner.expr) or (is_number(end) and is_number(inner.value) and end == inner.value)
            if not matches:
                continue
            if all(is_number(o.value) and o.value <= 1 for o in outers):
                continue
            outer = outers[-1]
            if self._reinitialised_in(ctx.facts, outer):
                continue  # a fresh optimizer state each time round: the schedule restarts on purpose
            epochs = code(outer.expr) if outer.expr is not None else "several"
            detail = (
                f"reaches its end value after {code(inner.expr) if inner.expr is not None else fmt(end)} steps, one epoch, "
                f"but the update runs inside a loop over {epochs} epochs: every epoch after the first trains at the end value"
            )
            ctx.report(horizon if horizon is not None else schedule.call, schedule=schedule_name(schedule), detail=detail,
                       related=[(outer.loop.node, "epoch loop"), (site.call.node, "optimizer step")])
            return True
        return False

    @staticmethod
    def _reinitialised_in(facts, outer) -> bool:
        """Whether the outer loop re-creates optimizer state: `tx.init(...)`, `TrainState.create(...)`,
        `create_train_state(...)`, `nnx.Optimizer(...)` inside it."""
        loop_node = outer.loop.node
        for record in facts.raw.calls:
            if record.scope is not outer.loop.scope or record.loop_depth <= outer.loop.depth:
                continue
            func = record.node.func
            name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            lowered = name.lower()
            if not (name in ("init", "create", "Optimizer") or ("state" in lowered and ("create" in lowered or "init" in lowered))):
                continue
            node = record.statement
            while node is not None and node is not loop_node:
                node = facts.raw.parent_stmt.get(node)
            if node is loop_node:
                return True
        return False

    @staticmethod
    def _called_in_loop(facts, name: str) -> bool:
        return any(
            r.loop_depth and isinstance(r.node.func, cst.Name) and r.node.func.value == name for r in facts.raw.calls
        )

    def _against_steps(self, ctx, sf, schedule: Schedule, shape: Shape, steps: int, steps_entry, tol: float) -> None:
        if not (shape.decays or shape.decay == "onecycle"):
            return
        end = shape.end_step
        if not is_number(end) or end <= 0:
            return
        anchor = shape.horizon_expr if shape.horizon_expr is not None else schedule.call
        where = f"steps {provenance(steps_entry)}"
        if end < steps * (1 - tol):
            end_value = shape.end_value
            at = f" ({fmt(end_value)})" if is_number(end_value) else ""
            detail = (
                f"reaches its end value{at} at step {fmt(end)}, but the run is {steps} steps ({where}): "
                f"the last {fmt(steps - end)} updates ({(steps - end) / steps:.0%}) run at the end value"
            )
        elif end > steps * (1 + tol):
            value = sf.shapes.value_at(schedule, steps)
            peak = shape.peak
            still = ""
            if value is not None:
                still = f" the LR is still {fmt(value)}"
                if is_number(peak) and peak > 0:
                    still += f" ({value / peak:.0%} of its peak)"
                still += " when training stops;"
            detail = (
                f"never reaches its end value: it is sized for {fmt(end)} steps, but the run is {steps} steps ({where});"
                f"{still} {1 - steps / end:.0%} of the schedule is never used"
            )
            detail = detail.rstrip(";")
        else:
            return
        ctx.report(anchor, schedule=schedule_name(schedule), detail=detail)
