"""OPX503 restore-without-target: An orbax restore without a target returns dicts and
lists, and its opt_state is then used as optax state."""

from __future__ import annotations

from optax_lint.facts.checkpoints.flow import Use
from optax_lint.facts.checkpoints.vocabulary import opt_name
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.checkpointing.restore_flow import restore_flow
from optax_lint.rules.checkpointing.wording import call_text


def _crash_use(use: Use) -> bool:
    if use.kind in ("update_state", "opt_state_kw"):
        return use.path == () or opt_name(use.path[-1])
    if use.kind == "apply_gradients":
        return use.path == () or (use.path[-1] != "params" and not opt_name(use.path[-1]))
    return False


class RestoreWithoutTarget(Rule):
    code = "OPX503"

    def check(self, ctx: Context) -> None:
        ckpt = ctx.facts.checkpoints
        for restore in ckpt.restores:
            if restore.target != "missing" or restore.api not in ("orbax", "flax_checkpoints"):
                continue
            flow = restore_flow(ckpt, restore)
            if flow is None:
                continue
            use = next((u for u in flow.uses() if _crash_use(u)), None)
            if use is None:
                continue
            if restore.api == "flax_checkpoints":
                failure = (
                    "the first update fails (flax returns tuples as {'0': ..., '1': ...} dicts, "
                    "which optax rejects with AttributeError or ValueError)"
                )
            else:
                failure = "the first update fails with AttributeError ('dict' object has no attribute 'mu' for Adam)"
            how = {
                "update_state": f"is passed to the optimizer's update as its state, and {failure}",
                "opt_state_kw": f"becomes the TrainState's opt_state, and {failure}",
                "apply_gradients": "is used as a TrainState, which a dict is not: the train step fails with "
                "AttributeError ('dict' object has no attribute ...)",
            }[use.kind]
            ctx.report(
                restore.call,
                restore=call_text(restore.call),
                use=describe(use.node),
                how=how,
                related=[(use.node, "used as optax state here")],
            )
