"""OPX403 learning-rate-not-scaled-with-devices: A data-parallel pmap step keeps a fixed
per-device batch but uses a literal learning rate with no device-count factor."""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.parallel.devices import mentions_device_count
from optax_lint.facts.state.walks import name_uses
from optax_lint.rules.base import Context
from optax_lint.rules.multi_device.linear_scaling import (
    ScalingRule,
    fmt_number,
    is_number,
    lr_sites,
    schedule_of,
)
from optax_lint.rules.multi_device.local_names import import_name
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import Unknown, single_binding, value_of

_PEAK_PARAMS = ("peak_value", "init_value", "value")


def _peak(schedule):
    """(argument expression, value) carrying a schedule's peak learning rate."""
    for param in _PEAK_PARAMS:
        if param in schedule.entry.params:
            arg = schedule.args.by_name.get(param)
            value = schedule.value(param)
            return (arg.value if arg is not None else None), value
    return None, Unknown("no peak parameter")


class LearningRateNotScaled(ScalingRule):
    code = "OPX403"

    def check(self, ctx: Context) -> None:
        found = self.context(ctx)
        if found is None:
            return
        step, batch, known, device_names = found
        jax_name = import_name(ctx, "jax")
        fixed_defs: set = set()
        numbers = self.sized_numbers(ctx, batch, known)
        for expr, scope, owner in lr_sites(ctx):
            schedule = schedule_of(ctx, expr, scope)
            if self.lr_sized(ctx, schedule if schedule is not None else expr, scope, numbers):
                continue
            if schedule is not None:
                if schedule.key == "join_schedules":
                    values = [_peak(p)[1] for p in schedule.pieces]
                    if not schedule.pieces or not all(is_number(v) for v in values):
                        continue
                    if any(mentions_device_count(ctx.facts, p.call, p.scope, device_names) for p in schedule.pieces):
                        continue
                    self._report(ctx, schedule.call, max(values), step, batch, known, None)
                    continue
                peak_expr, value = _peak(schedule)
                if peak_expr is None or not is_number(value) or value <= 0:
                    continue
                if mentions_device_count(ctx.facts, peak_expr, schedule.scope, device_names):
                    continue
                fix = self._fix(ctx, peak_expr, schedule.scope, jax_name, fixed_defs)
                self._report(ctx, peak_expr, value, step, batch, known, fix)
                continue
            value = value_of(expr, scope)
            if not is_number(value) or value <= 0:
                continue
            if mentions_device_count(ctx.facts, expr, scope, device_names):
                continue
            fix = self._fix(ctx, expr, scope, jax_name, fixed_defs)
            self._report(ctx, expr, value, step, batch, known, fix)

    def _fix(self, ctx: Context, expr, scope, jax_name, fixed_defs: set):
        """Multiply by jax.device_count() where the value is written, but only inside a
        function: at import time the backend is not set up yet (a multi-host program calls
        jax.distributed.initialize() first), so a module-level constant is never touched.
        A name is scaled at its one assignment when that is in a function; a module-level
        constant is scaled at its use when that use is its only one (so they cannot disagree)."""
        if jax_name is None:
            return None
        factor = f"{jax_name}.device_count()"
        if isinstance(expr, cst.Name):
            owner, _ = lookup(expr.value, scope)
            binding, _ = single_binding(expr.value, scope)
            if owner is None or binding is None or binding.index or binding.value is None or binding.kind != "assign":
                return None
            if owner.kind == "function":
                if id(binding.value) in fixed_defs:
                    return None
                fixed_defs.add(id(binding.value))
                return fixes.replace(binding.value, fixes.multiplied(binding.value, factor))
            if owner.kind == "module" and scope.kind == "function" and len(name_uses(ctx.facts.module, expr.value)) == 2:
                return fixes.replace(expr, fixes.multiplied(expr, factor))  # the assignment plus this one use
            return None
        if isinstance(expr, (cst.Integer, cst.Float)) and scope.kind == "function":
            return fixes.replace(expr, fixes.multiplied(expr, factor))
        return None

    def _report(self, ctx: Context, node, value, step, batch, known, fix) -> None:
        ctx.report(
            node,
            lr=fmt_number(value),
            step=step.describe(),
            global_batch=self.global_batch(batch, known),
            fix=fix,
            related=[(step.site, "data-parallel step mapped here")] + ([(batch.node, "per-device batch here")] if batch.node is not None else []),
        )
