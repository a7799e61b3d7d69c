"""OPX112 clip-over-frozen-params: `clip_by_global_norm` before a `multi_transform` (or
`freeze`) that zeroes some parameters: the frozen gradients count toward the norm."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.pipelines.build import TxNode, expand
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.values import Unknown

_ZEROING = ("set_to_zero", "transforms.freeze", "freeze")


def _zeroes(node: TxNode) -> bool:
    sequences = expand(node)
    for sequence in sequences:
        if not sequence:
            return False
        for step in sequence:
            if step.primitive in _ZEROING:
                break
            if step.primitive == "scale":
                value = step.arg_value("step_size")
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
                    break
        else:
            return False
    return True


class ClipOverFrozenParams(Rule):
    code = "OPX112"

    def check(self, ctx: Context) -> None:
        for pipeline in ctx.facts.pipelines:
            for chain in pipeline.nodes():
                if chain.short not in ("chain", "named_chain"):
                    continue
                self._check_chain(ctx, chain)

    def _check_chain(self, ctx: Context, chain: TxNode) -> None:
        clip: Optional[TxNode] = None
        for child in chain.children:
            if child.key == "clip_by_global_norm" and child.call is not None and not child.conditional:
                clip = clip or child
                continue
            if clip is None:
                continue
            frozen = self._frozen_label(child)
            if frozen is None:
                continue
            ctx.report(
                clip.call,
                clip=describe(clip.call),
                partition=describe(child.call) if child.call is not None else child.short,
                frozen=frozen,
                fix=_clip_into_branches(chain, clip, child),
                changes_state=True,
                related=[(child.call, "the frozen parameters are zeroed only here, after the clip")],
            )
            return

    @staticmethod
    def _frozen_label(node: TxNode) -> Optional[str]:
        if node.short in ("multi_transform", "partition"):
            for label, child in zip(node.labels, node.children):
                if _zeroes(child) and not isinstance(label, Unknown):
                    return f"label {label!r}"
            return None
        if node.key in ("transforms.freeze", "freeze"):
            return "the frozen leaves"
        if node.short == "selective_transform":
            return "the frozen leaves"
        return None


def _clip_into_branches(chain: TxNode, clip: TxNode, partition: TxNode):
    """chain(clip, multi_transform({"train": opt, "frozen": set_to_zero()}, labels))
    -> chain(multi_transform({"train": chain(clip, opt), "frozen": set_to_zero()}, labels)):
    every branch that trains gets the clip, over its own leaves only."""
    if partition.short not in ("multi_transform", "partition") or partition.args is None or partition.args.has_star:
        return None
    slot = clip.slot
    if not isinstance(slot, cst.Arg) or slot.star or clip.slot_owner is not chain.call or chain.call is None:
        return None
    transforms = partition.args.expr("transforms")
    elements = transforms.elements if isinstance(transforms, cst.Dict) else ()
    if not elements or any(not isinstance(e, cst.DictElement) for e in elements) or len(elements) != len(partition.children):
        return None
    chain_func = chain.call.func
    if chain.short != "chain":
        return None
    new_elements = []
    for element, child in zip(elements, partition.children):
        if _zeroes(child):
            new_elements.append(element)
            continue
        wrapped = cst.Call(func=chain_func, args=[cst.Arg(clip.call, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(element.value)])
        new_elements.append(element.with_changes(value=wrapped))
    new_dict = transforms.with_changes(elements=new_elements)
    new_chain = fixes.remove_arg(chain.call, slot).deep_replace(transforms, new_dict)
    return fixes.replace(chain.call, new_chain)
