"""OPX505 legacy-checkpoint-api: `flax.training.checkpoints` and orbax's legacy call
forms; use the current orbax API."""

from __future__ import annotations

import libcst as cst

from optax_lint.core.target_versions import predating_target
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.checkpointing.wording import call_text
from optax_lint.syntax import edits as fixes


# The first flax releases whose save_checkpoint / restore_checkpoint raise a
# DeprecationWarning pointing to orbax (read in the published wheels: 0.6.7 warns in
# save_checkpoint, 0.6.8 in restore_checkpoint too; 0.6.2 and older have no orbax at all).
_FLAX_DEPRECATED = {"save": "0.6.7", "restore": "0.6.8"}


class LegacyCheckpointApi(Rule):
    code = "OPX505"

    def check(self, ctx: Context) -> None:
        ckpt = ctx.facts.checkpoints
        for legacy in ckpt.legacy:
            call = legacy.record.node
            fix = None
            if legacy.kind == "flax_checkpoints":
                detail = (
                    f"{legacy.method} is the legacy Flax checkpoint API (flax 0.12.8 only forwards it to orbax's "
                    "deprecated legacy Checkpointer call)"
                )
                instead = "ocp.CheckpointManager(directory).save(step, args=ocp.args.StandardSave(state)) and restore(step, args=ocp.args.StandardRestore(abstract_state))"
                since = _FLAX_DEPRECATED["save" if "save" in legacy.method else "restore"]
                older = predating_target("flax", since, ctx.options.get("target_versions") or {}, ctx.facts.declared_pins)
                if older is not None:
                    detail = f"{legacy.method} is deprecated from flax {since} in favour of orbax; {older}, which predates it"
                    instead += " when you upgrade past it"
            elif legacy.kind == "manager_init":
                detail = "CheckpointManager is built with a Checkpointer, orbax's deprecated legacy constructor"
                instead = "ocp.CheckpointManager(directory, options=...) with save(step, args=ocp.args.StandardSave(...))"
            elif legacy.kind == "checkpointer_args":
                verb = "save" if legacy.method.endswith(".save") else "restore"
                detail = f"{legacy.method} without args= is orbax's deprecated legacy call form"
                instead = f"args=ocp.args.PyTree{'Save' if verb == 'save' else 'Restore'}(...)"
                fix = self._args_fix(legacy, verb)
            else:  # manager_items
                detail = f"{legacy.method} with items instead of args= is orbax's deprecated legacy call form"
                instead = "args=ocp.args.StandardSave(...) / ocp.args.StandardRestore(...)"
            ctx.report(
                legacy.node,
                call=call_text(call),
                detail=detail,
                instead=instead,
                fix=fix,
                fix_title=(
                    f"Pass the tree as args={legacy.obj.module_prefix}.args.PyTree"
                    + ("Save" if legacy.method.endswith(".save") else "Restore") + "(...)"
                ) if fix is not None and legacy.obj is not None else None,
            )

    @staticmethod
    def _args_fix(legacy, verb: str):
        """ckptr.save(path, tree) -> ckptr.save(path, args=ocp.args.PyTreeSave(tree)):
        exactly what orbax builds from the legacy form for a PyTreeCheckpointer."""
        obj = legacy.obj
        if obj is None or obj.kind != "pytree_checkpointer" or obj.module_prefix is None:
            return None
        call = legacy.record.node
        positional = [a for a in call.args if a.keyword is None]
        keywords = [a for a in call.args if a.keyword is not None]
        if any(a.star for a in call.args) or not positional:
            return None
        if verb == "save":
            if len(positional) != 2 or any(a.keyword.value != "force" for a in keywords):
                return None
            inner = [positional[1].value]
            cls = "PyTreeSave"
        else:
            item_kw = [a for a in keywords if a.keyword.value == "item"]
            if len(keywords) != len(item_kw) or len(positional) + len(item_kw) > 2:
                return None
            inner = [positional[1].value] if len(positional) == 2 else [a.value for a in item_kw]
            cls = "PyTreeRestore"
        args_value = cst.parse_expression(f"{obj.module_prefix}.args.{cls}()")
        assert isinstance(args_value, cst.Call)
        args_value = args_value.with_changes(args=[cst.Arg(value=v) for v in inner])
        kept = [positional[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
        new_call = call.with_changes(args=kept)
        new_call = fixes.add_keyword(new_call, "args", args_value)
        for arg in keywords:
            if arg.keyword.value == "force":
                new_call = fixes.add_keyword(new_call, "force", arg.value)
        return fixes.replace(call, new_call)
