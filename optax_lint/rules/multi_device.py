"""Multi-device data parallelism (docs/protocol.md#multi-device-training): gradients averaged with
`lax.pmean` before the update, axis names that exist, learning rate and warmup scaled
with the device count, state replicated before a pmapped step and unreplicated before
a save, and the pmap idiom that turns into n x the gradient under `jax.shard_map`.

All judgements come from `extract/parallel.py`; whatever it cannot follow is Unknown
and these rules stay silent."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.parallel import steps as par
from optax_lint.facts.parallel.steps import AFresh, AGrad, parallel_facts
from optax_lint.facts.state.access import name_uses
from optax_lint.rules.base import Context, Rule, describe, register
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import Unknown, single_binding, value_of


def TRIGGERS() -> tuple[str, ...]:
    """Prefilter (optax_lint/engine/prefilter.py): every rule here needs a mapped step (pmap,
    shard_map), a collective or replicated state, whose names the extractor's tables
    list; the learning-rate rules also need an optax pipeline (then "optax" is spelled)."""
    names = {n.rsplit(".", 1)[-1] for n in par.PMAP | par.SHARD_MAP | par.REPLICATE | par.UNREPLICATE}
    # Spelled as code: `jax.pmap`, `filter_pmap`, `pmap(`, `import pmap`, `pmap as`, not
    # "... for pmap." in a docstring.
    return ("optax", *(rf"[._]{n}\b|\b{n}(?=[\s(),]|$)" for n in sorted(names | set(par.COLLECTIVES))))


def _import_name(ctx: Context, qualname: str) -> Optional[str]:
    """The local spelling of an imported module in this file (`lax` for jax.lax via
    `from jax import lax`, `jax.lax` via `import jax`), or None."""
    scope = ctx.facts.raw.module_scope
    best = None
    for name, bindings in scope.bindings.items():
        if len(bindings) != 1 or bindings[0].kind != "import":
            continue
        qual = bindings[0].qualname or ""
        if qual == qualname:
            return name
        if qualname.startswith(qual + ".") and best is None:
            best = name + qualname[len(qual):]
    return best


def _axis_literal(step: par.MappedStep, axis: str) -> str:
    arg = step.params.get("axis_name")
    if arg is not None and isinstance(arg.value, cst.SimpleString) and value_of(arg.value, step.scope) == axis:
        return arg.value.value
    return '"' + axis + '"' if '"' not in axis else repr(axis)


def _fmt_number(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# ---------------------------------------------------------------------------
# OPX401


@register
class PmapGradientsNotAveraged(Rule):
    code = "OPX401"

    def check(self, ctx: Context) -> None:
        pf = parallel_facts(ctx.facts)
        seen: set = set()
        for step in pf.pmap_steps:
            if step.function is None or not pf.is_data_parallel(step):
                continue
            axes = step.axis_names
            if isinstance(axes, Unknown):
                continue
            flow = pf.grad_flow(step.function)
            for sink in flow.sinks:
                grad = sink.value
                if not isinstance(grad, AGrad) or sink.call in seen:
                    continue
                if grad.is_reduced_over(axes or frozenset()):
                    continue
                seen.add(sink.call)
                self._report(ctx, pf, step, sink, grad, axes)

    def _report(self, ctx: Context, pf, step: par.MappedStep, sink: par.Sink, grad: AGrad, axes) -> None:
        update = describe(sink.call)
        grads = par.code_of(sink.arg.value)
        if axes:
            axis = sorted(axes)[0]
            detail = f"over {par.fmt_axes(axes)}"
        else:
            axis = None
            detail = "(the pmap has no axis_name to average over)"
        if grad.loss_reduced and not isinstance(grad.loss_reduced, Unknown):
            detail += "; a pmean of the loss does not average the gradients under pmap"
        fix = self._fix(ctx, pf, step, sink, axis) if axis is not None and len(axes) == 1 else None
        ctx.report(
            sink.arg.value,
            grads=grads,
            update=update,
            step=step.describe(),
            detail=detail,
            axis=repr(axis) if axis else "an axis_name",
            fix=fix,
            related=[(grad.source, "gradients computed here"), (step.site, "mapped here")],
        )

    def _fix(self, ctx: Context, pf, step: par.MappedStep, sink: par.Sink, axis: str):
        """`grads = jax.lax.pmean(grads, axis_name='batch')` right after the statement
        that last bound the gradients or, when branches bound them, right before the
        update (a pmean of gradients already averaged is a no-op under pmap), inside
        the pmapped function itself."""
        if not isinstance(sink.arg.value, cst.Name):
            return None
        if sink.scope is not step.function and not _nested_in(sink.scope, step.function):
            return None
        lax = _import_name(ctx, "jax.lax")
        if lax is None:
            return None
        raw = ctx.facts.raw
        before = False
        anchor = sink.origin
        if not isinstance(anchor, cst.SimpleStatementLine):
            record = ctx.facts.record_of.get(sink.call)
            anchor, before = (record.statement if record is not None else None), True
            if not isinstance(anchor, cst.SimpleStatementLine):
                return None
        parent = raw.parent_stmt.get(anchor)
        if parent is None:
            return None
        name = sink.arg.value.value
        statement = cst.parse_statement(f"{name} = {lax}.pmean({name}, axis_name={_axis_literal(step, axis)})\n")
        return fixes.insert_statement_after(parent, anchor, statement, before=before)


def _nested_in(scope, function) -> bool:
    while scope is not None:
        if scope is function:
            return True
        scope = scope.parent
    return False


# ---------------------------------------------------------------------------
# OPX402


@register
class UnboundAxisName(Rule):
    code = "OPX402"

    def check(self, ctx: Context) -> None:
        pf = parallel_facts(ctx.facts)
        for use in pf.unbound_axis_uses():
            root = use.root
            collective = use.collective
            if root.axis_names is None:
                binding = f"{root.describe()} has no axis_name"
            else:
                verb = "is" if len(use.bound) == 1 else "are"
                binding = f"only {par.fmt_axes(use.bound)} {verb} bound there ({root.describe()} binds {par.fmt_axes(root.axis_names)})"
            if use.path:
                binding += ", reached through " + " -> ".join(n.value for n in use.path)
            fix = None
            if root.axis_names is None and root.kind == "pmap":
                wanted = _named_axes(pf, root)
                if wanted is not None and len(wanted) == 1 and root.arg_call is not None and not root.has_star:
                    axis = next(iter(wanted))
                    fix = fixes.replace(root.arg_call, fixes.add_keyword(root.arg_call, "axis_name", cst.SimpleString(_quote(axis))))
            ctx.report(
                collective.call,
                collective=describe(collective.call),
                axis=par.fmt_axes(use.missing),
                binding=binding,
                step=root.describe(),
                fix=fix,
                related=[(root.site, "mapped here")],
            )


def _named_axes(pf, root: par.MappedStep):
    """Every axis name the collectives reachable from a mapped function use, or None
    when one of them is not a literal."""
    names: set = set()
    for collective in pf.collectives_in(root.function, transitive=True):
        if not isinstance(collective.axes, frozenset):
            return None
        names |= collective.axes
    return names


def _quote(axis: str) -> str:
    return '"' + axis + '"' if '"' not in axis and "\\" not in axis else repr(axis)


# ---------------------------------------------------------------------------
# OPX403 / OPX404: the linear scaling rule


def _lr_sites(ctx: Context):
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


def _schedule_of(ctx: Context, expr, scope, depth: int = 0):
    """The optax schedule an LR expression evaluates to, also through a local helper
    function that builds and returns it (`adamw(make_schedule())`)."""
    schedule = ctx.facts.schedule_of(expr, scope)
    if schedule is not None or depth > 3:
        return schedule
    if isinstance(expr, cst.Name):
        binding, _ = single_binding(expr.value, scope)
        if binding is not None and not binding.index and binding.value is not None:
            return _schedule_of(ctx, binding.value, binding.scope, depth + 1)
        return None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and not expr.args:
        fn, _, _ = parallel_facts(ctx.facts).sites.resolve_function(expr.func, scope)
        if fn is None or fn.kind != "function":
            return None
        values = [r.node.value for r in fn.returns if r.node.value is not None]
        if len(values) == 1:
            return _schedule_of(ctx, values[0], fn, depth + 1)
    return None


_PEAK_PARAMS = ("peak_value", "init_value", "value")
_WARMUP_SCHEDULES = {"warmup_cosine_decay_schedule": "warmup_steps", "warmup_exponential_decay_schedule": "warmup_steps", "warmup_constant_schedule": "warmup_steps"}


def _peak(schedule):
    """(argument expression, value) carrying a schedule's peak learning rate."""
    for param in _PEAK_PARAMS:
        if param in schedule.entry.params:
            arg = schedule.args.by_name.get(param)
            value = schedule.value(param)
            return (arg.value if arg is not None else None), value
    return None, Unknown("no peak parameter")


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


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _ScalingRule(Rule):
    """Shared conditions: a data-parallel pmapped train step, a fixed per-device batch,
    and a device count that is unknown or at least `min_devices`."""

    def context(self, ctx: Context):
        pf = parallel_facts(ctx.facts)
        steps = pf.train_steps()
        if not steps:
            return None
        known = par.known_device_count(ctx.facts)
        if known is not None and known[0] < int(ctx.option("min_devices")):
            return None
        device_names = tuple(ctx.option("device_count_names"))
        batch = par.per_device_batch(ctx.facts, tuple(ctx.option("per_device_batch_names")), device_names)
        if batch is None:
            return None
        return steps[0], batch, known, device_names

    @staticmethod
    def sized_numbers(ctx: Context, batch: par.BatchEvidence, known) -> set:
        """The device count and global batch when known: a learning rate written with
        one of them as a literal (`0.1 * 16_384 / 256`) was sized for that setup."""
        numbers = set()
        if known is not None and known[0] > 1:
            numbers.add(known[0])
            if _is_number(batch.value):
                numbers.add(batch.value * known[0])
        declared = par._context_value(ctx.facts, "batch_global")
        if declared is not None and _is_number(declared.value) and declared.value > 1:
            numbers.add(declared.value)
        return numbers

    @staticmethod
    def statically_sized(expr, scope, numbers: set, depth: int = 0) -> bool:
        if not numbers or expr is None or depth > 6:
            return False
        for node in par._walk_expr(expr):
            if isinstance(node, (cst.Integer, cst.Float)) and value_of(node, scope) in numbers:
                return True
            if isinstance(node, cst.Name):
                binding, _ = single_binding(node.value, scope)
                if binding is not None and binding.value is not None and not binding.index:
                    if _ScalingRule.statically_sized(binding.value, binding.scope, numbers, depth + 1):
                        return True
        return False

    def lr_sized(self, ctx: Context, schedule_or_expr, scope, numbers: set) -> bool:
        if hasattr(schedule_or_expr, "pieces"):  # a Schedule
            schedule = schedule_or_expr
            calls = [schedule.call] + [p.call for p in schedule.pieces]
            return any(self.statically_sized(c, schedule.scope, numbers) for c in calls)
        return self.statically_sized(schedule_or_expr, scope, numbers)

    @staticmethod
    def global_batch(batch: par.BatchEvidence, known) -> str:
        per = batch.value
        if _is_number(per) and known is not None:
            return f"{_fmt_number(per)} per device x {known[0]} devices = {_fmt_number(per * known[0])}, device count {known[1]}"
        if _is_number(per):
            return f"{_fmt_number(per)} x jax.device_count()"
        if batch.per_device is not None:
            return f"{par.code_of(batch.per_device)} x jax.device_count()"
        return "per-device batch x jax.device_count()"


