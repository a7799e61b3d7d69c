"""Learning-rate schedules (docs/protocol.md: schedule, warmup): warmup, horizon, kind for the run length,
arguments optax rejects or silently degrades, join_schedules boundaries, schedules
inside MultiSteps, and schedules that never reach the optimizer.

The rules read `extract/schedule_facts.py` (what each schedule does over time, by
optax's own formulas) and the run context (`steps`, `arch`, `fine_tune`). A rule that
needs a context field that is unknown, or a value that cannot be read statically,
says nothing.
"""

from __future__ import annotations

import math
import re
from typing import Any, Optional

import libcst as cst

from optax_lint.core.diagnostics import Severity
from optax_lint.core.protocol_table import suggested_warmup, warmup_range
from optax_lint.facts.parallel.steps import parallel_facts
from optax_lint.facts.schedules.analysis import (
    LrUse,
    Shape,
    code,
    context_number,
    context_value,
    drive_sites,
    factors,
    is_number,
    provenance,
    same_code,
    schedule_facts,
)
from optax_lint.facts.schedules.calls import Schedule
from optax_lint.rules.base import Context, Rule, describe, register
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.names import lookup, qualified_name
from optax_lint.syntax.values import single_binding
from optax_lint.syntax.walker import walk

# Prefilter (optax_lint/engine/prefilter.py): schedules and the optimizers they drive are optax calls.
TRIGGERS = ("optax",)


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1:
        value = int(value)
    if isinstance(value, int):
        return str(value)
    return "0.0" if value == 0 else f"{value:.3g}"


def _int_literal(n: int) -> cst.Integer:
    return cst.Integer(f"{n:_}" if n >= 10_000 else str(n))


def _literal_like(old: cst.BaseExpression, n: int) -> cst.Integer:
    """`n` spelled the way the literal it replaces was: `2_000` where the user wrote `1_000`."""
    if isinstance(old, cst.Integer) and "_" in old.value:
        return cst.Integer(f"{n:_}")
    return _int_literal(n)


def _sched_name(s: Schedule) -> str:
    short = s.key.rsplit(".", 1)[-1]
    text = describe(s.call, 60)
    if s.name:
        return f"{s.name} = {text if len(text) <= 40 else short + '(...)'}"
    return text


def _is_transformer(facts) -> Optional[Any]:
    entry = context_value(facts, "arch")
    if entry is not None and str(entry.value).lower() == "transformer":
        return entry
    return None


def _fine_tune(facts) -> Optional[Any]:
    entry = context_value(facts, "fine_tune")
    if entry is not None and entry.value is True:
        return entry
    return None


def _optax_base(facts, call: Optional[cst.Call], scope) -> Optional[cst.BaseExpression]:
    """An expression naming the optax module where `call` is written (`optax`, `ox`)."""
    if call is not None:
        func = call.func
        node = func.value if isinstance(func, cst.Attribute) else None
        while isinstance(node, cst.Attribute):
            if qualified_name(node, scope) == "optax":
                return node
            node = node.value
        if isinstance(node, cst.Name) and qualified_name(node, scope) == "optax":
            return node
    _, bindings = lookup("optax", scope)
    if bindings and all(b.kind == "import" and b.qualname == "optax" for b in bindings):
        return cst.Name("optax")
    return None


def _kw(name: str, value: cst.BaseExpression, last: bool = False) -> cst.Arg:
    arg = fixes.keyword_arg(name, value)
    return arg if last else arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))


def _lr_anchor(use: LrUse) -> cst.CSTNode:
    if use.expr is not None:
        return use.expr
    return use.node.call


def _tol(ctx: Context) -> float:
    return float(ctx.option("tolerance"))


# ---------------------------------------------------------------------------


# Decays that start at their peak when the schedule has no warmup piece.
_DECAYS = ("cosine", "linear", "polynomial", "exponential", "step")


def _fresh_name(text: Optional[str], base: str) -> str:
    """`base`, or `base_2`, ... : a name the module does not spell anywhere."""
    text = text or ""
    name, n = base, 1
    while re.search(rf"\b{name}\b", text):
        n += 1
        name = f"{base}_{n}"
    return name


