"""OPX206 coupled-l2-with-adaptive-optimizer: `add_decayed_weights` before `adam` on a
Transformer is L2 through Adam's moments, not decoupled weight decay."""

from __future__ import annotations

from optax_lint.facts.pipelines.sequences import expanded_sequences
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.protocol.architecture import arch_name, arch_ok
from optax_lint.rules.protocol.numbers import fmt, is_number

ADAPTIVE = frozenset({"scale_by_adam", "scale_by_amsgrad", "scale_by_adamax", "scale_by_radam", "scale_by_belief", "scale_by_yogi", "scale_by_rms"})


class CoupledL2WithAdaptiveOptimizer(Rule):
    code = "OPX206"

    def check(self, ctx: Context) -> None:
        found = []
        for pipeline in ctx.facts.pipelines:
            for seq in expanded_sequences(ctx.facts, pipeline):
                for i, step in enumerate(seq):
                    if step.primitive != "add_decayed_weights" or step.origin.kind != "transform" or step.maybe:
                        continue
                    value = step.arg_value("weight_decay")
                    if is_number(value) and value == 0:
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
        arch = arch_ok(ctx, ("transformer",))
        if arch is None:
            return
        seen = set()
        for decay, adaptive, value in found:
            call = decay.origin.call
            if call is None or call in seen:
                continue
            seen.add(call)
            optimizer = adaptive.origin.call
            wd = fmt(value) if is_number(value) else "wd"
            ctx.report(
                call,
                decay=describe(call),
                optimizer=describe(optimizer) if optimizer is not None else adaptive.primitive,
                arch=arch_name(arch.value),
                evidence=arch.cite(),
                suggestion=f"optax.adamw(..., weight_decay={wd})",
                related=[(optimizer, "the adaptive step that normalizes the decay term")] if optimizer is not None else [],
            )
