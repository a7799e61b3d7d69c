"""OPX501 checkpoint-missing-opt-state: A training checkpoint saves the params but not
the optimizer state."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.checkpoints.continues import trains_after
from optax_lint.facts.checkpoints.files import manager_keeps_best, read_back_for_evaluation, snapshot_series
from optax_lint.facts.checkpoints.payload import Payload
from optax_lint.facts.checkpoints.sites import CheckpointFacts, SaveSite
from optax_lint.facts.checkpoints.vocabulary import OPT_NAMES, SAVE_ARGS, orbax_member
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.checkpointing.wording import call_text
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.names import lookup
from optax_lint.syntax.walker import Scope


def _written(site: SaveSite, ckpt: CheckpointFacts) -> Optional[cst.BaseExpression]:
    """The tree as the user wrote it: the item inside ocp.args.StandardSave(...)."""
    expr = site.payload_expr
    if isinstance(expr, cst.Call) and orbax_member(ckpt.qual(expr.func, site.record.scope)) in SAVE_ARGS:
        positional = [a for a in expr.args if a.keyword is None]
        item = next((a for a in expr.args if a.keyword is not None and a.keyword.value == "item"), None)
        return (item or (positional[0] if positional else None)).value if (item or positional) else expr
    return expr


def _what(payload: Payload, written: Optional[cst.BaseExpression]) -> str:
    if payload.kind == "params":
        return f"`{describe(written)}` alone" if written is not None else "the params alone"
    keys = ", ".join(repr(k) for k in payload.items)
    if payload.composite:
        return f"Composite items {keys} and no optimizer state"
    if isinstance(payload.node, (cst.Tuple, cst.List)):
        return f"`{describe(payload.node)}` with no optimizer state"
    return f"a dict with keys {keys} and no optimizer state"


# Plain serializers, unlike a checkpoint library, say nothing of resuming by themselves
# (called directly, or inside the project's helper: `save_params(path, params)` that pickles).
_SERIALIZERS = frozenset({"pickle", "numpy", "flax_serialization"})


class CheckpointMissingOptState(Rule):
    code = "OPX501"

    def check(self, ctx: Context) -> None:
        ckpt = ctx.facts.checkpoints
        if not ckpt.saves or not ckpt.has_optimizer:
            return
        resumed: Optional[bool] = None  # computed once, only when an export is in question
        for site in ckpt.saves:
            payload = site.payload
            if not payload.has_params() or payload.has_opt_state() is not False:
                continue
            if not ckpt.in_loop(site.record):
                continue  # a one-off export after training is not a resume checkpoint
            if read_back_for_evaluation(ctx.facts, site.record, site.path):
                continue  # a snapshot handed at once to an evaluation, not a resume checkpoint
            if (site.api in _SERIALIZERS or site.wraps in _SERIALIZERS or ckpt.keeps_best(site.record)
                    or manager_keeps_best(site) or snapshot_series(ctx.facts, site)):
                # a plain serializer's file, the best epoch kept as the selected model (by an
                # `if` or by orbax's best_fn), or a numbered series kept whole: an export,
                # unless training continues from something read back
                if resumed is None:
                    resumed = self._resumed(ctx, ckpt)
                if not resumed:
                    continue
            if any(
                other is not site and other.record.scope is site.record.scope and other.payload.has_opt_state()
                for other in ckpt.saves
            ):
                continue  # the optimizer state is written by a save next to this one
            fix, title = self._fix(ckpt, payload)
            ctx.report(
                site.call,
                call=call_text(site.call),
                what=_what(payload, _written(site, ckpt)),
                fix=fix,
                fix_title=title,
            )

    @staticmethod
    def _resumed(ctx: Context, ckpt: CheckpointFacts) -> bool:
        """Training continues from something the file reads back: a resume exists for a
        checkpoint to serve. A read-back for analysis or evaluation after training
        (early stopping's best epoch) is no resume."""
        return any(trains_after(ctx.facts, restore.record) for restore in ckpt.restores)

    @staticmethod
    def _fix(ckpt: CheckpointFacts, payload: Payload):
        node, scope = payload.dict_node, payload.dict_scope
        if payload.kind != "dict" or node is None or scope is None or payload.open or not payload.items:
            return None, None
        keys = [e.key for e in node.elements if isinstance(e, cst.DictElement)]
        if not all(isinstance(k, cst.SimpleString) for k in keys):
            return None, None
        value = _opt_state_in_scope(ckpt, scope) or _opt_state_beside_params(payload)
        if value is None:
            return None, None
        quote = keys[0].quote if keys else "'"  # type: ignore[union-attr]
        key = cst.SimpleString(f"{quote}opt_state{quote}")
        new = fixes.add_dict_element(node, key, value)
        return fixes.replace(node, new), f"Add 'opt_state': {describe(value)} to the saved dict"


def _opt_state_in_scope(ckpt: CheckpointFacts, scope: Scope) -> Optional[cst.BaseExpression]:
    for name in sorted(OPT_NAMES):
        owner, bindings = lookup(name, scope)
        if not bindings or owner is None:
            continue
        if owner is not scope and owner.kind != "module":
            continue  # a closure variable may be stale; keep the fix to plain scoping
        if ckpt.payload(cst.Name(name), scope).kind == "opt_state" or all(b.kind != "import" for b in bindings):
            return cst.Name(name)
    return None


def _opt_state_beside_params(payload: Payload) -> Optional[cst.BaseExpression]:
    """{'params': state.params, ...} -> state.opt_state."""
    for item in payload.items.values():
        node = item.node
        if item.kind == "params" and isinstance(node, cst.Attribute) and node.attr.value == "params" and isinstance(node.value, cst.Name):
            return cst.Attribute(value=cst.Name(node.value.value), attr=cst.Name("opt_state"))
    return None
