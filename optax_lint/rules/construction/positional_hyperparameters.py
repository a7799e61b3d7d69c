"""OPX105 positional-hyperparameters: A positional argument lands in a beta:
`optax.adamw(lr, wd)` sets b1, not weight_decay."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.rules.base import Context, Rule, describe
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.values import value_of

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
    if name == "momentum" and "b1" in params:
        return "b1"  # an alias without a momentum parameter: its momentum is b1, the first-moment decay
    if name in _SYNONYMS:
        return _SYNONYMS[name]
    for suffix, meaning in (("weight_decay", "weight_decay"), ("_wd", "weight_decay"), ("learning_rate", "learning_rate"), ("_lr", "learning_rate")):
        if name.endswith(suffix):
            return meaning
    match = re.fullmatch(r"(?:adam_|opt_)?(b|beta)_?([12])", name)
    return f"b{match.group(2)}" if match else None


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
