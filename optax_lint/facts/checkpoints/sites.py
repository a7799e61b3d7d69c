"""Checkpoints: what a training script saves, what it restores, and how.

Save and restore calls of orbax (`CheckpointManager`, `Checkpointer`,
`PyTreeCheckpointer`, `StandardCheckpointer`, `AsyncCheckpointer`, with
`args.StandardSave`/`PyTreeSave`/`StandardRestore`/`PyTreeRestore`/`Composite`),
`flax.training.checkpoints`, `flax.serialization` (`to_bytes`, `from_bytes`,
`to_state_dict`, `msgpack_restore`), `pickle`/`cloudpickle` and `np.save`/`jnp.save`.

For each save, the pytree written is classified (`Payload`, classify.py); whatever
cannot be followed is `unknown`, and rules stay silent on it. Restores record whether a
target (abstract structure) was given; flow.py follows the restored value.

Built from the walker's records only (no visitors); cached per module with
`ModuleFacts.checkpoints`.
"""

from __future__ import annotations

import functools
import re
from typing import Optional

import libcst as cst

from optax_lint.facts.checkpoints.classify import PayloadClassifier
from optax_lint.facts.checkpoints.files import file_path, read_from, reads_data, written_to
from optax_lint.facts.checkpoints.helpers import helper_restore, helper_save
from optax_lint.facts.checkpoints.records import (
    CheckpointObject,
    LegacyCall,
    RestoreSite,
    SaveSite,
)
from optax_lint.facts.checkpoints.targets import same_target
from optax_lint.facts.checkpoints.vocabulary import (
    FLAX_CHECKPOINTS,
    FLAX_CKPT_RESTORES,
    FLAX_CKPT_SAVES,
    NUMPY_LOADS,
    NUMPY_SAVES,
    OPT_NAMES,
    ORBAX,
    ORBAX_OBJECTS,
    OTHER_ARGS,
    PICKLE_MODULES,
    RESTORE_ARGS,
    SAVE_ARGS,
    orbax_member,
)
from optax_lint.syntax.arguments import call_arg, call_arg_expr
from optax_lint.syntax.names import lookup
from optax_lint.syntax.nodes import is_none, node_text
from optax_lint.syntax.walker import CallRecord, Scope


# Names of project helpers that may write or read a checkpoint (save, restore_state, load_ckpt...).
_HELPER_NAME = re.compile(r"save|restore|load|ckpt|checkpoint|dump", re.IGNORECASE)


