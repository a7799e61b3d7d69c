"""OPX106 masked-used-to-freeze: `optax.masked(optimizer, mask)` as the whole optimizer:
unmasked leaves get the raw gradient, they are not frozen."""

from __future__ import annotations

from optax_lint.facts.file_role import in_test_function, is_test_file
from optax_lint.facts.pipelines.build import TxNode
from optax_lint.rules.base import Context, Rule, describe


def _contains_lr_step(node: TxNode) -> bool:
    from optax_lint.facts.pipelines.build import expand

    return any(step.primitive == "scale_by_learning_rate" or (step.primitive == "scale" and step.negates()) for seq in expand(node) for step in seq)


_COMPLEMENT_HANDLERS = {"masked", "set_to_zero", "multi_transform", "partition", "transforms.freeze", "freeze", "transforms.selective_transform", "selective_transform"}


class MaskedUsedToFreeze(Rule):
    code = "OPX106"

    def check(self, ctx: Context) -> None:
        test_file = is_test_file(ctx.facts.path)
        for pipeline in ctx.facts.pipelines:
            if test_file or in_test_function(pipeline.record.scope):
                continue  # tests of masked assert the pass-through on purpose
            top = _unwrap(pipeline.root)
            elements = top.children if top.short in ("chain", "named_chain") else [top]
            masked = [e for e in elements if e.short == "masked" and e.children and _contains_lr_step(e.children[0])]
            if not masked:
                continue
            others = [e for e in elements if e not in masked]
            if any(e.kind == "unknown" or e.short in _COMPLEMENT_HANDLERS or _contains_lr_step(e) for e in others):
                continue
            if len(masked) > 1:
                continue  # several masked optimizers: each may cover the other's complement
            node = masked[0]
            ctx.report(
                node.call,
                masked=describe(node.call),
                inner=describe(node.children[0].call) if node.children[0].call is not None else "the inner optimizer",
            )


def _unwrap(node: TxNode) -> TxNode:
    """Look through wrappers that do not change which leaves get updated."""
    while node.short in ("MultiSteps", "apply_if_finite", "inject_hyperparams", "flatten") and len(node.children) == 1:
        node = node.children[0]
    return node