@register
class LearningRateNotScaled(_ScalingRule):
    code = "OPX403"

    def check(self, ctx: Context) -> None:
        found = self.context(ctx)
        if found is None:
            return
        step, batch, known, device_names = found
        jax_name = _import_name(ctx, "jax")
        fixed_defs: set = set()
        numbers = self.sized_numbers(ctx, batch, known)
        for expr, scope, owner in _lr_sites(ctx):
            schedule = _schedule_of(ctx, expr, scope)
            if self.lr_sized(ctx, schedule if schedule is not None else expr, scope, numbers):
                continue
            if schedule is not None:
                if schedule.key == "join_schedules":
                    values = [_peak(p)[1] for p in schedule.pieces]
                    if not schedule.pieces or not all(_is_number(v) for v in values):
                        continue
                    if any(par.mentions_device_count(ctx.facts, p.call, p.scope, device_names) for p in schedule.pieces):
                        continue
                    self._report(ctx, schedule.call, max(values), step, batch, known, None)
                    continue
                peak_expr, value = _peak(schedule)
                if peak_expr is None or not _is_number(value) or value <= 0:
                    continue
                if par.mentions_device_count(ctx.facts, peak_expr, schedule.scope, device_names):
                    continue
                fix = self._fix(ctx, peak_expr, schedule.scope, jax_name, fixed_defs)
                self._report(ctx, peak_expr, value, step, batch, known, fix)
                continue
            value = value_of(expr, scope)
            if not _is_number(value) or value <= 0:
                continue
            if par.mentions_device_count(ctx.facts, expr, scope, device_names):
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
            lr=_fmt_number(value),
            step=step.describe(),
            global_batch=self.global_batch(batch, known),
            fix=fix,
            related=[(step.site, "data-parallel step mapped here")] + ([(batch.node, "per-device batch here")] if batch.node is not None else []),
        )


