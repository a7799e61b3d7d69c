"""OPX403 learning-rate-not-scaled-with-devices: A data-parallel pmap step keeps a fixed
per-device batch but uses a literal learning rate with no device-count factor."""

from __future__ import annotations

import libcst as cst

from optax_lint.core.lr_scaling import lr_ceiling, scaling_rule
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
from optax_lint.syntax.nodes import node_text
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
                scaled = _device_scaling(ctx, owner, jax_name)
                fix = self._fix(ctx, peak_expr, schedule.scope, scaled, fixed_defs)
                self._report(ctx, peak_expr, value, step, batch, known, fix, scaled)
                continue
            value = value_of(expr, scope)
            if not is_number(value) or value <= 0:
                continue
            if mentions_device_count(ctx.facts, expr, scope, device_names):
                continue
            scaled = _device_scaling(ctx, owner, jax_name)
            fix = self._fix(ctx, expr, scope, scaled, fixed_defs)
            self._report(ctx, expr, value, step, batch, known, fix, scaled)

    def _fix(self, ctx: Context, expr, scope, scaled, fixed_defs: set):
        """Multiply by jax.device_count() where the value is written, but only inside a
        function: at import time the backend is not set up yet (a multi-host program calls
        jax.distributed.initialize() first), so a module-level constant is never touched.
        A name is scaled at its one assignment when that is in a function; a module-level
        constant is scaled at its use when that use is its only one (so they cannot disagree)."""
        if scaled is None:
            return None
        if isinstance(expr, cst.Name):
            owner, _ = lookup(expr.value, scope)
            binding, _ = single_binding(expr.value, scope)
            if owner is None or binding is None or binding.index or binding.value is None or binding.kind != "assign":
                return None
            if owner.kind == "function":
                if id(binding.value) in fixed_defs:
                    return None
                fixed_defs.add(id(binding.value))
                return fixes.replace(binding.value, scaled(binding.value))
            if owner.kind == "module" and scope.kind == "function" and len(name_uses(ctx.facts.module, expr.value)) == 2:
                return fixes.replace(expr, scaled(expr))  # the assignment plus this one use
            return None
        if isinstance(expr, (cst.Integer, cst.Float)) and scope.kind == "function":
            return fixes.replace(expr, scaled(expr))
        return None

    def _report(self, ctx: Context, node, value, step, batch, known, fix, scaled=None) -> None:
        ctx.report(
            node,
            fix_title=f"Scale it with the device count: {node_text(scaled(node))}" if fix is not None else None,
            lr=fmt_number(value),
            step=step.describe(),
            global_batch=self.global_batch(batch, known),
            fix=fix,
            related=[(step.site, "data-parallel step mapped here")] + ([(batch.node, "per-device batch here")] if batch.node is not None else []),
        )


def _device_scaling(ctx: Context, owner: cst.Call, jax_name):
    """How the learning rate grows with the device count, as a function of its
    expression: linear for SGD-like optimizers, square root for adaptive ones, never
    past the published ceiling for the model size when the run context knows it
    (core.lr_scaling: the same rule `recommend` uses). None without a jax import."""
    if jax_name is None:
        return None
    record = ctx.facts.record_of.get(owner)
    callee = ctx.facts.callee(record) if record is not None else None
    optimizer = callee.rsplit(".", 1)[-1] if callee else ""
    count = f"{jax_name}.device_count()"
    factor = count if scaling_rule(optimizer) == "linear" else f"{count} ** 0.5"
    arch, params = (ctx.facts.run_context.get(name) for name in ("arch", "params"))
    ceiling = lr_ceiling(optimizer, arch.value if arch else None, params.value if params else None)

    def scaled(expr: cst.BaseExpression) -> cst.BaseExpression:
        product = fixes.multiplied(expr, factor)
        if ceiling is None:
            return product
        return cst.Call(cst.Name("min"), [cst.Arg(product, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                                          cst.Arg(cst.parse_expression(repr(ceiling.value)))])

    return scaled
