"""OPX301 missing-warmup: An adaptive optimizer on a Transformer, or any run of 10k+
steps, trains with no warmup: a constant learning rate, or a decay that starts at its
peak."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.core.diagnostics import Severity
from optax_lint.core.protocol_table import suggested_warmup, warmup_value
from optax_lint.facts.schedules.analysis import (
    LrUse,
    Shape,
    code,
    context_number,
    context_value,
    is_number,
    provenance,
)
from optax_lint.facts.context.depth import single_attention_layer
from optax_lint.facts.context.loops import run_length_expression
from optax_lint.facts.context.residual_gates import identity_initialised
from optax_lint.facts.schedules.calls import Schedule
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.schedules.literals import int_literal
from optax_lint.rules.schedules.regime import fine_tune_entry, small_model_entry, transformer_entry
from optax_lint.rules.schedules.wording import schedule_name
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.names import lookup, qualified_name
from optax_lint.syntax.values import value_of


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


_FINE_TUNE_HELP = ("Warm up briefly (about 100 steps, 1-5% of a short run) and then hold the rate, "
                   "e.g. with optax.warmup_constant_schedule")

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


_SVI = frozenset({"numpyro.infer.SVI", "numpyro.infer.svi.SVI"})


def _svi_pipelines(facts) -> set[int]:
    """The ids of the pipelines given to a numpyro SVI as its `optim` (directly, or
    through `numpyro.optim.optax_to_numpyro`)."""
    out: set[int] = set()
    for record in facts.raw.calls:
        if qualified_name(record.node.func, record.scope) not in _SVI:
            continue
        for arg in record.node.args:
            value = arg.value
            if isinstance(value, cst.Call) and value.args and qualified_name(value.func, record.scope) == "numpyro.optim.optax_to_numpyro":
                value = value.args[0].value
            pipeline = facts.pipeline_for(value, record.scope)
            if pipeline is not None:
                out.add(id(pipeline))
    return out


class MissingWarmup(Rule):
    code = "OPX301"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sf = facts.schedule_analysis
        # Adafactor with its update clipping guards its own first steps (see the rule's doc).
        constant = [
            u for u in sf.lr_uses
            if u.constant and not u.injected and not u.self_scheduling and not u.opaque and not u.update_clipped
            and u.node.call is not None
        ]
        cold = [
            (u, s) for u, s in sf.lr_schedules()
            if not u.opaque and not u.update_clipped and u.node.call is not None and self._cold(sf.shapes.shape(s))
        ]
        if not constant and not cold:
            return  # nothing to judge: do not pay for the run context
        if any(a.node.attr.value == "hyperparams" for a in facts.raw.attributes):
            return  # the LR is driven by hand through inject_hyperparams' state
        adaptive = any(u.adaptive for u in constant) or any(u.adaptive for u, _ in cold)
        transformer = transformer_entry(facts) if adaptive else None
        if transformer is not None and facts.clipped_surrogate is not None:
            # PPO's own loss clips the policy ratio: no early update moves the policy far,
            # whatever Adam's first moments do (a declared long run still warms up).
            transformer = None
        if transformer is not None and identity_initialised(facts, transformer) is not None:
            # Blocks gated shut at the start (adaLN-Zero, ReZero) grow from the identity:
            # the Transformer premise drops; a declared long run still warms up.
            transformer = None
        if transformer is not None and single_attention_layer(facts, transformer) is not None:
            transformer = None  # one attention layer, no stack: a small model (the same holds)
        if transformer is not None and small_model_entry(facts, ctx.option("small_model_params")) is not None:
            transformer = None  # under 1M parameters: a small model (the same holds)
        steps = context_number(facts, "steps")
        steps_entry = context_value(facts, "steps")
        long_run = steps is not None and steps >= ctx.option("min_steps")
        if transformer is None and not long_run:
            return
        if not long_run:
            # A value head's optimizer beside the Transformer's: the Transformer premise
            # is not about it (a declared long run still warms up every optimizer).
            heads = facts.side_pipelines
            constant = [u for u in constant if id(u.pipeline) not in heads]
            cold = [(u, s) for u, s in cold if id(u.pipeline) not in heads]
        if transformer is None:
            # The length-only premise (every run of 10K+ steps warms up) is about training
            # networks; a variational fit of a probabilistic model through numpyro's SVI
            # is not one, and a length alone says nothing about its first steps.
            svi = _svi_pipelines(facts)
            constant = [u for u in constant if id(u.pipeline) not in svi]
            cold = [(u, s) for u, s in cold if id(u.pipeline) not in svi]
        fine_tune_value = fine_tune_entry(facts)
        fine_tune = fine_tune_value is not None
        if fine_tune and facts.clipped_policy_gradient_learner is not None:
            # RL fine-tuning through a PPO-family objective: the clipped policy ratio bounds
            # every update, and such recipes start at their (small) rate.
            return
        if not long_run and steps is not None:
            if fine_tune:
                # The fine-tuning row warms up briefly (about 100 steps) whatever the run's
                # length, unless that warmup is as long as the run itself.
                if steps <= warmup_value("fine_tune_steps"):
                    return
            elif steps <= warmup_value("transformer_min_steps") or (steps_entry is not None and steps_entry.firm):
                # A from-scratch run under 10K steps is in the protocol's constant-rate row:
                # warmup belongs to the longer rows (1-5% of the run, 2000+ steps on a
                # Transformer). A length read with less than high confidence does not
                # silence it, unless even the Transformer warmup would fill the run.
                return
        help_text = _FINE_TUNE_HELP if fine_tune else None
        # The length-only premise (no Transformer) needs the length declared. Read off the
        # code alone, a long run at a constant rate is the protocol's prototyping default,
        # and one that decays from its peak is how CNN, PINN, operator and GAN recipes are
        # published; neither says anything about the run's first steps.
        declared_run = long_run and steps_entry is not None and steps_entry.source != "inferred"
        for use in constant:
            reason = self._reason(use, transformer, declared_run, steps, steps_entry)
            if reason is None:
                continue
            if fine_tune:
                reason += (f"; the run fine-tunes a pretrained model (fine_tune {provenance(fine_tune_value)}), and a fine-tune "
                           "warms up briefly (about 100 steps) before holding the rate")
            fix, title = None, None
            if steps is not None:
                fix, title = self._fix(ctx, use, steps, transformer is not None, fine_tune)
            ctx.report(_lr_anchor(use), optimizer=describe(use.node.call, 80), lr=f"a constant learning rate {use.constant_text}",
                       reason=reason, fix=fix, fix_title=title, changes_state=True, help=help_text,
                       related=[(use.pipeline.call, "optimizer built here")] if use.pipeline.call is not use.node.call else [])
        for use, schedule in cold:
            reason = self._reason(use, transformer, declared_run, steps, steps_entry)
            if reason is None:
                continue
            info = not use.adaptive
            if info:
                reason += (" (advice: warmup matters most for adaptive optimizers and large batches; "
                           "a step or cosine decay recipe for plain SGD, such as ResNet training, often has none)")
            fix, title = None, None
            if steps is not None:
                fix, title = self._cold_fix(ctx, sf, schedule, steps, transformer is not None, fine_tune)
            finding = ctx.report(schedule.call, optimizer=describe(use.node.call, 80),
                                 lr=f"{schedule_name(schedule)}, a decay that starts at its peak", reason=reason, fix=fix, fix_title=title,
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
        if facts.parallel.train_steps():
            return None, None  # under pmap the right warmup scales with the device count (OPX404): not a literal
        statement = record.statement
        length = _run_length(facts, use.node.scope, steps)
        if length is None:
            return None, None  # no expression in scope holds the run length: a literal would be invented
        # A fine-tune follows the fine-tuning row (a brief warmup, then the constant rate),
        # not a from-scratch Transformer's 2000-step minimum.
        warmup = suggested_warmup(steps, transformer and not fine_tune)
        bound = value_of(length, use.node.scope)
        if is_number(bound) and warmup >= bound:
            return None, None  # the loop the fix would decay over is shorter than the warmup the run wants
        variable = _fresh_name(facts.text, "lr_schedule")
        indent = fixes.line_indent(facts.text or "", ctx.positions.span(statement).line)
        default_indent = facts.module.default_indent
        if fine_tune or steps < ctx.option("min_steps"):
            name, shown = "warmup_constant_schedule", f"warmup_steps={warmup}"
            args = [_kw("init_value", cst.Float("0.0")), _kw("peak_value", peak), _kw("warmup_steps", int_literal(warmup), last=True)]
        elif steps > _LONG_RUN_STEPS:
            name, shown = "join_schedules", f"linear warmup for {warmup} steps, then linear decay to step {code(length)}"
            call = _warmup_linear_decay(base, peak, warmup, length, fixes.indent_unit(indent, default_indent))
        else:
            name, shown = "warmup_cosine_decay_schedule", f"warmup_steps={warmup}, decay_steps={code(length)}"
            args = [
                _kw("init_value", cst.Float("0.0")), _kw("peak_value", peak),
                _kw("warmup_steps", int_literal(warmup)), _kw("decay_steps", length, last=True),
            ]
        if name != "join_schedules":
            call = fixes.fit_call(cst.Call(func=cst.Attribute(value=base, attr=cst.Name(name)), args=args), indent,
                                  len(indent) + len(variable) + 3, default_indent=default_indent)
        if call is None:
            return None, None
        assign = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(variable))], call)])
        title = f"Use optax.{name} ({shown}) as the learning rate, bound to {variable}"
        return fixes.rewrite_nodes([(statement, lambda s: _preceded_by(s, assign)), (target, lambda _: cst.Name(variable))]), title

    def _cold_fix(self, ctx: Context, sf, schedule: Schedule, steps: int, transformer: bool, fine_tune: bool):
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
        # A fine-tune follows the fine-tuning row (a brief warmup, then the constant rate),
        # not a from-scratch Transformer's 2000-step minimum.
        warmup = suggested_warmup(steps, transformer and not fine_tune)
        if warmup >= length:
            return None, None
        args = [_kw("init_value", cst.Float("0.0")), _kw("peak_value", peak), _kw("warmup_steps", int_literal(warmup)),
                _kw("decay_steps", decay, last=alpha is None)]
        if alpha is not None:
            args.append(_kw("end_value", fixes.multiplied(alpha, code(peak)), last=True))
        new = cst.Call(func=cst.Attribute(value=base, attr=cst.Name("warmup_cosine_decay_schedule")), args=args)
        new = _like(ctx, schedule.call, new)
        return fixes.replace(schedule.call, new), f"Warm up first: warmup_cosine_decay_schedule(... warmup_steps={warmup}) with the same peak, length and end value"


# Above this many steps the recommended decay is linear (OPX304's `long_run_steps` default).
_LONG_RUN_STEPS = 100_000


def _run_length(facts, scope, steps: int) -> Optional[cst.BaseExpression]:
    """What a fix writes for the run length: the expression that bounds the training loop
    when it means the same where the fix goes (`args.num_steps`); the number itself when
    the user declared it (pragma, pyproject, command line); otherwise None."""
    accum = context_value(facts, "grad_accum")
    if accum is None or accum.value == 1:
        expr = run_length_expression(facts, scope)
        if expr is not None:
            return expr.deep_clone()
    entry = context_value(facts, "steps")
    if entry is not None and entry.source != "inferred":
        return int_literal(steps)
    return None


def _warmup_linear_decay(base: cst.BaseExpression, peak: cst.BaseExpression, warmup: int, length: cst.BaseExpression, unit: str) -> Optional[cst.Call]:
    """The recommended long-run schedule, laid out one piece per line:
    join_schedules([linear_schedule(0.0, lr, W), linear_schedule(lr, 0.0, total - W)], [W]).
    Its lines are indented relative to the statement: libcst adds the indentation of the
    block the statement lands in to every line of a parsed expression; `unit` is one
    level of the file's indentation (a tab or four spaces)."""
    lr, optax_name, total = code(peak), code(base), code(length)
    if "\n" in lr or "\n" in total:
        return None
    w = int_literal(warmup).value
    if isinstance(length, cst.Integer):
        rest = int_literal(int(length.evaluated_value) - warmup).value
    else:
        rest = f"{total} - {w}"
    i1, i2 = unit, unit * 2
    text = (
        f"{optax_name}.join_schedules(\n{i1}[\n"
        f"{i2}{optax_name}.linear_schedule(0.0, {lr}, {w}),\n"
        f"{i2}{optax_name}.linear_schedule({lr}, 0.0, {rest}),\n"
        f"{i1}],\n{i1}[{w}],\n)"
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
    default_indent = ctx.facts.module.default_indent
    if fixes.is_multi_line(old):
        return fixes.one_per_line(new, indent, default_indent)
    lines = text.splitlines()
    line = lines[span.line - 1] if 0 < span.line <= len(lines) else ""
    around = len(line) - len(code(old)) if span.end_line == span.line else span.column - 1
    return fixes.fit_call(new, indent, around, default_indent=default_indent)