class CheckpointFacts(PayloadClassifier):
    def __init__(self, facts) -> None:
        super().__init__(facts)
        self.objects: list[CheckpointObject] = []
        self.saves: list[SaveSite] = []
        self.legacy: list[LegacyCall] = []
        self._object_of_call: dict[cst.Call, CheckpointObject] = {}
        self._collect()

    def same_target(self, a, b) -> bool:
        """Whether two sites write or read the same checkpoint (targets.py)."""
        return same_target(a, b)

    @functools.cached_property
    def uses_nnx(self) -> bool:
        for scope in self.raw.scopes:
            for bindings in scope.bindings.values():
                for b in bindings:
                    if b.kind == "import" and b.qualname and (b.qualname == "flax.nnx" or b.qualname.startswith("flax.nnx.")):
                        return True
        return False

    @functools.cached_property
    def has_optimizer(self) -> bool:
        """The module trains something with an optimizer (so there is state to lose)."""
        facts = self.facts
        if facts.consumers or any(self._steps_an_optimizer(site) for site in facts.update_sites):
            return True
        for record in self.raw.calls:
            func = record.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "init" and facts.pipeline_for(func.value, record.scope):
                return True
            if self.is_train_state_create(record.node, record.scope):
                return True
        return False

    def _steps_an_optimizer(self, site) -> bool:
        """An update site that is an optimizer's: `apply_gradients`, `apply_updates`, or
        `x.update(...)` whose receiver is an optimizer built here, that is handed an
        optimizer state, or in a file that imports optax; an RL agent's `agent.update(traj,
        obs, state)` in a runner that never touches optax is not (its optimizer, and the
        state to lose, live in another module)."""
        if site.kind != "update" or site.pipeline is not None:
            return True
        if any(isinstance(arg.value, cst.Name) and arg.value.value in OPT_NAMES for arg in site.call.args):
            return True
        return any(b.kind == "import" and (b.qualname or "").split(".")[0] == "optax"
                   for bindings in self.raw.module_scope.bindings.values() for b in bindings)

    # -- collection -----------------------------------------------------------
    def _collect(self) -> None:
        facts = self.facts
        for record in self.raw.calls:
            name = facts.callee(record)
            member = orbax_member(name)
            if member in ORBAX_OBJECTS:
                obj = CheckpointObject(ORBAX_OBJECTS[member], record.node, record)
                func = record.node.func
                if isinstance(func, cst.Attribute):
                    prefix = func.value
                    if orbax_member(self.qual(prefix, record.scope)) == "checkpoint" or self.qual(prefix, record.scope) == ORBAX:
                        obj.module_prefix = node_text(prefix)
                if obj.kind == "manager":
                    legacy = call_arg(record.node, 1, "checkpointers", strict=True)
                    if legacy is not None and not is_none(legacy.value):
                        obj.legacy_checkpointers = legacy
                        self.legacy.append(LegacyCall("manager_init", record, record.node, obj, "CheckpointManager"))
                self.objects.append(obj)
                self._object_of_call[record.node] = obj
        for record in self.raw.calls:
            self._classify_call(record)

    def _classify_call(self, record: CallRecord) -> None:
        facts = self.facts
        call = record.node
        scope = record.scope
        name = facts.callee(record)
        if name is not None:
            short = name.rsplit(".", 1)[-1]
            module = name.rsplit(".", 1)[0] if "." in name else ""
            if module == FLAX_CHECKPOINTS and short in FLAX_CKPT_SAVES:
                payload_expr = call_arg_expr(call, 1, "target", strict=True)
                self.saves.append(SaveSite("flax_checkpoints", f"checkpoints.{short}", record, payload_expr,
                                           self.payload(payload_expr, scope), path=call_arg_expr(call, 0, "ckpt_dir", strict=True)))
                self.legacy.append(LegacyCall("flax_checkpoints", record, call, method=f"flax.training.checkpoints.{short}"))
                return
            if module == FLAX_CHECKPOINTS and short in FLAX_CKPT_RESTORES:
                target = call_arg_expr(call, 1, "target", strict=True)
                state = "missing" if target is None or is_none(target) else "given"
                self.restores.append(RestoreSite("flax_checkpoints", f"checkpoints.{short}", record, target, state,
                                                 self.payload(target, scope) if state == "given" else None,
                                                 path=call_arg_expr(call, 0, "ckpt_dir", strict=True)))
                self.legacy.append(LegacyCall("flax_checkpoints", record, call, method=f"flax.training.checkpoints.{short}"))
                return
            if module in PICKLE_MODULES and short in ("dump", "dumps"):
                payload_expr = call_arg_expr(call, 0, "obj", strict=True)
                path = file_path(self.facts, call_arg_expr(call, 1, "file", strict=True), scope, record) if short == "dump" else written_to(self.facts, record)
                self.saves.append(SaveSite("pickle", f"{module}.{short}", record, payload_expr, self.payload(payload_expr, scope), path=path))
                return
            if module in PICKLE_MODULES and short in ("load", "loads"):
                path = file_path(self.facts, call_arg_expr(call, 0, "file", strict=True), scope, record) if short == "load" else read_from(self.facts, call, scope, record)
                if not reads_data(self.facts, record, path):  # a pickled dataset is no restore
                    self.restores.append(RestoreSite("pickle", f"{module}.{short}", record, None, "unknown", path=path))
                return
            if name in NUMPY_SAVES:
                payload_expr = call_arg_expr(call, 1, "arr", strict=True)
                self.saves.append(SaveSite("numpy", name.replace("jax.numpy", "jnp").replace("numpy", "np"), record, payload_expr,
                                           self.payload(payload_expr, scope), path=call_arg_expr(call, 0, "file", strict=True)))
                return
            if name in NUMPY_LOADS:
                path = call_arg_expr(call, 0, "file", strict=True)
                if not reads_data(self.facts, record, path):
                    self.restores.append(RestoreSite("numpy", "np.load", record, None, "unknown", path=path))
                return
            if name == "flax.serialization.to_bytes":
                if record.parent_call is not None and self._is_save_call(record.parent_call, scope):
                    return  # pickle.dump(to_bytes(x)): the outer call is the save
                payload_expr = call_arg_expr(call, 0, "target", strict=True)
                self.saves.append(SaveSite("flax_serialization", "serialization.to_bytes", record, payload_expr,
                                           self.payload(payload_expr, scope), path=written_to(self.facts, record)))
                return
            if name in ("flax.serialization.from_bytes", "flax.serialization.from_state_dict"):
                target = call_arg_expr(call, 0, "target", strict=True)
                self.restores.append(RestoreSite("flax_serialization", f"serialization.{short}", record, target,
                                                 "given" if target is not None and not is_none(target) else "missing",
                                                 self.payload(target, scope),
                                                 path=read_from(self.facts, call, scope, record) if short == "from_bytes" else None))
                return
            if name == "flax.serialization.msgpack_restore":
                self.restores.append(RestoreSite("flax_serialization", "serialization.msgpack_restore", record, None, "missing",
                                                 path=read_from(self.facts, call, scope, record)))
                return
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("save", "restore"):
            before = (len(self.saves), len(self.restores))
            self._orbax_method(record, func)
            if (len(self.saves), len(self.restores)) != before:
                return
        self._project_helper(record)

    def _project_helper(self, record: CallRecord) -> None:
        """`checkpoint.save(ckpt_dir, step, params)` of a project module that wraps a
        checkpoint library (helpers.py): a save or restore of what the caller passes."""
        func = record.node.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if not _HELPER_NAME.search(last):
            return
        saved = helper_save(self.facts, record)
        if saved is not None:
            qual, arg, path, api = saved
            self.saves.append(SaveSite("helper", qual, record, arg, self.payload(arg, record.scope), path=path, wraps=api))
            return
        restored = helper_restore(self.facts, record)
        if restored is not None:
            qual, target, path = restored
            state = "given" if target is not None and not is_none(target) else "missing"
            self.restores.append(RestoreSite("helper", qual, record, target, state,
                                             self.payload(target, record.scope) if state == "given" else None, path=path))

    def _orbax_method(self, record: CallRecord, func: cst.Attribute) -> None:
        call, scope = record.node, record.scope
        obj = self.object_of(func.value, scope)
        args_arg = call_arg(call, None, "args", strict=True)
        if args_arg is None:
            # checkpointer.save(path, ocp.args.Composite(...)): CheckpointArgs passed
            # positionally are the current form too (orbax looks for them in *args).
            args_arg = next(
                (a for a in call.args[1:] if a.keyword is None and not a.star and self._is_orbax_args(a.value, scope)), None
            )
        args_form = args_arg is not None
        if obj is None and not (args_arg is not None and self._is_orbax_args(args_arg.value, scope)):
            return  # not known to be orbax: np.save-like methods of other objects stay out
        kind = obj.kind if obj is not None else "orbax"
        cls = {"manager": "CheckpointManager", "checkpointer": "Checkpointer", "pytree_checkpointer": "PyTreeCheckpointer",
               "standard_checkpointer": "StandardCheckpointer", "async_checkpointer": "AsyncCheckpointer"}.get(kind, "orbax")
        method = f"{cls}.{func.attr.value}"
        is_manager = kind == "manager"
        first = call_arg_expr(call, 0, "step" if is_manager else "directory", strict=True)
        if func.attr.value == "save":
            if args_arg is not None:
                payload = self.payload(args_arg.value, scope)
                payload_expr = args_arg.value
            else:
                payload_expr = call_arg_expr(call, 1, "items" if is_manager else ("state" if kind == "standard_checkpointer" else "item"), strict=True)
                payload = self.payload(payload_expr, scope)
            site = SaveSite("orbax", method, record, payload_expr, payload, func.value, obj,
                            path=None if is_manager else first, args_form=args_form)
            self.saves.append(site)
            if obj is not None and obj.legacy_checkpointers is None and not args_form:
                if kind in ("checkpointer", "pytree_checkpointer", "async_checkpointer") and payload_expr is not None:
                    self.legacy.append(LegacyCall("checkpointer_args", record, call, obj, method))
                elif is_manager and (payload_expr is not None or call_arg(call, None, "save_kwargs", strict=True) is not None):
                    self.legacy.append(LegacyCall("manager_items", record, call, obj, method))
            return
        # restore
        target_expr: Optional[cst.BaseExpression] = None
        target = "missing"
        if args_arg is not None:
            target, target_expr = self._restore_args_target(args_arg.value, scope)
        else:
            if is_manager:
                target_expr = call_arg_expr(call, 1, "items", strict=True)
            elif kind == "standard_checkpointer":
                target_expr = call_arg_expr(call, 1, "target", strict=True)
            else:
                target_expr = call_arg_expr(call, 1, "item", strict=True)
            if target_expr is not None and not is_none(target_expr):
                target = "given"
            elif any(a.star for a in call.args) or call_arg(call, None, "restore_args", strict=True) is not None or call_arg(call, None, "restore_kwargs", strict=True) is not None:
                target = "unknown"
        site = RestoreSite("orbax", method, record, target_expr, target,
                           self.payload(target_expr, scope) if target == "given" else None,
                           func.value, obj, path=None if is_manager else first, args_form=args_form)
        self.restores.append(site)
        if obj is not None and obj.legacy_checkpointers is None and not args_form:
            if kind in ("checkpointer", "pytree_checkpointer", "async_checkpointer"):
                self.legacy.append(LegacyCall("checkpointer_args", record, call, obj, method))
            elif is_manager and (call_arg(call, 1, "items", strict=True) is not None or call_arg(call, None, "restore_kwargs", strict=True) is not None):
                self.legacy.append(LegacyCall("manager_items", record, call, obj, method))

    def _restore_args_target(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> tuple[str, Optional[cst.BaseExpression]]:
        if depth > 4:
            return "unknown", None
        if isinstance(expr, cst.Name):
            _, bindings = lookup(expr.value, scope)
            if len(bindings) == 1 and bindings[0].kind in ("assign", "annassign") and bindings[0].value is not None and not bindings[0].index:
                return self._restore_args_target(bindings[0].value, bindings[0].scope, depth + 1)
            return "unknown", None
        if not isinstance(expr, cst.Call):
            return "unknown", None
        member = orbax_member(self.qual(expr.func, scope))
        if member in RESTORE_ARGS:
            item = call_arg_expr(expr, 0, "item", strict=True)
            if item is None or is_none(item):
                return "missing", None
            return "given", item
        if member == "Composite":
            states = []
            for arg in expr.args:
                if arg.keyword is None:
                    return "unknown", None
                if is_none(arg.value):
                    states.append(("missing", None, arg.keyword.value))
                    continue
                inner_member = orbax_member(self.qual(arg.value.func, scope)) if isinstance(arg.value, cst.Call) else None
                if inner_member in OTHER_ARGS:
                    continue
                state, target = self._restore_args_target(arg.value, scope, depth + 1)
                states.append((state, target, arg.keyword.value))
            if any(s == "missing" for s, _, _ in states):
                return "missing", None
            if states and all(s == "given" for s, _, _ in states):
                return "given", expr
            return "unknown", None
        return "unknown", None

    def _is_orbax_args(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        if isinstance(expr, cst.Call):
            return orbax_member(self.qual(expr.func, scope)) in SAVE_ARGS + RESTORE_ARGS + OTHER_ARGS + ("Composite",)
        if isinstance(expr, cst.Name):
            _, bindings = lookup(expr.value, scope)
            return len(bindings) == 1 and bindings[0].value is not None and self._is_orbax_args(bindings[0].value, bindings[0].scope)
        return False

    def _is_save_call(self, call: cst.Call, scope: Scope) -> bool:
        name = self.qual(call.func, scope)
        return name is not None and name.rsplit(".", 1)[0] in PICKLE_MODULES

    def object_of(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Optional[CheckpointObject]:
        """The orbax checkpointer/manager an expression evaluates to, if known."""
        if depth > 4:
            return None
        if isinstance(expr, cst.Call):
            return self._object_of_call.get(expr)
        if isinstance(expr, cst.Name):
            _, bindings = lookup(expr.value, scope)
            objects = []
            for b in bindings:
                if b.kind in ("assign", "annassign", "with", "walrus") and b.value is not None and not b.index:
                    obj = self.object_of(b.value, b.scope, depth + 1)
                    if obj is None:
                        return None
                    objects.append(obj)
                elif b.kind == "param":
                    annotation = b.node.annotation if isinstance(b.node, cst.Param) else None
                    member = orbax_member(self.qual(annotation.annotation, b.scope)) if annotation is not None else None
                    if member not in ORBAX_OBJECTS:
                        return None
                    objects.append(CheckpointObject(ORBAX_OBJECTS[member], None, None))
                else:
                    return None
            if objects and len({o.kind for o in objects}) == 1:
                return objects[0]
        return None