@register
class MissingWarmup(Rule):
    code = "OPX301"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sf = schedule_facts(facts)
        constant = [
            u for u in sf.lr_uses
            if u.constant and not u.injected and not u.self_scheduling and not u.opaque and u.node.call is not None
        ]
        cold = [(u, s) for u, s in sf.lr_schedules() if not u.opaque and u.node.call is not None and self._cold(sf.shapes.shape(s))]
        if not constant and not cold:
            return  # nothing to judge: do not pay for the run context
        if any(a.node.attr.value == "hyperparams" for a in facts.raw.attributes):
            return  # the LR is driven by hand through inject_hyperparams' state
        adaptive = any(u.adaptive for u in constant) or any(u.adaptive for u, _ in cold)
        transformer = _is_transformer(facts) if adaptive else None
        steps = context_number(facts, "steps")
        steps_entry = context_value(facts, "steps")
        long_run = steps is not None and steps >= ctx.option("min_steps")
        if transformer is None and not long_run:
            return
        fine_tune = _fine_tune(facts) is not None
        for use in constant:
            reason = self._reason(use, transformer, long_run, steps, steps_entry)
            if reason is None:
                continue
            fix, title = None, None
            if steps is not None:
                fix, title = self._fix(ctx, use, steps, transformer is not None, fine_tune)
            ctx.report(_lr_anchor(use), optimizer=describe(use.node.call, 80), lr=f"a constant learning rate {use.constant_text}",
                       reason=reason, fix=fix, fix_title=title,
                       related=[(use.pipeline.call, "optimizer built here")] if use.pipeline.call is not use.node.call else [])
        for use, schedule in cold:
            reason = self._reason(use, transformer, long_run, steps, steps_entry)
            if reason is None:
                continue
            info = not use.adaptive
            if info:
                reason += (" (advice: warmup matters most for adaptive optimizers and large batches; "
                           "a step or cosine decay recipe for plain SGD, such as ResNet training, often has none)")
            fix, title = None, None
            if steps is not None:
                fix, title = self._cold_fix(ctx, sf, schedule, steps, transformer is not None)
            finding = ctx.report(schedule.call, optimizer=describe(use.node.call, 80),
                                 lr=f"{_sched_name(schedule)}, a decay that starts at its peak", reason=reason, fix=fix, fix_title=title,
                                 related=[(use.node.call, "the optimizer it drives")])
            if info:
                finding.severity = Severity.INFO

    @staticmethod
    def _cold(shape: Shape) -> bool:
        return shape.kind not in ("unknown", "onecycle") and is_number(shape.warmup) and shape.warmup == 0 and shape.decay in _DECAYS

    @staticmethod
    def _reason(use: LrUse, transformer, long_run: bool, steps, steps_entry) -> Optional[str]:
        if transformer is not None and use.adaptive:
            return f"{use.adaptive_name} is adaptive and the model is a Transformer (arch {provenance(transformer)})"
        if long_run:
            return f"the run is {steps} steps long (steps {provenance(steps_entry)})"
        return None

    def _fix(self, ctx: Context, use: LrUse, steps: int, transformer: bool, fine_tune: bool):
        """A named warmup schedule, bound just before the statement that builds the
        optimizer, so it can be evaluated and logged (an inline one would be OPX611's)."""
        facts = ctx.facts
        base = _optax_base(facts, use.node.call, use.node.scope)
        if base is None:
            return None, None
        if use.schedule is not None:
            peak = use.schedule.args.expr("value")
            target = use.schedule.call
        elif use.expr is not None:
            peak, target = use.expr, use.expr
        else:
            return None, None
        record = facts.record_of.get(use.node.call)
        if peak is None or record is None or not isinstance(record.statement, cst.SimpleStatementLine):
            return None, None
        if parallel_facts(facts).train_steps():
            return None, None  # under pmap the right warmup scales with the device count (OPX404): not a literal
        statement = record.statement
        warmup = suggested_warmup(steps, transformer)
        variable = _fresh_name(facts.text, "lr_schedule")
        indent = fixes.line_indent(facts.text or "", ctx.positions.span(statement).line)
        if fine_tune or steps < ctx.option("min_steps"):
            name, shown = "warmup_constant_schedule", f"warmup_steps={warmup}"
            args = [_kw("init_value", cst.Float("0.0")), _kw("peak_value", peak), _kw("warmup_steps", _int_literal(warmup), last=True)]
        elif steps > _LONG_RUN_STEPS:
            name, shown = "join_schedules", f"linear warmup for {warmup} steps, then linear decay to step {steps}"
            call = _warmup_linear_decay(base, peak, warmup, steps, indent)
        else:
            name, shown = "warmup_cosine_decay_schedule", f"warmup_steps={warmup}, decay_steps={steps}"
            args = [
                _kw("init_value", cst.Float("0.0")), _kw("peak_value", peak),
                _kw("warmup_steps", _int_literal(warmup)), _kw("decay_steps", _int_literal(steps), last=True),
            ]
        if name != "join_schedules":
            call = fixes.fit_call(cst.Call(func=cst.Attribute(value=base, attr=cst.Name(name)), args=args), indent, len(indent) + len(variable) + 3)
        if call is None:
            return None, None
        assign = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(variable))], call)])
        title = f"Use optax.{name} ({shown}) as the learning rate, bound to {variable}"
        return fixes.rewrite_nodes([(statement, lambda s: _preceded_by(s, assign)), (target, lambda _: cst.Name(variable))]), title

    def _cold_fix(self, ctx: Context, sf, schedule: Schedule, steps: int, transformer: bool):
        """cosine_decay_schedule(init, decay_steps, alpha) -> warmup_cosine_decay_schedule with
        the same peak, length and end value; other decays have no one-call warmup form."""
        if schedule.key != "cosine_decay_schedule" or schedule.args.expr("exponent") is not None:
            return None, None
        peak, decay, alpha = schedule.args.expr("init_value"), schedule.args.expr("decay_steps"), schedule.args.expr("alpha")
        base = _optax_base(ctx.facts, schedule.call, schedule.scope)
        length = sf.shapes.value(schedule, "decay_steps")
        if base is None or peak is None or decay is None or not is_number(length):
            return None, None
        if alpha is not None and not isinstance(peak, (cst.Name, cst.Attribute, cst.Integer, cst.Float)):
            return None, None
        warmup = suggested_warmup(steps, transformer)
        if warmup >= length:
            return None, None
        args = [_kw("init_value", cst.Float("0.0")), _kw("peak_value", peak), _kw("warmup_steps", _int_literal(warmup)),
                _kw("decay_steps", decay, last=alpha is None)]
        if alpha is not None:
            args.append(_kw("end_value", fixes.multiplied(alpha, code(peak)), last=True))
        new = cst.Call(func=cst.Attribute(value=base, attr=cst.Name("warmup_cosine_decay_schedule")), args=args)
        new = _like(ctx, schedule.call, new)
        return fixes.replace(schedule.call, new), f"Warm up first: warmup_cosine_decay_schedule(... warmup_steps={warmup}) with the same peak, length and end value"


