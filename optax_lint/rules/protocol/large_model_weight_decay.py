"""OPX203 large-model-weight-decay: A model above 1e9 parameters trained with adam, or
adamw at its 1e-4 default, instead of decoupled weight decay near 0.1."""

from __future__ import annotations

from typing import Any, Optional

from optax_lint.facts.pipelines.build import Step, TxNode
from optax_lint.facts.pipelines.sequences import expanded_sequences
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.protocol.numbers import fmt, is_number
from optax_lint.rules.protocol.optimizers import complete, is_full_optimizer


def _count(value: Any) -> str:
    """1_300_000_000 -> '1.3B', 34_234_368 -> '34.2M'."""
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:.3g}{suffix}"
    return str(value)


class LargeModelWeightDecay(Rule):
    code = "OPX203"

    def check(self, ctx: Context) -> None:
        candidates = []
        for pipeline in ctx.facts.pipelines:
            sequences = expanded_sequences(ctx.facts, pipeline)
            if not complete(sequences) or not is_full_optimizer(sequences):
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
            if not is_number(value):
                return None  # a schedule or a config value: cannot judge
            if value >= minimum:
                return None
            given = decays[0].origin.args is not None and decays[0].origin.args.given("weight_decay")
            if not given and decays[0].origin.short in ("adamw", "nadamw"):
                text = f"weight_decay={fmt(value)} ({decays[0].origin.short}'s default)"
            else:
                text = f"weight_decay={fmt(value)}"
            verdict = verdict or (decays[0].origin, text)
        return verdict
