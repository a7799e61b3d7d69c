"""Checkpointing (docs/protocol.md#checkpointing): save the optimizer state with the params, restore
it with a target, resume without re-initializing it, keep functional updates, and use
the current orbax API. Judged on `extract.checkpoints` facts."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.checkpoints.sites import (
    OPT_NAMES,
    SAVE_ARGS,
    CheckpointFacts,
    Flow,
    Payload,
    RestoreSite,
    SaveSite,
    Use,
    checkpoint_facts,
    orbax_member,
)
from optax_lint.rules.base import Context, Rule, describe, register
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.names import lookup
from optax_lint.syntax.walker import Scope

# Prefilter (optax_lint/engine/prefilter.py): optimizer state (optax, a TrainState, a `tx` or
# `opt_state`, an `x.update(...)` site), saves and restores (orbax, flax checkpoints and
# serialization, pickle), and `state.replace(field=...)`.
TRIGGERS = (
    "optax", "orbax", r"\bcheckpoints\b", "pickle", "dill", "serialization", "apply_gradients", "TrainState",
    "Optimizer", "opt_state", r"\btx\b", r"\.update\(", r"\.replace\(\s*\w+\s*=",
)

_PARAMS_PATH_END = ("params", "model_params", "weights", "variables")


def _call(call: cst.Call, limit: int = 64) -> str:
    """`mngr.save(step, args=...)`: a call with its receiver, shortened for messages."""
    func = " ".join(cst.Module([]).code_for_node(call.func).split())
    text = describe(call, limit=10_000)
    args = text[text.index("(") :] if "(" in text else "()"
    full = f"{func}{args}"
    return full if len(full) <= limit and "\n" not in full else f"{func}(...)"


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


@register
class CheckpointMissingOptState(Rule):
    code = "OPX501"

    def check(self, ctx: Context) -> None:
        ckpt = checkpoint_facts(ctx.facts)
        if not ckpt.saves or not ckpt.has_optimizer:
            return
        for site in ckpt.saves:
            payload = site.payload
            if not payload.has_params() or payload.has_opt_state() is not False:
                continue
            if not ckpt.in_loop(site.record):
                continue  # a one-off export after training is not a resume checkpoint
            if any(
                other is not site and other.record.scope is site.record.scope and other.payload.has_opt_state()
                for other in ckpt.saves
            ):
                continue  # the optimizer state is written by a save next to this one
            fix, title = self._fix(ckpt, payload)
            ctx.report(
                site.call,
                call=_call(site.call),
                what=_what(payload, _written(site, ckpt)),
                fix=fix,
                fix_title=title,
            )

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


# ---------------------------------------------------------------------------


def _restore_flow(ckpt: CheckpointFacts, restore: RestoreSite) -> Optional[Flow]:
    name = restore.result
    if name is None:
        return None
    return Flow(ckpt, restore.record.scope, {name: ()})


@register
class ResumeReinitializesOptimizer(Rule):
    code = "OPX502"

    def check(self, ctx: Context) -> None:
        ckpt = checkpoint_facts(ctx.facts)
        for restore in ckpt.restores:
            saves = [s for s in ckpt.saves if ckpt.same_target(s, restore)]
            if not saves:
                continue  # not a resume: e.g. fine-tuning from a pretrained checkpoint
            flow = _restore_flow(ckpt, restore)
            if flow is None:
                continue
            uses = flow.uses()
            if any("opt_state" in u.path or u.kind == "apply_gradients" for u in uses):
                continue  # the optimizer state is restored (or the whole state is used)
            fresh = self._reinit(ctx, ckpt, flow)
            if fresh is None:
                continue
            call, params_expr = fresh
            if self._escapes(flow, params_expr):
                continue
            replaced = isinstance(call.func, cst.Attribute) and call.func.attr.value == "replace"
            ctx.report(
                call,
                fresh=_call(call),
                how=(
                    f"puts the params restored by {_call(restore.call)} into a freshly initialized state"
                    if replaced
                    else f"builds a fresh optimizer state from the params restored by {_call(restore.call)}"
                ),
                related=[(restore.call, "params restored here"), (saves[0].call, "checkpoint saved here")],
            )

    @staticmethod
    def _reinit(ctx: Context, ckpt: CheckpointFacts, flow: Flow):
        for record in flow.calls():
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
                return call, params_expr
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


# ---------------------------------------------------------------------------


def _crash_use(use: Use) -> bool:
    if use.kind in ("update_state", "opt_state_kw"):
        return use.path == () or use.path[-1] == "opt_state"
    if use.kind == "apply_gradients":
        return use.path == () or use.path[-1] not in ("params", "opt_state")
    return False


@register
class RestoreWithoutTarget(Rule):
    code = "OPX503"

    def check(self, ctx: Context) -> None:
        ckpt = checkpoint_facts(ctx.facts)
        for restore in ckpt.restores:
            if restore.target != "missing" or restore.api not in ("orbax", "flax_checkpoints"):
                continue
            flow = _restore_flow(ckpt, restore)
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
                restore=_call(restore.call),
                use=describe(use.node),
                how=how,
                related=[(use.node, "used as optax state here")],
            )


# ---------------------------------------------------------------------------

_TRAIN_STATE_FIELDS = frozenset({"params", "opt_state", "step", "tx", "apply_fn", "batch_stats", "dropout_rng"})


@register
class DiscardedFunctionalUpdate(Rule):
    code = "OPX504"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        ckpt = checkpoint_facts(facts)
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
            fix = self._fix(record, target)
            ctx.report(call, call=_call(call), result=result, fix=fix,
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
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            return arg.value
    return None


def _keyword(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


# ---------------------------------------------------------------------------


@register
class LegacyCheckpointApi(Rule):
    code = "OPX505"

    def check(self, ctx: Context) -> None:
        ckpt = checkpoint_facts(ctx.facts)
        for legacy in ckpt.legacy:
            call = legacy.record.node
            fix = None
            if legacy.kind == "flax_checkpoints":
                detail = (
                    f"{legacy.method} is the legacy Flax checkpoint API (flax 0.12.8 only forwards it to orbax's "
                    "deprecated legacy Checkpointer call)"
                )
                instead = "ocp.CheckpointManager(directory).save(step, args=ocp.args.StandardSave(state)) and restore(step, args=ocp.args.StandardRestore(abstract_state))"
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
                call=_call(call),
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
