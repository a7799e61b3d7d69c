"""OPX110 ndim-mask-with-scanned-layers: A rank-based weight-decay mask (`x.ndim > 1`) in
a model whose layers are stacked by `nn.scan` or nnx `scan`/`vmap`: the stacked norm
scales and biases are decayed."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.masks import expr as mx
from optax_lint.facts.masks.model_sources import project_stacks
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.weight_decay.snippets import snippet


class NdimMaskWithScannedLayers(Rule):
    code = "OPX110"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sites = [s for s in facts.mask_sites if s.role() in ("decay", "no_decay")]
        if not sites:
            return
        stacks: Optional[list] = None
        for site in sites:
            fn = site.function(facts)
            if fn is None or fn.uses_path or not fn.uses_leaf:
                continue
            kind = site.role()
            try:
                flat = fn.value(("LayerNorm_0", "scale"), (8,))
                stacked = fn.value(("ScanBlock_0", "LayerNorm_0", "scale"), (4, 8))
            except mx.EvalError:
                continue
            if not isinstance(flat, bool) or flat == stacked:
                continue  # the mask does not tell a vector from a stacked vector
            decayed_when_stacked = stacked if kind == "decay" else not stacked
            if not decayed_when_stacked:
                continue
            if stacks is None:
                stacks = project_stacks(facts)
            if not stacks:
                return
            site_facts, stack = stacks[0]
            if site_facts is facts:
                how, related = stack.how, [(stack.node, "layers are stacked here")]
            else:
                how, related = f"{stack.how} in {_where(facts, site_facts, stack.node)}", []
            ctx.report(site.expr, mask=snippet(site.expr), how=how, related=related)


def _where(facts, module_facts, node: cst.CSTNode) -> str:
    import os

    from optax_lint.facts.project.found import line_of

    here = os.path.dirname(os.path.abspath(facts.path))
    return f"{os.path.relpath(os.path.abspath(module_facts.path), here)}:{line_of(module_facts, node)}"
