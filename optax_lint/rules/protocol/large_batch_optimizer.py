"""OPX205 large-batch-optimizer: A global batch above 8192 trained with adam, adamw or
sgd; lamb (lars for CNNs) is built for that."""

from __future__ import annotations

from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.protocol.numbers import fmt
from optax_lint.rules.protocol.optimizers import optimizers

LARGE_BATCH_BASES = frozenset({"adam", "adamw", "sgd"})
# What the large-batch results behind lamb (BERT) and lars (ResNet) were measured on.
_LAYERWISE_ARCHS = frozenset({"transformer", "cnn"})


class LargeBatchOptimizer(Rule):
    code = "OPX205"

    def check(self, ctx: Context) -> None:
        candidates = []
        for pipeline in ctx.facts.pipelines:
            nodes = optimizers(pipeline)
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
        if arch is None or arch.value not in _LAYERWISE_ARCHS:
            return  # LAMB and LARS were shown on Transformers and CNNs, not on an MLP or a neural field
        suggestion = "optax.lars(...)" if arch.value == "cnn" else "optax.lamb(...)"
        seen = set()
        for node in candidates:
            if node.call in seen:
                continue
            seen.add(node.call)
            ctx.report(
                node.call,
                optimizer=describe(node.call),
                batch=fmt(effective),
                evidence=detail,
                threshold=fmt(float(ctx.option("max_batch"))),
                suggestion=suggestion,
            )
