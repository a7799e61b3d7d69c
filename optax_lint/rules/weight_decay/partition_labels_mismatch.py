"""OPX111 partition-labels-mismatch: `multi_transform` labels or a `masked` mask tree
written as a dict that cannot match the params' structure: FrozenDict or nnx `State`
params, missing or unknown top-level names, labels with no transformation."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.masks.extract import MaskSite, literal_tree
from optax_lint.facts.pipelines.build import Pipeline
from optax_lint.rules.base import Context, Rule
from optax_lint.syntax.values import Unknown, single_binding, value_of

_FREEZE_CALLS = ("flax.core.freeze", "flax.core.frozen_dict.freeze", "flax.core.FrozenDict", "flax.core.frozen_dict.FrozenDict")


class PartitionLabelsMismatch(Rule):
    code = "OPX111"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        for site in facts.mask_sites:
            tree = literal_tree(site.expr, site.scope)
            if tree is None:
                continue
            what = "labels" if site.kind == "labels" else "mask"
            problem = self._problem(facts, site, tree)
            if problem is None:
                continue
            ctx.report(site.expr, what=what, owner=site.owner.short, problem=problem, related=[(tree, f"the {what} tree is built here")] if tree is not site.expr else [])

    def _problem(self, facts, site: MaskSite, tree: cst.CSTNode) -> Optional[str]:
        if any(c.pipeline is site.pipeline and c.kind == "nnx_optimizer" for c in facts.consumers):
            return "nnx.Optimizer passes the params as an nnx.State, and a plain dict never has the same pytree structure (optax raises 'pytree structure error: different types')"
        if self._frozen_params(facts, site.pipeline):
            return "the params are a FrozenDict and this is a plain dict: their pytree structures differ (optax raises 'pytree structure error: different types'); build it with flax.core.freeze or pass a function"
        if isinstance(tree, cst.Dict):
            keys = [value_of(e.key, site.scope) for e in tree.elements if isinstance(e, cst.DictElement)]
            model = facts.model_tree
            if (
                model is not None and model.complete and keys and all(isinstance(k, str) for k in keys)
                and len(keys) == len(tree.elements) and set(keys) != {"params"}
            ):
                top = model.top_level()
                missing, extra = sorted(top - set(keys)), sorted(set(keys) - top)
                if missing or extra:
                    parts = []
                    if missing:
                        parts.append(f"it has no entry for {', '.join(repr(k) for k in missing)}")
                    if extra:
                        parts.append(f"{', '.join(repr(k) for k in extra)} is not a top-level name of the params")
                    return f"the params of {model.root} have top-level names {', '.join(sorted(top))}: " + " and ".join(parts) + " (optax raises a pytree structure error)"
            if site.kind == "labels" and site.owner.labels:
                known = {label for label in site.owner.labels if not isinstance(label, Unknown)}
                if len(known) == len(site.owner.labels):
                    unknown = sorted({v for v in _leaf_strings(tree, site.scope) if v not in known})
                    if unknown:
                        return f"label {unknown[0]!r} has no transformation in the transforms dict (optax raises 'Some parameters have no corresponding transformation')"
        return None

    @staticmethod
    def _frozen_params(facts, pipeline: Pipeline) -> bool:
        for record in facts.raw.calls:
            func = record.node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "init" and record.node.args):
                continue
            if facts.pipeline_for(func.value, record.scope) is not pipeline:
                continue
            if _is_frozen(facts, record.node.args[0].value, record.scope):
                return True
        for consumer in facts.consumers:
            if consumer.pipeline is pipeline and consumer.kind == "train_state":
                params = next((a.value for a in consumer.record.node.args if a.keyword is not None and a.keyword.value == "params"), None)
                if params is not None and _is_frozen(facts, params, consumer.record.scope):
                    return True
        return False


def _is_frozen(facts, expr: cst.BaseExpression, scope, depth: int = 0) -> bool:
    if depth > 6:
        return False
    if isinstance(expr, cst.Call):
        from optax_lint.syntax.names import qualified_name

        return qualified_name(expr.func, scope) in _FREEZE_CALLS
    if isinstance(expr, cst.Name):
        binding, _ = single_binding(expr.value, scope)
        return binding is not None and not binding.index and _is_frozen(facts, binding.value, binding.scope, depth + 1)
    return False


def _leaf_strings(tree: cst.CSTNode, scope) -> list[str]:
    out = []
    if isinstance(tree, cst.Dict):
        for element in tree.elements:
            if isinstance(element, cst.DictElement):
                if isinstance(element.value, cst.Dict):
                    out.extend(_leaf_strings(element.value, scope))
                else:
                    value = value_of(element.value, scope)
                    if isinstance(value, str):
                        out.append(value)
    return out
