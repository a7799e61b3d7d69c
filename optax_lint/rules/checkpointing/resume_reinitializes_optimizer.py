"""OPX502 resume-reinitializes-optimizer: A resume path restores only the params and
builds a fresh optimizer state."""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.checkpoints.continues import trains_after
from optax_lint.facts.checkpoints.flow import Flow, holds_opt_state
from optax_lint.facts.checkpoints.sites import CheckpointFacts
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.checkpointing.restore_flow import restore_flow
from optax_lint.rules.checkpointing.wording import call_text
from optax_lint.syntax.nodes import other_branch

_PARAMS_PATH_END = ("params", "model_params", "weights", "variables")


class ResumeReinitializesOptimizer(Rule):
    code = "OPX502"

    def check(self, ctx: Context) -> None:
        ckpt = ctx.facts.checkpoints
        for restore in ckpt.restores:
            saves = [s for s in ckpt.saves if ckpt.same_target(s, restore)]
            if not saves:
                continue  # not a resume: e.g. fine-tuning from a pretrained checkpoint
            flow = restore_flow(ckpt, restore)
            if flow is None:
                continue
            uses = flow.uses()
            if any(holds_opt_state(u.path) or u.kind == "apply_gradients" for u in uses):
                continue  # the optimizer state is restored (or the whole state is used)
            fresh = self._reinit(ctx, ckpt, flow, restore)
            if fresh is None:
                continue
            record, params_expr = fresh
            call = record.node
            if self._escapes(flow, params_expr):
                continue
            if not trains_after(ctx.facts, record):
                continue  # the rebuilt state is evaluated or exported, never trained: no resume
            replaced = isinstance(call.func, cst.Attribute) and call.func.attr.value == "replace"
            ctx.report(
                call,
                fresh=call_text(call),
                how=(
                    f"puts the params restored by {call_text(restore.call)} into a freshly initialized state"
                    if replaced
                    else f"builds a fresh optimizer state from the params restored by {call_text(restore.call)}"
                ),
                related=[(restore.call, "params restored here"), (saves[0].call, "checkpoint saved here")],
            )

    @staticmethod
    def _reinit(ctx: Context, ckpt: CheckpointFacts, flow: Flow, restore):
        order = ctx.facts.call_order
        for record in flow.calls():
            if record.scope is restore.record.scope and order.get(record.node, 0) < order.get(restore.call, 0):
                continue  # the first init, before the restore, of a name the restore rebinds
            call = record.node
            func = call.func
            params_expr = None
            if ckpt.is_train_state_create(call, record.scope):
                arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == "params"), None)
                params_expr = arg.value if arg is not None else None
            elif (
                isinstance(func, cst.Attribute)
                and func.attr.value == "replace"
                and not any(a.keyword is not None and a.keyword.value in ("opt_state", "step") for a in call.args)
                and ckpt.payload(func.value, record.scope).kind == "train_state"
            ):
                # state.replace(params=restored["params"]) on a freshly created state.
                arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == "params"), None)
                params_expr = arg.value if arg is not None else None
            elif isinstance(func, cst.Attribute) and func.attr.value == "init" and call.args and call.args[0].keyword is None:
                receiver = func.value
                is_tx = ctx.facts.pipeline_for(receiver, record.scope) is not None or (
                    isinstance(receiver, cst.Attribute) and receiver.attr.value == "tx"
                )
                if is_tx:
                    params_expr = call.args[0].value
            if params_expr is None:
                continue
            path = flow.path_of(params_expr)
            if path is None:
                continue
            if path == () or path[-1] in _PARAMS_PATH_END:
                if record.scope is restore.record.scope and other_branch(record.scope.node, restore.record.statement, record.statement):
                    continue  # `if ckpt: restore ... else: init`: the init never sees the restored params
                return record, params_expr
        return None

    @staticmethod
    def _escapes(flow: Flow, params_expr: cst.BaseExpression) -> bool:
        """The whole restored value goes somewhere we cannot follow (it may carry the
        optimizer state there): stay silent."""
        for record in flow.calls():
            for arg in record.node.args:
                if arg.value is params_expr:
                    continue
                path = flow.path_of(arg.value)
                if path == () or (arg.star and path is not None):
                    return True
        for ret in flow.scope.returns:
            if ret.node.value is not None and flow.path_of(ret.node.value) == ():
                return True
        return False