@register
class WarmupNotScaled(_ScalingRule):
    code = "OPX404"

    def check(self, ctx: Context) -> None:
        found = self.context(ctx)
        if found is None:
            return
        step, batch, known, device_names = found
        seen: set = set()
        numbers = self.sized_numbers(ctx, batch, known)
        for expr, scope, owner in _lr_sites(ctx):
            schedule = _schedule_of(ctx, expr, scope)
            if schedule is None or self.lr_sized(ctx, schedule, scope, numbers):
                continue  # no schedule, or one written for a known global batch
            for warmup_expr, value, piece in _warmups(schedule):
                if id(warmup_expr) in seen or not _is_number(value) or value <= 0:
                    continue
                seen.add(id(warmup_expr))
                if par.mentions_device_count(ctx.facts, warmup_expr, piece.scope, device_names):
                    continue
                ctx.report(
                    warmup_expr,
                    warmup=_fmt_number(value),
                    schedule=describe(piece.call),
                    step=step.describe(),
                    global_batch=self.global_batch(batch, known),
                    related=[(step.site, "data-parallel step mapped here")] + ([(batch.node, "per-device batch here")] if batch.node is not None else []),
                )


# ---------------------------------------------------------------------------
# OPX405


_FRESH_WORDS = {"train_state": "TrainState.create", "init": "init", "restore": "a restore"}


