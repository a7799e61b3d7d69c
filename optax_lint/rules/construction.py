"""How an optimizer is constructed (docs/protocol.md#optimizer): arguments landing in
the wrong parameter, `masked` mistaken for freezing, a trailing comma making a tuple."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.facts.file_role import in_test_function, is_test_file
from optax_lint.facts.pipelines.build import TxNode
from optax_lint.rules.base import Context, Rule, describe, register
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.values import value_of

# Prefilter (optax_lint/engine/prefilter.py): optimizer construction is optax calls.
TRIGGERS = ("optax",)

# What a variable's name says it holds -> the optax parameter it means.
_SYNONYMS = {
    "wd": "weight_decay", "decay": "weight_decay", "weightdecay": "weight_decay", "weight_decay": "weight_decay",
    "l2": "weight_decay", "l2_reg": "weight_decay", "lambda_wd": "weight_decay",
    "lr": "learning_rate", "learning_rate": "learning_rate", "lr_schedule": "learning_rate", "schedule": "learning_rate",
    "eps": "eps", "epsilon": "eps", "momentum": "momentum", "mask": "mask", "nesterov": "nesterov",
    "beta1": "b1", "beta_1": "b1", "b1": "b1", "adam_b1": "b1", "adam_beta1": "b1",
    "beta2": "b2", "beta_2": "b2", "b2": "b2", "adam_b2": "b2", "adam_beta2": "b2",
}


def _identifier(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
        index = expr.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
            return index.value.raw_value
    return None


def _meaning(identifier: str, params: tuple[str, ...]) -> Optional[str]:
    name = identifier.lower()
    if name in params:
        return name
    if name in _SYNONYMS:
        return _SYNONYMS[name]
    for suffix, meaning in (("weight_decay", "weight_decay"), ("_wd", "weight_decay"), ("learning_rate", "learning_rate"), ("_lr", "learning_rate")):
        if name.endswith(suffix):
            return meaning
    match = re.fullmatch(r"(?:adam_|opt_)?(b|beta)_?([12])", name)
    return f"b{match.group(2)}" if match else None


@register
class PositionalHyperparameters(Rule):
    code = "OPX105"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        for record in facts.raw.calls:
            entry = facts.builder.transform_entry(record.node, record.scope) or facts.builder.inject_inner(record.node, record.scope)
            if entry is None or entry.kind != "alias" or len(entry.params) < 2 or entry.params[1] != "b1":
                continue
            positional = [a for a in record.node.args if a.keyword is None and not a.star]
            if len(positional) < 2 or any(a.star for a in record.node.args):
                continue
            for index, arg in enumerate(positional[1:], start=1):
                if index >= len(entry.params):
                    break
                receiver = entry.params[index]
                self._check_arg(ctx, record.node, entry, positional, index, arg, receiver)

    def _check_arg(self, ctx, call, entry, positional, index, arg, receiver) -> None:
        identifier = _identifier(arg.value)
        meaning = _meaning(identifier, entry.params) if identifier else None
        if meaning is not None:
            if meaning == receiver:
                return
            fix = None
            if index == len(positional) - 1 and meaning in entry.params and not any(
                a.keyword is not None and a.keyword.value == meaning for a in call.args
            ):
                keyworded = arg.with_changes(keyword=cst.Name(meaning), equal=fixes.keyword_arg(meaning, arg.value).equal)
                fix = fixes.replace(call, call.deep_replace(arg, keyworded))
            ctx.report(
                arg.value,
                value=describe(arg.value),
                receiver=receiver,
                alias=entry.short,
                meant=f"; its name says it is {meaning}" if meaning else "",
                fix=fix,
                fix_title=f"Pass it as {meaning}=...",
            )
            return
        value = value_of(arg.value, ctx.facts.raw.module_scope) if isinstance(arg.value, (cst.Float, cst.Integer)) else None
        if receiver in ("b1", "b2") and isinstance(value, (int, float)) and not isinstance(value, bool) and not (0.5 <= value < 1):
            ctx.report(
                arg.value,
                value=describe(arg.value),
                receiver=receiver,
                alias=entry.short,
                meant=f"; {receiver} is a moment decay rate, normally between 0.9 and 0.999",
            )


def _contains_lr_step(node: TxNode) -> bool:
    from optax_lint.facts.pipelines.build import expand

    return any(step.primitive == "scale_by_learning_rate" or (step.primitive == "scale" and step.negates()) for seq in expand(node) for step in seq)


_COMPLEMENT_HANDLERS = {"masked", "set_to_zero", "multi_transform", "partition", "transforms.freeze", "freeze", "transforms.selective_transform", "selective_transform"}


@register
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


@register
class OptimizerIsTuple(Rule):
    code = "OPX107"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        for record in facts.raw.calls:
            parent = record.parent_call
            if parent is not None and parent.func is record.node:
                continue
            if not facts.builder.is_transform_call(record.node, record.scope):
                continue
            holder = self._tuple_holder(record)
            if holder is None:
                continue
            statement, tuple_node = holder
            ctx.report(
                tuple_node,
                optimizer=describe(record.node),
                fix=fixes.replace(tuple_node, tuple_node.elements[0].value),
            )

    @staticmethod
    def _tuple_holder(record) -> Optional[tuple[cst.CSTNode, cst.Tuple]]:
        statement = record.statement
        if not isinstance(statement, cst.SimpleStatementLine):
            return None
        for small in statement.body:
            value = small.value if isinstance(small, (cst.Assign, cst.Return)) else None
            if (
                isinstance(value, cst.Tuple)
                and not value.lpar
                and len(value.elements) == 1
                and value.elements[0].value is record.node
            ):
                return statement, value
        return None
