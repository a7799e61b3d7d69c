"""OPX201 missing-gradient-clipping: A Transformer's optimizer has no gradient clipping;
clip the global norm at 1.0, first in the chain."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.context.depth import single_attention_layer
from optax_lint.facts.context.residual_gates import identity_initialised
from optax_lint.facts.pipelines.build import Pipeline
from optax_lint.facts.pipelines.sequences import expanded_sequences
from optax_lint.facts.pipelines.use import pipeline_referenced
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.protocol.architecture import arch_name, arch_ok
from optax_lint.rules.protocol.optimizers import complete, is_full_optimizer, optimizers
from optax_lint.rules.schedules.regime import demo_run_entry, small_model_entry
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.nodes import last_name


def _chosen_optimizer(pipeline: Pipeline) -> str:
    aliases = optimizers(pipeline)
    node = aliases[0] if len(aliases) == 1 else pipeline.root
    return describe(node.call) if node.call is not None else describe(pipeline.call)


def _optax_name(ctx: Context, call: cst.Call) -> Optional[str]:
    """The local name bound to the optax module in the scope of `call`'s pipeline, if any."""
    func = call.func
    while isinstance(func, cst.Call):
        func = func.func
    root = func
    while isinstance(root, cst.Attribute):
        root = root.value
    if isinstance(root, cst.Name):
        record = ctx.facts.record_of.get(call)
        if record is not None:
            from optax_lint.syntax.names import qualified_name

            if qualified_name(root, record.scope) == "optax":
                return root.value
    for name, bindings in ctx.facts.raw.module_scope.bindings.items():
        if len(bindings) == 1 and bindings[0].kind == "import" and bindings[0].qualname == "optax":
            return name
    return None


_SECOND_MOMENT = ("adam", "lamb", "adabelief", "yogi", "rmsprop", "adagrad", "adafactor", "scale_by_rms", "scale_by_rss")


def _harm(uses) -> str:
    """What one unclipped spike does to this optimizer: an Adam-family optimizer keeps
    it in its second moment and stalls (measured, see the rule's doc); plain SGD or
    momentum steps by the gradient itself, so the spike becomes the step."""
    if uses and not any(u.adaptive for u in uses):
        return "take a step as large as its gradient"
    names = [u.adaptive_name.lower() for u in uses if u.adaptive]
    if not names or any("adam" in name or "lamb" in name for name in names):
        return "stall Adam"
    other = next((name for name in names for key in _SECOND_MOMENT if key in name), None)
    if other is not None:
        return f"stall {other} (its second moment keeps the spike)"
    return "derail training"