def _source(node) -> str:
    if isinstance(node, cst.Call):
        return par.code_of(node.func) + "(...)"
    return describe(node)


@register
class StateNotReplicated(Rule):
    code = "OPX405"

    def check(self, ctx: Context) -> None:
        pf = parallel_facts(ctx.facts)
        seen: set = set()
        for crossing in pf.crossings:
            value = crossing.value
            if not isinstance(value, AFresh) or crossing.step.kind != "pmap":
                continue
            if not isinstance(crossing.axis, int) or isinstance(crossing.axis, bool):
                continue
            node = crossing.arg.value
            if id(node) in seen:
                continue
            seen.add(id(node))
            ctx.report(
                node,
                value=par.code_of(node),
                step=crossing.step.describe(),
                source=_source(value.node),
                axis=crossing.axis,
                related=[(value.node, "created here, on the host, without a device axis"), (crossing.step.site, "mapped here")],
            )


# ---------------------------------------------------------------------------
# OPX406


# What writing one copy per device costs, by the library that writes it.
_REPLICATED_SAVE = {
    "orbax": "orbax stores one copy per device, and restoring on another device count fails with 'Topology mismatch'",
    "other": "the file holds one copy per device (a leading device axis on every leaf), "
    "and restoring it on another device count, or on one host, gives arrays of the wrong shape",
}


@register
class CheckpointReplicatedState(Rule):
    code = "OPX406"

    def check(self, ctx: Context) -> None:
        pf = parallel_facts(ctx.facts)
        unreplicate = _import_name(ctx, "flax.jax_utils")
        for save in pf.replicated_saves:
            fix = None
            value = save.value
            if unreplicate is not None and not isinstance(save.saved, (cst.Dict, cst.Tuple, cst.List)):
                fix = fixes.replace(save.saved, fixes.wrapped_in_call(save.saved, f"{unreplicate}.unreplicate"))
            ctx.report(
                save.saved,
                saved=par.code_of(save.saved),
                save=describe(save.call),
                origin=("from " if value.how == "replicate" else "output of ") + describe(value.node),
                consequence=_REPLICATED_SAVE.get(save.how, _REPLICATED_SAVE["other"]),
                fix=fix,
                related=[(value.node, "replicated here")],
            )


# ---------------------------------------------------------------------------
# OPX407


@register
class ShardMapGradientAlreadyReduced(Rule):
    code = "OPX407"

    def check(self, ctx: Context) -> None:
        pf = parallel_facts(ctx.facts)
        seen: set = set()
        for step in pf.steps:
            if step.kind != "shard_map" or step.function is None or step.mapper == "jax.smap":
                continue
            if step.check_vma is not True:
                continue
            mesh_axes = step.axis_names
            if not isinstance(mesh_axes, frozenset):
                continue
            flow = pf.grad_flow(step.function)
            for reduction in flow.reductions:
                grad = reduction.grad
                if reduction.op not in ("pmean", "psum") or reduction.collective in seen:
                    continue
                if not isinstance(reduction.axes, frozenset) or not reduction.axes <= mesh_axes:
                    continue
                if grad.axes or grad.unknown_axis or grad.loss_reduced is not False or grad.wrt is None:
                    continue
                if not pf.belongs(reduction.scope, step.function):
                    continue
                index = step.param_index(grad.wrt)
                if index is None or step.in_spec_replicated(index) is not True:
                    continue
                seen.add(reduction.collective)
                sizes = step.mesh_sizes()
                n = 1
                for axis in reduction.axes:
                    n = n * sizes[axis] if axis in sizes and n is not None else None
                factor = f"{n}x" if n else "n x (n = the size of the mesh axis)"
                if reduction.op == "psum" and n:
                    factor = f"{n * n}x ({n}x once divided by the device count)"
                elif reduction.op == "psum":
                    factor = "n^2 x (n x once divided by the device count)"
                ctx.report(
                    reduction.collective,
                    collective=describe(reduction.collective),
                    axis=par.fmt_axes(reduction.axes),
                    param=grad.wrt_text or grad.wrt,
                    step=step.describe(),
                    factor=factor,
                    related=[(grad.source, "gradient taken here"), (step.site, "shard_map here")],
                )
