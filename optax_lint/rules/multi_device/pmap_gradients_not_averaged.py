"""OPX401 pmap-gradients-not-averaged: A pmapped data-parallel step updates with per-
device gradients: no `lax.pmean`/`psum` over the mapped axis."""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.parallel.grads import AGrad, Sink
from optax_lint.facts.parallel.names import fmt_axes
from optax_lint.facts.parallel.sites import MappedStep
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.multi_device.local_names import import_name
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.nodes import node_text
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import inside_scope


def _axis_literal(step: MappedStep, axis: str) -> str:
    arg = step.params.get("axis_name")
    if arg is not None and isinstance(arg.value, cst.SimpleString) and value_of(arg.value, step.scope) == axis:
        return arg.value.value
    return '"' + axis + '"' if '"' not in axis else repr(axis)


class PmapGradientsNotAveraged(Rule):
    code = "OPX401"

    def check(self, ctx: Context) -> None:
        pf = ctx.facts.parallel
        seen: set = set()
        # Axes a collective names where its pmap does not bind them: that collective is
        # misnamed (OPX402, whose fix renames it), not missing.
        unbound = {(id(use.root.site), axis) for use in pf.unbound_axis_uses() for axis in use.missing}
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
                if any((id(step.site), axis) in unbound for axis in grad.axes):
                    continue
                seen.add(sink.call)
                self._report(ctx, pf, step, sink, grad, axes)

    def _report(self, ctx: Context, pf, step: MappedStep, sink: Sink, grad: AGrad, axes) -> None:
        update = describe(sink.call)
        grads = node_text(sink.arg.value)
        if axes:
            axis = sorted(axes)[0]
            detail = f"over {fmt_axes(axes)}"
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

    def _fix(self, ctx: Context, pf, step: MappedStep, sink: Sink, axis: str):
        """`grads = jax.lax.pmean(grads, axis_name='batch')` right after the statement
        that last bound the gradients or, when branches bound them, right before the
        update (a pmean of gradients already averaged is a no-op under pmap), inside
        the pmapped function itself."""
        if not isinstance(sink.arg.value, cst.Name):
            return None
        if not inside_scope(sink.scope, step.function):
            return None
        lax = import_name(ctx, "jax.lax")
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