# Above this many steps the recommended decay is linear (OPX304's `long_run_steps` default).
_LONG_RUN_STEPS = 100_000


def _warmup_linear_decay(base: cst.BaseExpression, peak: cst.BaseExpression, warmup: int, steps: int, indent: str) -> Optional[cst.Call]:
    """The recommended long-run schedule, laid out one piece per line:
    join_schedules([linear_schedule(0.0, lr, W), linear_schedule(lr, 0.0, total - W)], [W])."""
    lr, optax_name = code(peak), code(base)
    if "\n" in lr:
        return None
    w, rest = _int_literal(warmup).value, _int_literal(steps - warmup).value
    i1, i2 = indent + "    ", indent + "        "
    text = (
        f"{optax_name}.join_schedules(\n{i1}[\n"
        f"{i2}{optax_name}.linear_schedule(0.0, {lr}, {w}),\n"
        f"{i2}{optax_name}.linear_schedule({lr}, 0.0, {rest}),\n"
        f"{i1}],\n{i1}[{w}],\n{indent})"
    )
    return cst.parse_expression(text)


def _preceded_by(statement: cst.CSTNode, new: cst.SimpleStatementLine) -> cst.FlattenSentinel:
    """`new` then `statement`; the statement's leading comments move above `new`, and a
    function or class keeps its two blank lines."""
    rest = ()
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        rest = (cst.EmptyLine(), cst.EmptyLine())
    return cst.FlattenSentinel([new.with_changes(leading_lines=statement.leading_lines), statement.with_changes(leading_lines=rest)])


