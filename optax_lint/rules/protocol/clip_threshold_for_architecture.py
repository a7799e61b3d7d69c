"""OPX202 clip-threshold-for-architecture: A global-norm clip threshold far from the
typical value for the architecture (1.0 Transformer, 5.0 CNN)."""

from __future__ import annotations

from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.protocol.architecture import arch_name, arch_ok
from optax_lint.rules.protocol.numbers import fmt, is_number


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
                    if is_number(value) and value >= 0 and any(not (t / factor <= value <= t * factor) for t in typical_values):
                        clips.append((node, value))
        if not clips:
            return
        arch = arch_ok(ctx, ("transformer", "cnn"))
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
                how = f"{fmt(value / typical)}x"
                how = f"{how} above"
            elif value < typical / factor:
                how = f"{fmt(typical / value)}x below"
            else:
                continue
            ctx.report(
                node.call,
                clip=describe(node.call),
                how=how,
                typical=repr(typical),
                arch=arch_name(arch.value),
                evidence=arch.cite(),
            )
