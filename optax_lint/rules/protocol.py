"""Optimizer choice against what is being trained (docs/protocol.md: optimizer,
gradient clipping, weight decay).

Every rule here judges a pipeline against the run context (`facts.run_context`),
and asks for the context only after it has found a pipeline it could judge, so a
file with nothing to judge pays nothing for inference. A field that is unknown (or
only guessed with low confidence) keeps the rule silent; `--show-context` lists the
rules skipped that way. Findings are protocol advice, worded with the reason, and a
deliberate choice is recorded with `noqa` or a declared context.
"""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline, Step, TxNode
from optax_lint.facts.schedules.calls import Schedule
from optax_lint.rules.base import Context, Rule, describe, register
from optax_lint.syntax import edits as fixes

# Prefilter (optax_lint/engine/prefilter.py): every protocol rule judges an optax pipeline.
TRIGGERS = ("optax",)

ADAPTIVE = frozenset({"scale_by_adam", "scale_by_amsgrad", "scale_by_adamax", "scale_by_radam", "scale_by_belief", "scale_by_yogi", "scale_by_rms"})
LARGE_BATCH_BASES = frozenset({"adam", "adamw", "sgd"})


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or not _number(value):
        return repr(value)
    if isinstance(value, int) or float(value).is_integer():
        value = int(value)
        return f"{value:_}" if abs(value) >= 10_000 else str(value)
    return f"{value:g}"


def _lr(value: Any) -> str:
    """0.0005 -> '5e-4', 0.0016 -> '1.6e-3', 0.1 -> '0.1'."""
    if not _number(value) or value == 0 or abs(value) >= 0.01:
        return _fmt(value)
    mantissa, exponent = f"{value:.3e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def _count(value: Any) -> str:
    """1_300_000_000 -> '1.3B', 34_234_368 -> '34.2M'."""
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:.3g}{suffix}"
    return str(value)


def _sequences(pipeline: Pipeline, ctx: Optional[Context] = None) -> list[list[Step]]:
    """The pipeline's primitive sequences, expanded once for the six rules of this family."""
    if ctx is None:
        return pipeline.sequences()
    cache = ctx.facts.memo("protocol_sequences", lambda _: {})
    key = id(pipeline)
    if key not in cache:
        cache[key] = (pipeline, pipeline.sequences())  # the pipeline is kept so its id stays unique
    return cache[key][1]


def _complete(sequences: list[list[Step]]) -> bool:
    """Every step known: a pipeline with an unknown part could hold anything."""
    return all(step.primitive != "<unknown>" for seq in sequences for step in seq)


def _optimizers(pipeline: Pipeline) -> list[TxNode]:
    return [node for node in pipeline.nodes() if node.kind == "alias" and node.call is not None]


def _is_full_optimizer(sequences: list[list[Step]]) -> bool:
    return any(step.is_lr_step for seq in sequences for step in seq)


def _chosen_optimizer(pipeline: Pipeline) -> str:
    aliases = _optimizers(pipeline)
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


def _arch_ok(ctx: Context, wanted) -> Optional[Any]:
    arch = ctx.facts.run_context.get("arch")
    if arch is None or arch.value not in wanted:
        return None
    return arch


# ---------------------------------------------------------------------------


