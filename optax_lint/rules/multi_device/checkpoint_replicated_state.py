"""OPX406 checkpoint-replicated-state: Replicated state (one copy per device) is saved
without unreplicate."""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.parallel.readers import unreplicating_readers
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.multi_device.local_names import import_name
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.nodes import node_text

# What writing one copy per device costs, by the library that writes it.
_REPLICATED_SAVE = {
    "orbax": "orbax stores one copy per device, and restoring on another device count fails with 'Topology mismatch'",
    "other": "the file holds one copy per device (a leading device axis on every leaf), "
    "and restoring it on another device count, or on one host, gives arrays of the wrong shape",
}


class CheckpointReplicatedState(Rule):
    code = "OPX406"

    def check(self, ctx: Context) -> None:
        pf = ctx.facts.parallel
        unreplicate = import_name(ctx, "flax.jax_utils")
        for save in pf.replicated_saves:
            if unreplicating_readers(ctx.facts, save) is not None:
                continue  # every script that reads it back restores it as saved and unreplicates: the project's format
            fix = None
            value = save.value
            if unreplicate is not None and not isinstance(save.saved, (cst.Dict, cst.Tuple, cst.List)):
                fix = fixes.replace(save.saved, fixes.wrapped_in_call(save.saved, f"{unreplicate}.unreplicate"))
            ctx.report(
                save.saved,
                saved=node_text(save.saved),
                save=describe(save.call),
                origin=("from " if value.how == "replicate" else "output of ") + describe(value.node),
                consequence=_REPLICATED_SAVE.get(save.how, _REPLICATED_SAVE["other"]),
                fix=fix,
                related=[(value.node, "replicated here")],
            )
