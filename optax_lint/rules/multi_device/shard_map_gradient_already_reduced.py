"""OPX407 shard-map-gradient-already-reduced: The pmap idiom 'grad, then pmean(grads)'
ported into jax.shard_map: the gradient w.r.t. replicated params is already summed, so
it ends up n times too large."""

from __future__ import annotations

from optax_lint.facts.parallel.names import fmt_axes
from optax_lint.rules.base import Context, Rule, describe


class ShardMapGradientAlreadyReduced(Rule):
    code = "OPX407"

    def check(self, ctx: Context) -> None:
        pf = ctx.facts.parallel
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
                    axis=fmt_axes(reduction.axes),
                    param=grad.wrt_text or grad.wrt,
                    step=step.describe(),
                    factor=factor,
                    related=[(grad.source, "gradient taken here"), (step.site, "shard_map here")],
                )