def _like(ctx: Context, old: cst.Call, new: cst.Call) -> cst.Call:
    """`new` laid out like `old`: one argument per line if `old` was split over lines,
    else on one line when it fits."""
    text = ctx.facts.text or ""
    span = ctx.positions.span(old)
    indent = fixes.line_indent(text, span.line)
    if fixes.is_multi_line(old):
        return fixes.one_per_line(new, indent)
    lines = text.splitlines()
    line = lines[span.line - 1] if 0 < span.line <= len(lines) else ""
    around = len(line) - len(code(old)) if span.end_line == span.line else span.column - 1
    return fixes.fit_call(new, indent, around)


@register
class WarmupLength(Rule):
    code = "OPX302"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sf = schedule_facts(facts)
        warmups = []
        for use, schedule in sf.lr_schedules():
            shape = sf.shapes.shape(schedule)
            if is_number(shape.warmup) and shape.warmup > 0:  # none: OPX301/OPX304; negative: OPX305
                warmups.append((schedule, shape, shape.warmup))
        if not warmups:
            return
        steps = context_number(facts, "steps")
        if steps is None or steps < ctx.option("min_steps"):
            return  # below 10k steps the protocol's schedule is a constant LR: no warmup length to judge
        transformer = _is_transformer(facts)
        if _fine_tune(facts) is not None:
            transformer = None  # the protocol's fine-tuning row warms up for 100 steps: no 2000-step minimum
        lo_frac, hi_frac, tf_min = ctx.option("min_fraction"), ctx.option("max_fraction"), ctx.option("transformer_min_warmup")
        lo, hi = warmup_range(steps, transformer is not None, lo_frac, hi_frac, tf_min)
        for schedule, shape, warmup in warmups:
            if lo <= warmup <= hi:
                continue
            detail = f"{_fmt(warmup)} steps is {warmup / steps:.1%} of the {steps}-step run (steps {provenance(context_value(facts, 'steps'))})"
            if hi == math.inf:
                rng = f"at least {tf_min} steps on a Transformer (arch {provenance(transformer)})"
            else:
                span = f"{_fmt(lo)} steps" if lo == hi else f"{_fmt(lo)}-{_fmt(hi)} steps"
                rng = f"{span} ({lo_frac:.0%}-{hi_frac:.0%} of the run" + (f", at least {tf_min} on a Transformer)" if transformer is not None else ")")
            fix, title = None, None
            anchor = shape.warmup_expr if shape.warmup_expr is not None else schedule.call
            if schedule.key.startswith("warmup_") and shape.warmup_expr is not None:
                target = suggested_warmup(steps, transformer is not None, lo_frac, hi_frac, tf_min)
                if lo <= target <= hi and not (schedule.key == "warmup_cosine_decay_schedule" and not self._fits(sf, schedule, target)):
                    fix, title = self._set_warmup(schedule, shape.warmup_expr, target)
            ctx.report(anchor, schedule=_sched_name(schedule), detail=detail, range=rng, fix=fix, fix_title=title)

    @staticmethod
    def _set_warmup(schedule: Schedule, expr: cst.BaseExpression, target: int):
        """Edit the warmup where its value is written: the literal in the call, or the one
        assignment of the constant it names (so the constant and every use of it agree).
        A computed warmup (`int(0.01 * TOTAL)`) is left to the user."""
        if isinstance(expr, (cst.Integer, cst.Float)):
            return fixes.replace(expr, _literal_like(expr, target)), f"Set warmup_steps to {target}"
        if isinstance(expr, cst.Name):
            binding, _ = single_binding(expr.value, schedule.scope)
            if binding is not None and binding.kind in ("assign", "annassign") and not binding.index and isinstance(binding.value, (cst.Integer, cst.Float)):
                return fixes.replace(binding.value, _literal_like(binding.value, target)), f"Set {expr.value} to {target} where it is defined"
        return None, None

    @staticmethod
    def _fits(sf, schedule: Schedule, warmup: int) -> bool:
        decay = sf.shapes.value(schedule, "decay_steps")
        return is_number(decay) and decay > warmup