@register
class MissingGradientClipping(Rule):
    code = "OPX201"

    def check(self, ctx: Context) -> None:
        candidates = []
        clip_elsewhere = False
        for pipeline in ctx.facts.pipelines:
            sequences = _sequences(pipeline, ctx)
            if any(step.is_clip for seq in sequences for step in seq):
                clip_elsewhere = True  # a clip in this or another pipeline (clipper.update(grads, ...))
                continue
            if _is_full_optimizer(sequences) and _complete(sequences):
                candidates.append(pipeline)
        if not candidates or clip_elsewhere or _clips_by_hand(ctx):
            return
        arch = _arch_ok(ctx, set(ctx.option("architectures")))
        if arch is None:
            return
        max_norm = float(ctx.option("cnn_max_norm") if arch.value == "cnn" else ctx.option("transformer_max_norm"))
        for pipeline in candidates:
            ctx.report(
                pipeline.call,
                optimizer=_chosen_optimizer(pipeline),
                arch=_arch_name(arch.value),
                evidence=arch.cite(),
                max_norm=repr(max_norm),
                fix=self._fix(ctx, pipeline, max_norm),
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


def _clips_by_hand(ctx: Context) -> bool:
    """A clip applied to the gradients outside any optax pipeline: a call named like a
    clip in a statement about gradients (`grads = jax.tree.map(lambda g: jnp.clip(g, -1,
    1), grads)`, a project's `clip_grads(grads, 1.0)` helper). `jnp.clip` on data is not."""
    in_pipelines = set()
    for pipeline in ctx.facts.pipelines:
        in_pipelines |= pipeline.root.calls()
    for record in ctx.facts.raw.calls:
        if record.node in in_pipelines:
            continue
        func = record.node.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if "clip" not in last.lower():
            continue
        if "grad" in last.lower() or "grad" in describe(record.statement, limit=100_000).lower():
            return True
    return False


def _arch_name(arch: str) -> str:
    return {"transformer": "Transformer", "cnn": "CNN", "mlp": "MLP", "rnn": "RNN"}.get(arch, arch)


@register
class ClipThresholdForArchitecture(Rule):
    code = "OPX202"

    def check(self, ctx: Context) -> None:
        factor = float(ctx.option("factor"))
        typical_values = (float(ctx.option("transformer_max_norm")), float(ctx.option("cnn_max_norm")))
        clips = []
        for pipeline in ctx.facts.pipelines:
            for node in pipeline.nodes():
                if node.key == "clip_by_global_norm" and node.args is not None and node.call is not None:
                    value = node.args.value("max_norm")
                    # Ask for the architecture only when some architecture would object.
                    if _number(value) and value >= 0 and any(not (t / factor <= value <= t * factor) for t in typical_values):
                        clips.append((node, value))
        if not clips:
            return
        arch = _arch_ok(ctx, ("transformer", "cnn"))
        if arch is None:
            return
        typical = float(ctx.option("transformer_max_norm") if arch.value == "transformer" else ctx.option("cnn_max_norm"))
        seen = set()
        for node, value in clips:
            if node.call in seen:
                continue
            seen.add(node.call)
            if value == 0:
                how = "0, which zeroes every gradient; far below"
            elif value > typical * factor:
                how = f"{_fmt(value / typical)}x"
                how = f"{how} above"
            elif value < typical / factor:
                how = f"{_fmt(typical / value)}x below"
            else:
                continue
            ctx.report(
                node.call,
                clip=describe(node.call),
                how=how,
                typical=repr(typical),
                arch=_arch_name(arch.value),
                evidence=arch.cite(),
            )


@register
class LargeModelWeightDecay(Rule):
    code = "OPX203"

    def check(self, ctx: Context) -> None:
        candidates = []
        for pipeline in ctx.facts.pipelines:
            sequences = _sequences(pipeline, ctx)
            if not _complete(sequences) or not _is_full_optimizer(sequences):
                continue
            verdict = self._decay(sequences, float(ctx.option("min_weight_decay")))
            if verdict is not None:
                candidates.append((pipeline, verdict))
        if not candidates:
            return
        params = ctx.facts.run_context.get("params")
        if params is None or params.value <= float(ctx.option("min_params")):
            return
        arch = ctx.facts.run_context.get("arch")
        if arch is not None and arch.value != "transformer":
            return  # the protocol's rule is for large Transformers
        for pipeline, (node, decay) in candidates:
            ctx.report(
                node.call if node.call is not None else pipeline.call,
                optimizer=describe(node.call) if node.call is not None else describe(pipeline.call),
                params=_count(params.value),
                evidence=params.cite(),
                decay=decay,
                threshold=_count(float(ctx.option("min_params"))),
            )

    @staticmethod
    def _decay(sequences: list[list[Step]], minimum: float) -> Optional[tuple[TxNode, str]]:
        """(the Adam node, what its decay is) when it lacks decoupled decay near 0.1."""
        verdict = None
        for seq in sequences:
            adam = next((i for i, s in enumerate(seq) if s.primitive == "scale_by_adam"), None)
            if adam is None:
                continue
            if any(s.primitive == "scale_by_trust_ratio" for s in seq):
                return None  # lamb: layer-wise, not the protocol's adam/adamw case
            lr = next((i for i, s in enumerate(seq) if s.is_lr_step and i > adam), None)
            if lr is None:
                return None
            if any(s.maybe for s in seq):
                return None
            decays = [s for s in seq[adam + 1 : lr] if s.primitive == "add_decayed_weights"]
            origin = seq[adam].origin
            if not decays:
                verdict = verdict or (origin, "no decoupled weight decay (adam)" if origin.short in ("adam", "nadam") else "no decoupled weight decay")
                continue
            value = decays[0].arg_value("weight_decay")
            if not _number(value):
                return None  # a schedule or a config value: cannot judge
            if value >= minimum:
                return None
            given = decays[0].origin.args is not None and decays[0].origin.args.given("weight_decay")
            if not given and decays[0].origin.short in ("adamw", "nadamw"):
                text = f"weight_decay={_fmt(value)} ({decays[0].origin.short}'s default)"
            else:
                text = f"weight_decay={_fmt(value)}"
            verdict = verdict or (decays[0].origin, text)
        return verdict


_PEAK_PARAM = {
    "warmup_cosine_decay_schedule": ("peak_value",),
    "warmup_exponential_decay_schedule": ("peak_value",),
    "warmup_constant_schedule": ("peak_value",),
    "cosine_onecycle_schedule": ("peak_value",),
    "linear_onecycle_schedule": ("peak_value",),
    "linear_schedule": ("init_value", "end_value"),
    "polynomial_schedule": ("init_value", "end_value"),
    "cosine_decay_schedule": ("init_value",),
    "exponential_decay": ("init_value", "end_value"),
    "constant_schedule": ("value",),
}


def schedule_peak(schedule: Schedule, depth: int = 0) -> Optional[float]:
    """The largest value a schedule reaches, or None when it cannot be known."""
    key = schedule.key.rsplit(".", 1)[-1]
    if depth > 6:
        return None
    if key == "join_schedules":
        pieces = schedule.args.expr("schedules")
        if not schedule.pieces or pieces is None:
            return None
        if isinstance(pieces, (cst.List, cst.Tuple)) and len(pieces.elements) != len(schedule.pieces):
            return None  # some piece is not an optax schedule
        peaks = [schedule_peak(p, depth + 1) for p in schedule.pieces]
        return None if any(p is None for p in peaks) else max(peaks)
    if key == "piecewise_constant_schedule":
        init = schedule.value("init_value")
        scales = schedule.value("boundaries_and_scales")
        if not _number(init) or not isinstance(scales, dict):
            return None
        best, current = init, init
        try:
            for boundary in sorted(scales):
                current *= scales[boundary]
                best = max(best, current)
        except TypeError:
            return None
        return best
    params = _PEAK_PARAM.get(key)
    if params is None:
        return None
    values = [schedule.value(p) for p in params]
    if key == "exponential_decay":
        rate = schedule.value("decay_rate")
        if not _number(rate):
            return None
        values = [values[0]] if rate <= 1 else values
        if rate > 1 and not _number(values[1]):
            return None
    values = [v for v in values if v is not None]
    if not values or not all(_number(v) for v in values):
        return None
    return max(values)


def learning_rate_peak(ctx: Context, step: Step) -> tuple[Optional[float], Optional[cst.CSTNode]]:
    """(peak LR, the expression that sets it) for an LR step."""
    origin = step.origin
    if origin.args is None:
        return None, None
    if step.primitive == "scale":
        if "step_size" in step.const:
            return None, None  # a built-in sign flip (adafactor's trailing scale(-1)), not a learning rate
        value = step.arg_value("step_size")
        return (-value, origin.call) if _number(value) and value < 0 else (None, None)
    if step.primitive != "scale_by_learning_rate":
        return None, None
    name = step.passed.get("learning_rate", "learning_rate") if step.passed else "learning_rate"
    expr = origin.args.expr(name)
    if expr is None:
        return None, None
    schedule = ctx.facts.schedule_of(expr, origin.scope)
    if schedule is not None:
        return schedule_peak(schedule), schedule.call
    value = step.arg_value("learning_rate")
    return (value, expr) if _number(value) else (None, None)


@register
class FineTuneLearningRate(Rule):
    code = "OPX204"

    def check(self, ctx: Context) -> None:
        threshold = float(ctx.option("max_learning_rate"))
        found = []
        for pipeline in ctx.facts.pipelines:
            for seq in _sequences(pipeline, ctx):
                for step in seq:
                    if not step.is_lr_step or step.maybe:
                        continue
                    peak, where = learning_rate_peak(ctx, step)
                    if peak is not None and peak > threshold and step.origin.call is not None:
                        found.append((pipeline, step, peak, where))
                    break
        if not found:
            return
        fine_tune = ctx.facts.run_context.get("fine_tune")
        if fine_tune is None or fine_tune.value is not True:
            return
        seen = set()
        for pipeline, step, peak, where in found:
            if step.origin.call in seen:
                continue
            seen.add(step.origin.call)
            ctx.report(
                step.origin.call,
                optimizer=describe(step.origin.call),
                lr=_lr(peak),
                evidence=fine_tune.cite(),
                threshold=_lr(threshold),
                related=[(where, "the peak learning rate is set here")] if where is not None and where is not step.origin.call else [],
            )


@register
class LargeBatchOptimizer(Rule):
    code = "OPX205"

    def check(self, ctx: Context) -> None:
        candidates = []
        for pipeline in ctx.facts.pipelines:
            nodes = _optimizers(pipeline)
            if any(n.short in ("lamb", "lars") for n in nodes) or any(n.key == "scale_by_trust_ratio" for n in pipeline.nodes()):
                continue
            for node in nodes:
                if node.short in LARGE_BATCH_BASES and not node.conditional:
                    candidates.append(node)
        if not candidates:
            return
        batch = ctx.facts.run_context.get("batch_global")
        if batch is None:
            return
        effective = batch.value
        accum = ctx.facts.run_context.get("grad_accum")
        detail = batch.cite()
        if accum is not None and accum.value > 1:
            effective *= accum.value
            detail += f"; x {accum.value} accumulated micro-batches"
        if effective <= float(ctx.option("max_batch")):
            return
        arch = ctx.facts.run_context.get("arch")
        suggestion = "optax.lars(...)" if arch is not None and arch.value == "cnn" else "optax.lamb(...)"
        seen = set()
        for node in candidates:
            if node.call in seen:
                continue
            seen.add(node.call)
            ctx.report(
                node.call,
                optimizer=describe(node.call),
                batch=_fmt(effective),
                evidence=detail,
                threshold=_fmt(float(ctx.option("max_batch"))),
                suggestion=suggestion,
            )


@register
class CoupledL2WithAdaptiveOptimizer(Rule):
    code = "OPX206"

    def check(self, ctx: Context) -> None:
        found = []
        for pipeline in ctx.facts.pipelines:
            for seq in _sequences(pipeline, ctx):
                for i, step in enumerate(seq):
                    if step.primitive != "add_decayed_weights" or step.origin.kind != "transform" or step.maybe:
                        continue
                    value = step.arg_value("weight_decay")
                    if _number(value) and value == 0:
                        continue
                    adaptive = next((s for s in seq[i + 1 :] if s.primitive in ADAPTIVE), None)
                    if adaptive is None or adaptive.maybe:
                        continue
                    later = seq[seq.index(adaptive) + 1 :]
                    if any(s.primitive == "add_decayed_weights" for s in later):
                        continue  # adamw after an explicit decay: double decay, OPX103's case
                    found.append((step, adaptive, value))
        if not found:
            return
        arch = _arch_ok(ctx, ("transformer",))
        if arch is None:
            return
        seen = set()
        for decay, adaptive, value in found:
            call = decay.origin.call
            if call is None or call in seen:
                continue
            seen.add(call)
            optimizer = adaptive.origin.call
            wd = _fmt(value) if _number(value) else "wd"
            ctx.report(
                call,
                decay=describe(call),
                optimizer=describe(optimizer) if optimizer is not None else adaptive.primitive,
                arch=_arch_name(arch.value),
                evidence=arch.cite(),
                suggestion=f"optax.adamw(..., weight_decay={wd})",
                related=[(optimizer, "the adaptive step that normalizes the decay term")] if optimizer is not None else [],
            )