class MissingGradientClipping(Rule):
    code = "OPX201"

    def check(self, ctx: Context) -> None:
        candidates = []
        clipped_optimizers = []
        for pipeline in ctx.facts.pipelines:
            sequences = expanded_sequences(ctx.facts, pipeline)
            if any(step.is_clip for seq in sequences for step in seq):
                # a clip in this or another pipeline (clipper.update(grads, ...), a chain that
                # wraps the optimizer); a chain built and never used (a leftover probe) clips nothing
                if pipeline_referenced(ctx.facts, pipeline):
                    clipped_optimizers.append(pipeline)
                continue
            if is_full_optimizer(sequences) and complete(sequences):
                candidates.append(pipeline)
        # One exception: a clipped optimizer that is the other branch's choice for the same
        # name (`if args.adafactor: optimizer = optax.adafactor(...) else: optimizer =
        # optax.adamw(...)`, adafactor clipping its own updates) clips nothing on this branch.
        candidates = [p for p in candidates if _alternative_only(ctx, p, clipped_optimizers)]
        candidates = [p for p in candidates if id(p) not in ctx.facts.side_pipelines]  # a value head, an inner optimizer
        if not candidates or _clips_by_hand(ctx):
            return
        arch = arch_ok(ctx, set(ctx.option("architectures")))
        if arch is None:
            return
        if arch.value == "transformer" and identity_initialised(ctx.facts, arch) is not None:
            return  # blocks gated shut at the start (adaLN-Zero, ReZero): no spike-prone stack to guard
        if arch.value == "transformer" and single_attention_layer(ctx.facts, arch) is not None:
            return  # one attention layer: a small model, no stack to guard
        if arch.value == "transformer" and small_model_entry(ctx.facts, ctx.option("small_model_params")) is not None:
            return  # a small model (under 1M parameters): no deep stack to guard
        if demo_run_entry(ctx.facts, ctx.option("demo_run_steps")) is not None:
            return  # a demonstration of a few hundred steps: nothing long for a spike to waste
        max_norm = float(ctx.option("cnn_max_norm") if arch.value == "cnn" else ctx.option("transformer_max_norm"))
        uses = ctx.facts.schedule_analysis.lr_uses
        for pipeline in candidates:
            ctx.report(
                pipeline.call,
                optimizer=_chosen_optimizer(pipeline),
                harm=_harm([u for u in uses if u.pipeline is pipeline]),
                arch=arch_name(arch.value),
                evidence=arch.cite(),
                max_norm=repr(max_norm),
                fix=self._fix(ctx, pipeline, max_norm),
                changes_state=True,
            )

    @staticmethod
    def _fix(ctx: Context, pipeline: Pipeline, max_norm: float):
        root = pipeline.root
        call = pipeline.call
        name = _optax_name(ctx, call)
        if name is None or root.conditional:
            return None
        clip = cst.parse_expression(f"{name}.clip_by_global_norm({float(max_norm)!r})")
        if root.kind == "wrapper" and root.short == "chain" and root.call is call and not any(a.star for a in call.args):
            return fixes.replace(call, fixes.insert_arg_front(call, clip))
        if root.kind == "alias" or (root.kind == "wrapper" and root.short in ("inject_hyperparams", "inject_stateful_hyperparams")):
            wrapped = cst.Call(
                func=cst.parse_expression(f"{name}.chain"),
                args=[
                    cst.Arg(clip, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                    cst.Arg(call),
                ],
            )
            return fixes.replace(call, wrapped)
        return None


def _alternative_only(ctx: Context, candidate: Pipeline, clipped: list) -> bool:
    """Every clipped pipeline is an alternative to `candidate`: the same name bound in the
    same scope, in the other branch of an `if` (so none clips what `candidate` builds)."""
    if not clipped:
        return True
    if candidate.name is None:
        return False
    raw = ctx.facts.raw
    mine = raw.enclosing_ifs(candidate.record.statement)
    for other in clipped:
        if other.name != candidate.name or other.record.scope is not candidate.record.scope:
            return False
        theirs = raw.enclosing_ifs(other.record.statement)
        if not any(node is node2 and side != side2 for node, side in mine for node2, side2 in theirs):
            return False
    return True


def _clips_by_hand(ctx: Context) -> bool:
    """A clip applied to the gradients outside any optax pipeline: a call named like a
    clip in a statement about gradients (`grads = jax.tree.map(lambda g: jnp.clip(g, -1,
    1), grads)`, a project's `clip_grads(grads, 1.0)` helper), or a global norm that
    bounds a rescale (`g_norm = global_norm(grads); g_norm = jnp.maximum(max_norm,
    g_norm)`, as a TrainState.apply_gradients may do). `jnp.clip` on data is not, nor
    is a global norm that is only logged."""
    in_pipelines = set()
    for pipeline in ctx.facts.pipelines:
        in_pipelines |= pipeline.root.calls()
    norms: dict = {}  # function scope -> names bound to a global norm of the gradients
    for record in ctx.facts.raw.calls:
        if record.node in in_pipelines:
            continue
        last = last_name(record.node.func)
        if last == "global_norm":
            statement = record.statement
            body = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and statement.body else None
            if isinstance(body, cst.Assign) and len(body.targets) == 1 and isinstance(body.targets[0].target, cst.Name):
                norms.setdefault(record.scope, set()).add(body.targets[0].target.value)
            continue
        if "clip" not in last.lower():
            continue
        if "grad" in last.lower() or "grad" in describe(record.statement, limit=100_000).lower():
            return True
    for record in ctx.facts.raw.calls:
        names = norms.get(record.scope)
        if names and last_name(record.node.func) in _BOUNDS and any(
                isinstance(arg.value, cst.Name) and arg.value.value in names for arg in record.node.args):
            return True  # jnp.maximum(max_norm, g_norm): the norm caps a rescale
    return False


# Calls that cap a global norm into a clipping factor.
_BOUNDS = frozenset({"maximum", "minimum", "where", "clip"})
