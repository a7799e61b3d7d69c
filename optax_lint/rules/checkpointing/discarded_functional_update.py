"""OPX504 discarded-functional-update: The result of a functional update
(`apply_gradients`, `replace`, `apply_updates`, `tx.update`, `from_bytes`,
flax's `restore_checkpoint`) is thrown away."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.checkpoints.sites import CheckpointFacts
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.checkpointing.wording import call_text
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.names import lookup
from optax_lint.syntax.walker import Scope

_TRAIN_STATE_FIELDS = frozenset({"params", "opt_state", "step", "tx", "apply_fn", "batch_stats", "dropout_rng"})


class DiscardedFunctionalUpdate(Rule):
    code = "OPX504"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        ckpt = facts.checkpoints
        for record in facts.raw.calls:
            if not record.is_expression_statement or _probing(facts, record):
                continue
            call = record.node
            name = facts.callee(record)
            func = call.func
            target: Optional[cst.BaseExpression] = None
            if name == "optax.apply_updates":
                target = _first_positional(call)
                result = "the new params"
            elif name in ("flax.serialization.from_bytes", "flax.serialization.from_state_dict"):
                target = _first_positional(call) or _keyword(call, "target")
                result = "the restored state"
            elif name == "flax.training.checkpoints.restore_checkpoint":
                target = _positional(call, 1) or _keyword(call, "target")
                result = "the restored state"
            elif isinstance(func, cst.Attribute) and func.attr.value == "apply_gradients":
                if not self._functional_state(ckpt, func.value, record.scope, call):
                    continue
                target = func.value
                result = "the updated state"
            elif isinstance(func, cst.Attribute) and func.attr.value == "replace":
                keywords = [a.keyword.value for a in call.args if a.keyword is not None]
                if not call.args or len(keywords) != len(call.args) or "inplace" in keywords:
                    continue
                if not (set(keywords) & _TRAIN_STATE_FIELDS or ckpt.payload(func.value, record.scope).kind == "train_state"):
                    continue
                target = func.value
                result = "the new state"
            elif isinstance(func, cst.Attribute) and func.attr.value == "update" and len(call.args) >= 2:
                receiver = func.value
                if facts.pipeline_for(receiver, record.scope) is None and not (
                    isinstance(receiver, cst.Attribute) and receiver.attr.value == "tx"
                ):
                    continue
                target = None
                result = "the updates and the new optimizer state"
            else:
                continue
            if _shown(ctx, record):
                continue  # last in its cell: the notebook displays the value (its position is asked only here)
            fix = self._fix(record, target)
            ctx.report(call, call=call_text(call), result=result, fix=fix,
                       fix_title=f"Assign the result: {describe(target)} = ..." if fix is not None and target is not None else None)

    @staticmethod
    def _functional_state(ckpt: CheckpointFacts, receiver: cst.BaseExpression, scope: Scope, call: cst.Call) -> bool:
        """Linen `TrainState.apply_gradients` (and nnx.TrainState's) return a new state;
        nnx objects updated in place must not be flagged."""
        if ckpt.payload(receiver, scope).kind == "train_state":
            return True
        if ckpt.uses_nnx:
            return False
        # Linen's signature is apply_gradients(*, grads, **kwargs).
        return any(a.keyword is not None and a.keyword.value == "grads" for a in call.args)

    @staticmethod
    def _fix(record, target: Optional[cst.BaseExpression]):
        if not isinstance(target, cst.Name):
            return None
        statement = record.statement
        if not isinstance(statement, cst.SimpleStatementLine):
            return None
        expr = next((s for s in statement.body if isinstance(s, cst.Expr) and s.value is record.node), None)
        if expr is None:
            return None
        owner, bindings = lookup(target.value, record.scope)
        if owner is not record.scope or not bindings:
            return None  # rebinding would make a global or closure name local
        if any(b.kind in ("import", "def", "class") for b in bindings):
            return None
        return fixes.assign_discarded(expr, cst.Name(target.value))


def _probing(facts, record) -> bool:
    """A call made for its exception or to show it runs: directly in a `try:` body that
    has handlers, under `with pytest.raises(...)`, or in a test function."""
    scope = record.scope
    while scope is not None:
        if scope.kind == "function" and scope.name.startswith("test"):
            return True
        scope = scope.parent
    parent = facts.raw.parent_stmt.get(record.statement)
    if isinstance(parent, cst.Try) and parent.handlers and any(s is record.statement for s in parent.body.body):
        return True
    if isinstance(parent, cst.With):
        for item in parent.items:
            func = item.item.func if isinstance(item.item, cst.Call) else None
            name = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else "")
            if name in ("raises", "assertRaises", "assertRaisesRegex"):
                return True
    return False


def _first_positional(call: cst.Call) -> Optional[cst.BaseExpression]:
    return _positional(call, 0)


def _positional(call: cst.Call, index: int) -> Optional[cst.BaseExpression]:
    seen = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            if seen == index:
                return arg.value
            seen += 1
    return None


def _keyword(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def _shown(ctx: Context, record) -> bool:
    """A notebook cell's last statement, a bare call: the cell shows its value (as
    `from_state_dict(params, d)` at the end of a serialization demo), unless a `;` ends it."""
    statement = record.statement
    if not ctx.facts.displayed or not isinstance(statement, cst.SimpleStatementLine):
        return False
    last = statement.body[-1]
    if not isinstance(last, cst.Expr) or last.value is not record.node or isinstance(last.semicolon, cst.Semicolon):
        return False
    return ctx.positions.span(statement).end_line in ctx.facts.displayed