@register
class ScheduleHorizonMismatch(Rule):
    code = "OPX303"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sf = schedule_facts(facts)
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
                if use.multisteps is not None and getattr(steps_entry, "source", "") == "inferred":
                    continue  # an inferred loop count may be micro-batches: OPX307's business
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
        ctx.report(decay, schedule=_sched_name(schedule), detail=detail, fix=fix,
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
                f"reaches its end value after {code(inner.expr) if inner.expr is not None else _fmt(end)} steps, one epoch, "
                f"but the update runs inside a loop over {epochs} epochs: every epoch after the first trains at the end value"
            )
            ctx.report(horizon if horizon is not None else schedule.call, schedule=_sched_name(schedule), detail=detail,
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
            at = f" ({_fmt(end_value)})" if is_number(end_value) else ""
            detail = (
                f"reaches its end value{at} at step {_fmt(end)}, but the run is {steps} steps ({where}): "
                f"the last {_fmt(steps - end)} updates ({(steps - end) / steps:.0%}) run at the end value"
            )
        elif end > steps * (1 + tol):
            value = sf.shapes.value_at(schedule, steps)
            peak = shape.peak
            still = ""
            if value is not None:
                still = f" the LR is still {_fmt(value)}"
                if is_number(peak) and peak > 0:
                    still += f" ({value / peak:.0%} of its peak)"
                still += " when training stops;"
            detail = (
                f"never reaches its end value: it is sized for {_fmt(end)} steps, but the run is {steps} steps ({where});"
                f"{still} {1 - steps / end:.0%} of the schedule is never used"
            )
            detail = detail.rstrip(";")
        else:
            return
        ctx.report(anchor, schedule=_sched_name(schedule), detail=detail)


# When a variant of the recommended decay is the right choice after all.
_UNLESS = {
    "step": "step decay is the classic recipe for CNNs trained with SGD, such as ResNet on ImageNet; keep it there",
    "cosine": "cosine decay is also common on long runs; keep it if your recipe was tuned with it",
    "linear": "linear decay works as well on shorter runs; keep it if your recipe was tuned with it",
    "exponential": "keep it if the recipe you reproduce was tuned with it",
    "polynomial": "keep it if the recipe you reproduce was tuned with it",
    "onecycle": "one-cycle schedules are a deliberate recipe of their own; keep it if you follow one",
}


@register
class ScheduleKindForLength(Rule):
    code = "OPX304"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sf = schedule_facts(facts)
        pairs = sf.lr_schedules()
        if not pairs:
            return
        steps = context_number(facts, "steps")
        if steps is None:
            return
        steps_entry = context_value(facts, "steps")
        fine_tune = _fine_tune(facts)
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
            finding = ctx.report(schedule.call, schedule=_sched_name(schedule), detail=detail)
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


@register
class InvalidScheduleArguments(Rule):
    code = "OPX305"

    def check(self, ctx: Context) -> None:
        sf = schedule_facts(ctx.facts)
        for schedule in ctx.facts.schedules:
            for node, detail in self._problems(sf, schedule):
                ctx.report(node if node is not None else schedule.call, schedule=_sched_name(schedule), detail=detail)

    def _problems(self, sf, s: Schedule):
        k = s.key
        v = lambda p: sf.shapes.value(s, p)  # noqa: E731
        e = s.args.expr
        out = []
        if k == "warmup_cosine_decay_schedule":
            w, d, peak, end = v("warmup_steps"), v("decay_steps"), v("peak_value"), v("end_value")
            if is_number(w) and is_number(d) and d <= w:
                out.append((e("decay_steps"), (
                    f"has decay_steps={_fmt(d)} <= warmup_steps={_fmt(w)}: optax raises ValueError at construction "
                    f"('cosine_decay_schedule requires positive decay_steps, got decay_steps={_fmt(d - w)}'); "
                    f"decay_steps is the total length, warmup included"
                )))
            if is_number(w) and w < 0:
                out.append((e("warmup_steps"), f"has a negative warmup_steps={_fmt(w)}: optax accepts it silently and starts part-way down the cosine, with no warmup"))
            if is_number(peak) and is_number(end) and peak > 0 and end > peak:
                out.append((e("end_value"), f"has end_value={_fmt(end)} > peak_value={_fmt(peak)}: the 'decay' rises to {_fmt(end)} instead"))
        elif k == "cosine_decay_schedule":
            d, alpha = v("decay_steps"), v("alpha")
            if is_number(d) and d <= 0:
                out.append((e("decay_steps"), f"has decay_steps={_fmt(d)}: optax raises ValueError ('requires positive decay_steps')"))
            if is_number(alpha) and alpha > 1:
                out.append((e("alpha"), f"has alpha={_fmt(alpha)} > 1: alpha is the final value as a fraction of init_value, so the 'decay' rises to {_fmt(alpha)}x the initial value"))
        elif k in ("linear_schedule", "polynomial_schedule"):
            ts, init, end = v("transition_steps"), v("init_value"), v("end_value")
            if is_number(ts) and ts <= 0 and not (is_number(init) and is_number(end) and init == end):
                out.append((e("transition_steps"), (
                    f"has transition_steps={_fmt(ts)}: optax silently returns a constant init_value"
                    f"{f' ({_fmt(init)})' if is_number(init) else ''} and never moves towards end_value (logged only at absl INFO)"
                )))
        elif k == "warmup_constant_schedule":
            w, init, peak = v("warmup_steps"), v("init_value"), v("peak_value")
            if is_number(w) and w <= 0 and not (is_number(init) and is_number(peak) and init == peak):
                stuck = f" ({_fmt(init)}{', so training never moves' if is_number(init) and init == 0 else ''})" if is_number(init) else ""
                out.append((e("warmup_steps"), (
                    f"has warmup_steps={_fmt(w)}: the warmup is a linear_schedule with transition_steps <= 0, which optax turns "
                    f"into a constant init_value{stuck} forever, logged only at absl INFO"
                )))
        elif k in ("exponential_decay", "warmup_exponential_decay_schedule"):
            start = "init_value" if k == "exponential_decay" else "peak_value"
            ts, rate, init, end = v("transition_steps"), v("decay_rate"), v(start), v("end_value")
            if is_number(ts) and ts <= 0:
                out.append((e("transition_steps"), f"has transition_steps={_fmt(ts)}: optax silently returns a constant {start} (no decay), logged only at absl INFO"))
            elif is_number(rate) and rate == 0:
                out.append((e("decay_rate"), f"has decay_rate=0: optax silently returns a constant {start} (no decay), logged only at absl INFO"))
            elif is_number(rate) and 0 < rate < 1 and is_number(init) and is_number(end) and init > 0 and end > init:
                out.append((e("end_value"), f"has end_value={_fmt(end)} > {start}={_fmt(init)} with decay_rate < 1: end_value is a lower bound, so the LR is {_fmt(end)} throughout the decay"))
            if k == "warmup_exponential_decay_schedule":
                w = v("warmup_steps")
                if is_number(w) and w < 0:
                    out.append((e("warmup_steps"), f"has a negative warmup_steps={_fmt(w)}: optax accepts it silently (no warmup)"))
        elif k in ("cosine_onecycle_schedule", "linear_onecycle_schedule"):
            ts = v("transition_steps")
            if is_number(ts) and ts <= 0:
                out.append((e("transition_steps"), f"has transition_steps={_fmt(ts)}: optax raises ValueError at construction"))
        elif k in ("piecewise_constant_schedule", "piecewise_interpolate_schedule"):
            scales = v("boundaries_and_scales")
            if isinstance(scales, dict) and any(is_number(x) and x < 0 for x in scales.values()):
                out.append((e("boundaries_and_scales"), "has a negative scale: optax raises ValueError ('expects non-negative scale factors')"))
            if k == "piecewise_interpolate_schedule":
                kind = v("interpolate_type")
                if isinstance(kind, str) and kind not in ("linear", "cosine"):
                    out.append((e("interpolate_type"), f"has interpolate_type={kind!r}: optax raises ValueError (must be 'linear' or 'cosine')"))
        return [(node, detail) for node, detail in out]


@register
class JoinSchedulesBoundaries(Rule):
    code = "OPX306"

    def check(self, ctx: Context) -> None:
        sf = schedule_facts(ctx.facts)
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
                ctx.report(bounds_node, schedule=_sched_name(schedule),
                           detail=f"joins {n} schedules with {m} {'boundary' if m == 1 else 'boundaries'} (it needs {n - 1}): optax validates nothing, {what}")
                continue
            bounds = [sf.read(b, schedule.scope) for b in bound_exprs]
            if all(is_number(b) for b in bounds) and any(b2 < b1 for b1, b2 in zip(bounds, bounds[1:])):
                ctx.report(bounds_node, schedule=_sched_name(schedule),
                           detail=f"has unsorted boundaries [{', '.join(_fmt(b) for b in bounds)}]: optax does not sort them, a later boundary overrides an earlier one and a piece is skipped")
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
                    ctx.report(piece.args.expr("transition_begin"), schedule=_sched_name(schedule), detail=(
                        f"gives piece {i + 1} ({piece.key}) transition_begin={_fmt(begin)}, equal to its boundary: join_schedules already "
                        f"calls later pieces with step - boundary, so this piece waits another {_fmt(begin)} steps"
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
                ctx.report(bexpr, schedule=_sched_name(schedule), detail=(
                    f"cuts piece {i + 1} ({piece.key}, {_fmt(length)} steps long) after {_fmt(segment)} steps: "
                    f"the next piece starts before this one reaches its end value"
                ))
            elif length < segment and shape.decays:
                ctx.report(bexpr, schedule=_sched_name(schedule), detail=(
                    f"starts piece {i + 2} at step {_fmt(boundary)}, but piece {i + 1} ({piece.key}) reaches its end value after "
                    f"{_fmt(length)} steps: the LR sits at that end value for {_fmt(segment - length)} steps"
                ))

    @staticmethod
    def _piece_length(sf, piece: Schedule, shape: Shape) -> Optional[float]:
        if shape.kind in ("ramp", "warmup_constant"):
            w = shape.warmup
            return float(w) if is_number(w) and w > 0 else None
        if shape.decays and is_number(shape.end_step) and shape.kind != "join":
            return float(shape.end_step)
        return None


_LENGTH_PARAMS = ("warmup_steps", "decay_steps", "transition_steps", "transition_begin")
# Schedules for something other than the learning rate.
_NOT_LR = re.compile(r"eps|explor|beta|temp|tau|momentum|noise|clip|kl_|entropy|ent_coef|weight_decay|wd|decay_rate|ema|dropout|alpha|sigma", re.I)
_LR_KEY = re.compile(r"(^|_)(lr|learning_rate)($|_)", re.I)
_LR_VAR = re.compile(r"(^|_)(lr|learning_rate)($|_)", re.I)
# Callees that only display a value, and conversions on the way to them.
_LOG_SINKS = frozenset({"print", "log", "info", "debug", "warning", "scalar", "scalars", "add_scalar", "add_scalars", "write_scalars", "log_metrics", "log_scalar", "set_postfix", "set_description", "write"})
_CONVERSIONS = frozenset({"float", "int", "str", "round", "asarray", "array", "item", "device_get", "format"})


def _callee_short(call: cst.Call) -> str:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return ""


def _logged(facts, call: cst.Call) -> bool:
    """The schedule's value only reaches a print/log call, or a variable named `lr`."""
    record = facts.record_of.get(call)
    for _ in range(6):
        if record is None:
            return False
        parent = record.parent_call
        if parent is None:
            target = record.assigned_to
            return isinstance(target, cst.Name) and bool(_LR_VAR.search(target.value)) and _only_logged_var(facts, record, target.value)
        short = _callee_short(parent)
        if short in _LOG_SINKS:
            return True
        if short not in _CONVERSIONS:
            return False
        record = facts.record_of.get(parent)
    return False


def _only_logged_var(facts, record, name: str) -> bool:
    """`lr = float(schedule(step))` whose every later use is inside a print/log call."""
    uses = 0
    for node in walk(record.scope.node):
        if isinstance(node, cst.Name) and node.value == name:
            uses += 1
    logged = 0
    for other in facts.raw.calls:
        if other.scope is record.scope and _callee_short(other.node) in _LOG_SINKS:
            logged += sum(1 for n in walk(other.node) if isinstance(n, cst.Name) and n.value == name)
    return uses - 1 == logged


@register
class ScheduleInMicrosteps(Rule):
    code = "OPX307"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sf = schedule_facts(facts)
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
                ctx.report(expr, schedule=_sched_name(schedule), k=k_code, detail=detail, fix=fix,
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
            counted = code(inner.expr) if len(loops) == 1 and inner.expr is not None else _fmt(end)
            detail = (
                f"lasts {counted} steps, the number of micro-batches the training loop feeds MultiSteps, but the wrapped "
                f"optimizer's schedule advances once per real update: by the end of the run it has covered only 1/{code(k_expr)} of its length"
            )
            ctx.report(shape.horizon_expr if shape.horizon_expr is not None else schedule.call, schedule=_sched_name(schedule),
                       k=code(k_expr), detail=detail,
                       related=[(use.multisteps.call, "MultiSteps wrapper"), (site.call.node, "one micro-batch per call")])
            return


@register
class UnusedSchedule(Rule):
    code = "OPX308"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        if not facts.schedules:
            return
        sf = schedule_facts(facts)
        if any(a.node.attr.value == "hyperparams" for a in facts.raw.attributes):
            return
        uses = [u for u in sf.lr_uses if not u.self_scheduling]
        if not uses or any(u.injected or u.schedule is not None or not (u.constant or u.lr_field) for u in uses):
            return  # some optimizer gets a schedule or something we cannot read
        nested = set()
        for schedule in facts.schedules:
            nested.update(id(p) for p in schedule.pieces)
        for schedule in facts.schedules:
            if id(schedule) in nested or schedule.key == "constant_schedule":
                continue
            record = facts.record_of.get(schedule.call)
            if record is None or record.parent_call is not None:
                continue
            how = self._unused(facts, schedule, record)
            if how is None:
                continue
            use = uses[0]
            fix = self._fix(facts, schedule, record, uses)
            ctx.report(
                schedule.call,
                schedule=_sched_name(schedule),
                how=how,
                optimizer=describe(use.node.call, 80) if use.node.call is not None else use.node.short,
                lr=use.constant_text,
                fix=fix,
                fix_title=f"Pass {schedule.name} as the optimizer's learning_rate" if fix else None,
                related=[(use.node.call, "the optimizer's constant learning rate")],
            )

    @staticmethod
    def _unused(facts, schedule: Schedule, record) -> Optional[str]:
        if record.is_expression_statement:
            return "built and discarded"
        target = record.assigned_to
        if not isinstance(target, cst.Name):
            return None
        if record.scope.kind == "module" and not any(l.scope.kind == "module" for l in facts.raw.loops):
            return None  # a module-level schedule may be imported by another module; a script that trains at top level is not
        name = target.value
        if _NOT_LR.search(name):
            return None  # an exploration / momentum / temperature schedule, not an LR one
        _, bindings = lookup(name, record.scope)
        if len(bindings) != 1:
            return None
        owner = record.scope.node
        total = targets = 0
        calls: list[cst.Call] = []
        logged_in_dict: set[int] = set()
        for node in walk(owner):
            if isinstance(node, cst.Name) and node.value == name:
                total += 1
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == name:
                calls.append(node)
            elif isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name) and node.target.value == name:
                targets += 1
            elif isinstance(node, (cst.Global, cst.Nonlocal)) and any(n.name.value == name for n in node.names):
                return None
            elif isinstance(node, cst.DictElement) and isinstance(node.key, cst.SimpleString) and _LR_KEY.search(node.key.raw_value):
                for inner in walk(node.value):
                    if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == name:
                        logged_in_dict.add(id(inner))
        if total - len(calls) - targets > 0:
            return None  # passed somewhere: used
        if not calls:
            return "assigned but never used"
        if all(id(c) in logged_in_dict or _logged(facts, c) for c in calls):
            return f"only evaluated for logging ({name}(step)), never passed to the optimizer"
        return None

    @staticmethod
    def _fix(facts, schedule: Schedule, record, uses: list[LrUse]):
        if len(uses) != 1 or not isinstance(record.assigned_to, cst.Name):
            return None
        use = uses[0]
        if use.expr is None or use.schedule is not None:
            return None
        name = record.assigned_to.value
        owner, bindings = lookup(name, use.node.scope)
        if owner is not record.scope or len(bindings) != 1:
            return None
        opt_record = facts.record_of.get(use.node.call)
        order = {id(r.node): i for i, r in enumerate(facts.raw.calls)}
        if opt_record is None or (opt_record.scope is record.scope and order[id(use.node.call)] < order[id(schedule.call)]):
            return None
        return fixes.replace(use.expr, cst.Name(name))
