"""The linear scaling rule's common ground (OPX403, OPX404): a data-parallel pmapped step
with a fixed per-device batch, the learning rates the file's optimizers receive, and
the schedules behind them."""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.parallel.devices import (
    BatchEvidence,
    context_value,
    known_device_count,
    per_device_batch,
    walk_expr,
)
from optax_lint.rules.base import Context, Rule
from optax_lint.syntax.nodes import node_text
from optax_lint.syntax.values import single_binding, value_of


def fmt_number(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def lr_sites(ctx: Context):
    """(expression, scope, owner call, kind) for each learning rate the file's
    optimizers receive: the alias/scale_by_learning_rate argument, or the magnitude
    argument of the schedule passed there."""
    facts = ctx.facts
    seen: set = set()
    for pipeline in facts.pipelines:
        for sequence in pipeline.sequences():
            for step in sequence:
                if step.primitive != "scale_by_learning_rate" or step.origin.args is None:
                    continue
                alias_param = step.passed.get("learning_rate") if step.passed else "learning_rate"
                if alias_param is None:
                    continue
                expr = step.origin.args.expr(alias_param)
                if expr is None or id(expr) in seen:
                    continue
                seen.add(id(expr))
                yield expr, step.origin.scope, step.origin.call


def schedule_of(ctx: Context, expr, scope, depth: int = 0):
    """The optax schedule an LR expression evaluates to, also through a local helper
    function that builds and returns it (`adamw(make_schedule())`)."""
    schedule = ctx.facts.schedule_of(expr, scope)
    if schedule is not None or depth > 3:
        return schedule
    if isinstance(expr, cst.Name):
        binding, _ = single_binding(expr.value, scope)
        if binding is not None and not binding.index and binding.value is not None:
            return schedule_of(ctx, binding.value, binding.scope, depth + 1)
        return None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and not expr.args:
        fn, _, _ = ctx.facts.parallel.sites.resolve_function(expr.func, scope)
        if fn is None or fn.kind != "function":
            return None
        values = [r.node.value for r in fn.returns if r.node.value is not None]
        if len(values) == 1:
            return schedule_of(ctx, values[0], fn, depth + 1)
    return None


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class ScalingRule(Rule):
    """Shared conditions: a data-parallel pmapped train step, a fixed per-device batch,
    and a device count that is unknown or at least `min_devices`."""

    def context(self, ctx: Context):
        pf = ctx.facts.parallel
        steps = pf.train_steps()
        if not steps:
            return None
        known = known_device_count(ctx.facts)
        if known is not None and known[0] < int(ctx.option("min_devices")):
            return None
        device_names = tuple(ctx.option("device_count_names"))
        batch = per_device_batch(ctx.facts, tuple(ctx.option("per_device_batch_names")), device_names)
        if batch is None:
            return None
        return steps[0], batch, known, device_names

    @staticmethod
    def sized_numbers(ctx: Context, batch: BatchEvidence, known) -> set:
        """The device count and global batch when known: a learning rate written with
        one of them as a literal (`0.1 * 16_384 / 256`) was sized for that setup."""
        numbers = set()
        if known is not None and known[0] > 1:
            numbers.add(known[0])
            if is_number(batch.value):
                numbers.add(batch.value * known[0])
        declared = context_value(ctx.facts, "batch_global")
        if declared is not None and is_number(declared.value) and declared.value > 1:
            numbers.add(declared.value)
        return numbers

    @staticmethod
    def statically_sized(expr, scope, numbers: set, depth: int = 0) -> bool:
        if not numbers or expr is None or depth > 6:
            return False
        for node in walk_expr(expr):
            if isinstance(node, (cst.Integer, cst.Float)) and value_of(node, scope) in numbers:
                return True
            if isinstance(node, cst.Name):
                binding, _ = single_binding(node.value, scope)
                if binding is not None and binding.value is not None and not binding.index:
                    if ScalingRule.statically_sized(binding.value, binding.scope, numbers, depth + 1):
                        return True
        return False

    def lr_sized(self, ctx: Context, schedule_or_expr, scope, numbers: set) -> bool:
        if hasattr(schedule_or_expr, "pieces"):  # a Schedule
            schedule = schedule_or_expr
            calls = [schedule.call] + [p.call for p in schedule.pieces]
            return any(self.statically_sized(c, schedule.scope, numbers) for c in calls)
        return self.statically_sized(schedule_or_expr, scope, numbers)

    @staticmethod
    def global_batch(batch: BatchEvidence, known) -> str:
        per = batch.value
        if is_number(per) and known is not None:
            return f"{fmt_number(per)} per device x {known[0]} devices = {fmt_number(per * known[0])}, device count {known[1]}"
        if is_number(per):
            return f"{fmt_number(per)} x jax.device_count()"
        if batch.per_device is not None:
            return f"{node_text(batch.per_device)} x jax.device_count()"
        return "per-device batch x jax.device_count()"
