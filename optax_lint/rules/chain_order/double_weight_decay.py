"""OPX103 double-weight-decay: Weight decay applied twice: an optimizer that already
decays (adamw, default 1e-4) plus `add_decayed_weights`."""

from __future__ import annotations

from optax_lint.facts.pipelines.sequences import expanded_sequences
from optax_lint.facts.project.evaluate import project_value
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.syntax.values import Unknown

_DECAY_ALIASES_PARAM = "weight_decay"


class DoubleWeightDecay(Rule):
    code = "OPX103"

    def check(self, ctx: Context) -> None:
        for pipeline in ctx.facts.pipelines:
            decoupled = [
                n for n in pipeline.nodes()
                if n.kind == "alias" and n.entry is not None and any(s.step == "add_decayed_weights" for s in n.entry.expansion)
            ]
            explicit = [n for n in pipeline.nodes() if n.kind == "transform" and n.key == "add_decayed_weights"]
            if not decoupled or not explicit:
                continue
            # Pairs on one path only: multi_transform's groups each take one branch, so a
            # decay in one group and adamw's in another decay each parameter once.
            together = {(id(a.origin), id(b.origin)) for seq in expanded_sequences(ctx.facts, pipeline) for a in seq for b in seq}
            reported: set[int] = set()
            for alias in decoupled:
                wd = alias.args.value(_DECAY_ALIASES_PARAM) if alias.args is not None else Unknown("")
                if isinstance(wd, Unknown) and alias.args is not None:
                    # a parameter's default or a config value, read across the project
                    wd = project_value(ctx.facts, alias.args.expr(_DECAY_ALIASES_PARAM), alias.scope)
                if isinstance(wd, Unknown) or wd is None or wd == 0 or isinstance(wd, bool):
                    continue
                for node in explicit:
                    if id(node) in reported or (id(alias), id(node)) not in together:
                        continue
                    extra = node.args.value("weight_decay") if node.args is not None else Unknown("")
                    if isinstance(extra, (int, float)) and not isinstance(extra, bool) and extra == 0:
                        continue
                    ctx.report(
                        node.call,
                        decay=describe(node.call),
                        optimizer=describe(alias.call),
                        weight_decay=_fmt(wd),
                        related=[(alias.call, f"{alias.short} already decays weights by {_fmt(wd)}")],
                    )
                    reported.add(id(node))


def _fmt(value) -> str:
    return repr(value) if not isinstance(value, float) else f"{value:g}"
