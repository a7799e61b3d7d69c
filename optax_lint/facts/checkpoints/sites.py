"""Checkpoints: what a training script saves, what it restores, and how.

Save and restore calls of orbax (`CheckpointManager`, `Checkpointer`,
`PyTreeCheckpointer`, `StandardCheckpointer`, `AsyncCheckpointer`, with
`args.StandardSave`/`PyTreeSave`/`StandardRestore`/`PyTreeRestore`/`Composite`),
`flax.training.checkpoints`, `flax.serialization` (`to_bytes`, `from_bytes`,
`to_state_dict`, `msgpack_restore`), `pickle`/`cloudpickle` and `np.save`/`jnp.save`.

For each save, the pytree written is classified (`Payload`): a dict literal and its
keys, a `TrainState`, the optimizer state, or a bare params tree. Whatever cannot be
followed is `unknown`, and rules stay silent on it. Restores record whether a target
(abstract structure) was given, and a small data-flow helper (`Flow`) follows the
restored value through names, `['key']`/`.attr` selections and replication wrappers,
into one level of locally defined step functions.

Built from the walker's records only (no visitors); cached per module with
`facts.memo("checkpoints", ...)`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Iterator, Optional

import libcst as cst

from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import value_of
from optax_lint.syntax.walker import Binding, CallRecord, Scope, iter_children

ORBAX = "orbax.checkpoint"

# orbax classes that save or restore, by the last component of their qualified name.
ORBAX_OBJECTS = {
    "CheckpointManager": "manager",
    "Checkpointer": "checkpointer",
    "PyTreeCheckpointer": "pytree_checkpointer",
    "StandardCheckpointer": "standard_checkpointer",
    "AsyncCheckpointer": "async_checkpointer",
}
SAVE_ARGS = ("StandardSave", "PyTreeSave")
RESTORE_ARGS = ("StandardRestore", "PyTreeRestore")
# Checkpoint args that carry no training state (metadata, RNG keys, single arrays).
OTHER_ARGS = (
    "JsonSave", "JsonRestore", "ArraySave", "ArrayRestore", "ProtoSave", "ProtoRestore",
    "JaxRandomKeySave", "JaxRandomKeyRestore", "NumpyRandomKeySave", "NumpyRandomKeyRestore",
)
FLAX_CHECKPOINTS = "flax.training.checkpoints"
FLAX_CKPT_SAVES = ("save_checkpoint", "save_checkpoint_multiprocess")
FLAX_CKPT_RESTORES = ("restore_checkpoint",)
PICKLE_MODULES = ("pickle", "cloudpickle", "dill", "_pickle")
NUMPY_SAVES = ("numpy.save", "numpy.savez", "numpy.savez_compressed", "jax.numpy.save", "jax.numpy.savez")
NUMPY_LOADS = ("numpy.load", "jax.numpy.load")

# Calls that hand back (a copy of) their argument's tree: the payload is the argument's.
TRANSPARENT = frozenset(
    {
        "flax.jax_utils.unreplicate", "flax.jax_utils.replicate", "jax.device_get", "jax.device_put",
        "flax.serialization.to_state_dict", "flax.serialization.to_bytes",
        "flax.core.freeze", "flax.core.unfreeze", "flax.core.frozen_dict.freeze", "flax.core.frozen_dict.unfreeze",
        "flax.core.FrozenDict", "jax.experimental.multihost_utils.process_allgather", "jax.block_until_ready",
        "copy.deepcopy", "copy.copy",
    }
)
TREE_MAPS = frozenset({"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map"})
# Wrappers around a step function: calling the result calls the function.
FUNCTION_WRAPPERS = frozenset(
    {
        "jax.jit", "jax.pmap", "jax.vmap", "functools.partial", "jax.checkpoint", "jax.remat",
        "flax.nnx.jit", "jax.named_call", "equinox.filter_jit", "jax.shard_map",
        "jax.experimental.shard_map.shard_map",
    }
)
LINEN_TRAIN_STATE = "flax.training.train_state.TrainState"
NNX_TRAIN_STATE = "flax.nnx.TrainState"

PARAMS_NAMES = frozenset({"params", "model_params", "net_params", "network_params", "trainable_params", "weights", "variables"})
OPT_NAMES = frozenset({"opt_state", "optimizer_state", "opt_states", "optim_state", "tx_state", "optstate"})
# Dict keys / composite item names that say what an entry holds.
PARAMS_KEYS = frozenset({"params", "model", "weights", "model_params", "variables", "net", "network"})
# Keys whose entry holds no optimizer state, whatever its value.
NON_OPT_KEYS = frozenset(
    {
        "step", "steps", "global_step", "epoch", "epochs", "iteration", "rng", "rngs", "key", "prng_key", "seed",
        "config", "cfg", "hparams", "hyperparams", "args", "metadata", "meta", "metrics", "loss", "losses",
        "batch_stats", "lr", "learning_rate", "data", "dataset", "dataset_state", "data_iterator", "model_config",
        "params", "model", "weights", "model_params", "variables", "ema", "ema_params", "best_params",
        "accuracy", "acc", "best_acc", "best_loss", "best_metric", "timestamp", "time", "version",
    }
)


def orbax_member(qualname: Optional[str]) -> Optional[str]:
    """'orbax.checkpoint.args.StandardSave' -> 'StandardSave'; None outside orbax."""
    if qualname is None or not (qualname == ORBAX or qualname.startswith(ORBAX + ".")):
        return None
    return qualname.rsplit(".", 1)[-1]


def _opt_key(key: str) -> bool:
    k = key.lower()
    return "opt" in k or "state" in k or "tx" == k


def _params_key(key: str) -> bool:
    k = key.lower()
    return k in PARAMS_KEYS or k.endswith("_params")


def _params_name(name: str) -> bool:
    return name in PARAMS_NAMES or (name.endswith("_params") and name != "hparams")


def _opt_name(name: str) -> bool:
    return name in OPT_NAMES or name.endswith("opt_state")


def source(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


# ---------------------------------------------------------------------------
# Payloads


@dataclass(eq=False)
class Payload:
    """What a save writes (or a restore target describes)."""

    kind: str  # train_state | opt_state | params | dict | other | none | unknown
    node: Optional[cst.BaseExpression]
    items: dict[str, "Payload"] = field(default_factory=dict)  # dict / Composite / tuple entries
    open: bool = False  # dict with ** entries or non-literal keys: more may be inside
    composite: bool = False  # ocp.args.Composite(...)
    dict_node: Optional[cst.Dict] = None  # the dict literal, when written as one
    dict_scope: Optional[Scope] = None
    reason: str = ""

    def has_opt_state(self) -> Optional[bool]:
        """True/False when known, None when the tree may or may not hold it."""
        if self.kind in ("train_state", "opt_state"):
            return True
        if self.kind in ("params", "other", "none"):
            return False
        if self.kind != "dict":
            return None
        if self.open:
            return None
        unknown = False
        for key, item in self.items.items():
            if _opt_key(key):
                return True
            if _params_key(key) and item.kind in ("params", "dict", "unknown"):
                continue  # the entry under 'params' is the parameter tree
            inner = item.has_opt_state()
            if inner:
                return True
            if inner is None and (key.isdigit() or key.lower() not in NON_OPT_KEYS):
                unknown = True
        return None if unknown else False

    def has_params(self) -> bool:
        if self.kind in ("params", "train_state"):
            return True
        if self.kind == "dict":
            return any(item.has_params() or (_params_key(key) and item.kind in ("params", "dict", "unknown")) for key, item in self.items.items())
        return False

    def keys(self) -> list[str]:
        return list(self.items)


UNKNOWN = Payload("unknown", None)


# ---------------------------------------------------------------------------
# Sites


@dataclass(eq=False)
class CheckpointObject:
    """An orbax checkpointer or manager, as constructed."""

    kind: str  # manager | checkpointer | pytree_checkpointer | standard_checkpointer | async_checkpointer
    call: Optional[cst.Call]  # None when known only from a type annotation
    record: Optional[CallRecord]
    legacy_checkpointers: Optional[cst.Arg] = None  # CheckpointManager(dir, PyTreeCheckpointer())
    module_prefix: Optional[str] = None  # how the orbax module is spelled ('ocp'), for fixes


@dataclass(eq=False)
class SaveSite:
    api: str  # orbax | flax_checkpoints | flax_serialization | pickle | numpy
    method: str  # human-readable callee: "CheckpointManager.save", "pickle.dump", ...
    record: CallRecord
    payload_expr: Optional[cst.BaseExpression]
    payload: Payload
    receiver: Optional[cst.BaseExpression] = None
    obj: Optional[CheckpointObject] = None
    path: Optional[cst.BaseExpression] = None
    args_form: bool = False  # orbax args=... given
    periodic: bool = False  # inside a loop, or in a function called from a loop

    @property
    def call(self) -> cst.Call:
        return self.record.node


@dataclass(eq=False)
class RestoreSite:
    api: str
    method: str
    record: CallRecord
    target_expr: Optional[cst.BaseExpression]
    target: str  # given | missing | unknown
    target_payload: Optional[Payload] = None
    receiver: Optional[cst.BaseExpression] = None
    obj: Optional[CheckpointObject] = None
    path: Optional[cst.BaseExpression] = None
    args_form: bool = False

    @property
    def call(self) -> cst.Call:
        return self.record.node

    @property
    def result(self) -> Optional[str]:
        target = self.record.assigned_to
        return target.value if isinstance(target, cst.Name) else None


@dataclass(eq=False)
class LegacyCall:
    """A checkpoint call in a form the installed flax/orbax consider legacy (OPX505)."""

    kind: str  # flax_checkpoints | manager_init | checkpointer_args | manager_items
    record: CallRecord
    node: cst.CSTNode
    obj: Optional[CheckpointObject] = None
    method: str = ""


def _arg(call: cst.Call, position: Optional[int], keyword: Optional[str]) -> Optional[cst.Arg]:
    if keyword is not None:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return arg
    if position is None:
        return None
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if any(a.star for a in call.args[: len(positional)]):
        return None
    return positional[position] if position < len(positional) else None


def _value(call: cst.Call, position: Optional[int], keyword: Optional[str]) -> Optional[cst.BaseExpression]:
    arg = _arg(call, position, keyword)
    return arg.value if arg is not None else None


def _is_none(expr: Optional[cst.BaseExpression]) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


class CheckpointFacts:
    def __init__(self, facts) -> None:
        self.facts = facts
        self.raw = facts.raw
        self.objects: list[CheckpointObject] = []
        self.saves: list[SaveSite] = []
        self.restores: list[RestoreSite] = []
        self.legacy: list[LegacyCall] = []
        self._object_of_call: dict[cst.Call, CheckpointObject] = {}
        self._callers: Optional[dict[Scope, list[CallRecord]]] = None
        self._periodic: dict[Scope, bool] = {}
        self._collect()

    # -- names ----------------------------------------------------------------
    def qual(self, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
        return self.facts.canonical(expr, scope)

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
        if facts.update_sites or facts.consumers:
            return True
        for record in self.raw.calls:
            func = record.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "init" and facts.pipeline_for(func.value, record.scope):
                return True
            if self.is_train_state_create(record.node, record.scope):
                return True
        return False

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
                        obj.module_prefix = source(prefix)
                if obj.kind == "manager":
                    legacy = _arg(record.node, 1, "checkpointers")
                    if legacy is not None and not _is_none(legacy.value):
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
                payload_expr = _value(call, 1, "target")
                self.saves.append(SaveSite("flax_checkpoints", f"checkpoints.{short}", record, payload_expr,
                                           self.payload(payload_expr, scope), path=_value(call, 0, "ckpt_dir")))
                self.legacy.append(LegacyCall("flax_checkpoints", record, call, method=f"flax.training.checkpoints.{short}"))
                return
            if module == FLAX_CHECKPOINTS and short in FLAX_CKPT_RESTORES:
                target = _value(call, 1, "target")
                state = "missing" if target is None or _is_none(target) else "given"
                self.restores.append(RestoreSite("flax_checkpoints", f"checkpoints.{short}", record, target, state,
                                                 self.payload(target, scope) if state == "given" else None,
                                                 path=_value(call, 0, "ckpt_dir")))
                self.legacy.append(LegacyCall("flax_checkpoints", record, call, method=f"flax.training.checkpoints.{short}"))
                return
            if module in PICKLE_MODULES and short in ("dump", "dumps"):
                payload_expr = _value(call, 0, "obj")
                path = self._file_path(_value(call, 1, "file"), scope, record) if short == "dump" else self._written_to(record)
                self.saves.append(SaveSite("pickle", f"{module}.{short}", record, payload_expr, self.payload(payload_expr, scope), path=path))
                return
            if module in PICKLE_MODULES and short in ("load", "loads"):
                path = self._file_path(_value(call, 0, "file"), scope, record) if short == "load" else self._read_from(call, scope, record)
                self.restores.append(RestoreSite("pickle", f"{module}.{short}", record, None, "unknown", path=path))
                return
            if name in NUMPY_SAVES:
                payload_expr = _value(call, 1, "arr")
                self.saves.append(SaveSite("numpy", name.replace("jax.numpy", "jnp").replace("numpy", "np"), record, payload_expr,
                                           self.payload(payload_expr, scope), path=_value(call, 0, "file")))
                return
            if name in NUMPY_LOADS:
                self.restores.append(RestoreSite("numpy", "np.load", record, None, "unknown", path=_value(call, 0, "file")))
                return
            if name == "flax.serialization.to_bytes":
                if record.parent_call is not None and self._is_save_call(record.parent_call, scope):
                    return  # pickle.dump(to_bytes(x)): the outer call is the save
                payload_expr = _value(call, 0, "target")
                self.saves.append(SaveSite("flax_serialization", "serialization.to_bytes", record, payload_expr,
                                           self.payload(payload_expr, scope), path=self._written_to(record)))
                return
            if name in ("flax.serialization.from_bytes", "flax.serialization.from_state_dict"):
                target = _value(call, 0, "target")
                self.restores.append(RestoreSite("flax_serialization", f"serialization.{short}", record, target,
                                                 "given" if target is not None and not _is_none(target) else "missing",
                                                 self.payload(target, scope),
                                                 path=self._read_from(call, scope, record) if short == "from_bytes" else None))
                return
            if name == "flax.serialization.msgpack_restore":
                self.restores.append(RestoreSite("flax_serialization", "serialization.msgpack_restore", record, None, "missing",
                                                 path=self._read_from(call, scope, record)))
                return
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("save", "restore"):
            self._orbax_method(record, func)

    def _orbax_method(self, record: CallRecord, func: cst.Attribute) -> None:
        call, scope = record.node, record.scope
        obj = self.object_of(func.value, scope)
        args_arg = _arg(call, None, "args")
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
        first = _value(call, 0, "step" if is_manager else "directory")
        if func.attr.value == "save":
            if args_arg is not None:
                payload = self.payload(args_arg.value, scope)
                payload_expr = args_arg.value
            else:
                payload_expr = _value(call, 1, "items" if is_manager else ("state" if kind == "standard_checkpointer" else "item"))
                payload = self.payload(payload_expr, scope)
            site = SaveSite("orbax", method, record, payload_expr, payload, func.value, obj,
                            path=None if is_manager else first, args_form=args_form)
            self.saves.append(site)
            if obj is not None and obj.legacy_checkpointers is None and not args_form:
                if kind in ("checkpointer", "pytree_checkpointer", "async_checkpointer") and payload_expr is not None:
                    self.legacy.append(LegacyCall("checkpointer_args", record, call, obj, method))
                elif is_manager and (payload_expr is not None or _arg(call, None, "save_kwargs") is not None):
                    self.legacy.append(LegacyCall("manager_items", record, call, obj, method))
            return
        # restore
        target_expr: Optional[cst.BaseExpression] = None
        target = "missing"
        if args_arg is not None:
            target, target_expr = self._restore_args_target(args_arg.value, scope)
        else:
            if is_manager:
                target_expr = _value(call, 1, "items")
            elif kind == "standard_checkpointer":
                target_expr = _value(call, 1, "target")
            else:
                target_expr = _value(call, 1, "item")
            if target_expr is not None and not _is_none(target_expr):
                target = "given"
            elif any(a.star for a in call.args) or _arg(call, None, "restore_args") is not None or _arg(call, None, "restore_kwargs") is not None:
                target = "unknown"
        site = RestoreSite("orbax", method, record, target_expr, target,
                           self.payload(target_expr, scope) if target == "given" else None,
                           func.value, obj, path=None if is_manager else first, args_form=args_form)
        self.restores.append(site)
        if obj is not None and obj.legacy_checkpointers is None and not args_form:
            if kind in ("checkpointer", "pytree_checkpointer", "async_checkpointer"):
                self.legacy.append(LegacyCall("checkpointer_args", record, call, obj, method))
            elif is_manager and (_arg(call, 1, "items") is not None or _arg(call, None, "restore_kwargs") is not None):
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
            item = _value(expr, 0, "item")
            if item is None or _is_none(item):
                return "missing", None
            return "given", item
        if member == "Composite":
            states = []
            for arg in expr.args:
                if arg.keyword is None:
                    return "unknown", None
                if _is_none(arg.value):
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

    # -- files ------------------------------------------------------------------
    def _file_path(self, expr: Optional[cst.BaseExpression], scope: Scope, record: CallRecord) -> Optional[cst.BaseExpression]:
        """`f` of `with open(path, 'wb') as f` -> `path` (or the expression itself)."""
        if not isinstance(expr, cst.Name):
            return expr
        # The `with` that encloses this call and binds the name wins over other bindings.
        statement: Optional[cst.CSTNode] = record.statement
        for _ in range(32):
            if statement is None or statement is self.raw.module:
                break
            if isinstance(statement, cst.With):
                for item in statement.items:
                    if item.asname is not None and isinstance(item.asname.name, cst.Name) and item.asname.name.value == expr.value:
                        return self._opened_path(item.item, scope) or expr
            statement = self.raw.parent_stmt.get(statement)
        _, bindings = lookup(expr.value, scope)
        if len(bindings) == 1 and isinstance(bindings[0].value, cst.Call):
            return self._opened_path(bindings[0].value, bindings[0].scope) or expr
        return expr

    def _opened_path(self, opened: cst.BaseExpression, scope: Scope) -> Optional[cst.BaseExpression]:
        if not isinstance(opened, cst.Call):
            return None
        name = self.qual(opened.func, scope)
        if name in ("io.open", "gzip.open", "tensorflow.io.gfile.GFile", "builtins.open") or (
            isinstance(opened.func, cst.Name) and opened.func.value == "open" and not lookup("open", scope)[1]
        ):
            return _value(opened, 0, "file")
        if isinstance(opened.func, cst.Attribute) and opened.func.attr.value == "open":
            return opened.func.value  # pathlib / epath: path.open("wb")
        return None

    def _written_to(self, record: CallRecord) -> Optional[cst.BaseExpression]:
        parent = record.parent_call
        if parent is not None and isinstance(parent.func, cst.Attribute) and parent.func.attr.value in ("write", "write_bytes"):
            if parent.func.attr.value == "write_bytes":
                return parent.func.value
            return self._file_path(parent.func.value, record.scope, record)
        return None

    def _read_from(self, call: cst.Call, scope: Scope, record: CallRecord) -> Optional[cst.BaseExpression]:
        """Where the bytes given to from_bytes/loads come from: `f.read()` -> f's path."""
        for arg in call.args:
            value = arg.value
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("read", "read_bytes"):
                if value.func.attr.value == "read_bytes":
                    return value.func.value
                return self._file_path(value.func.value, scope, record)
        return None

    # -- payloads -----------------------------------------------------------------
    def payload(self, expr: Optional[cst.BaseExpression], scope: Scope) -> Payload:
        if expr is None:
            return Payload("none", None)
        return self._classify(expr, scope, 0, frozenset())

    def _classify(self, expr: cst.BaseExpression, scope: Scope, depth: int, seen: frozenset) -> Payload:
        if depth > 10:
            return Payload("unknown", expr, reason="too deep")
        d = depth + 1
        if isinstance(expr, cst.Dict):
            out = Payload("dict", expr, dict_node=expr, dict_scope=scope)
            for element in expr.elements:
                if not isinstance(element, cst.DictElement):
                    out.open = True
                    continue
                key = value_of(element.key, scope)
                if not isinstance(key, str):
                    out.open = True
                    continue
                out.items[key] = self._classify(element.value, scope, d, seen)
            return out
        if isinstance(expr, (cst.Tuple, cst.List)):
            out = Payload("dict", expr)
            for i, element in enumerate(expr.elements):
                if isinstance(element, cst.StarredElement):
                    out.open = True
                    continue
                out.items[str(i)] = self._classify(element.value, scope, d, seen)
            return out
        if isinstance(expr, cst.Name):
            if expr.value == "None":
                return Payload("none", expr)
            return self._classify_name(expr, scope, d, seen)
        if isinstance(expr, cst.Attribute):
            attr = expr.attr.value
            if attr == "params":
                return Payload("params", expr)
            if attr == "opt_state":
                return Payload("opt_state", expr)
            if attr in ("step", "batch_stats"):
                return Payload("other", expr)
            return Payload("unknown", expr)
        if isinstance(expr, cst.Subscript):
            key = _subscript_key(expr, scope)
            if key is not None and _params_key(key) and key not in ("model", "net", "network"):
                return Payload("params", expr)
            if key is not None and _opt_name(key):
                return Payload("opt_state", expr)
            return Payload("unknown", expr)
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
            return Payload("other", expr)
        if isinstance(expr, cst.Call):
            return self._classify_call_payload(expr, scope, d, seen)
        return Payload("unknown", expr)

    def _classify_call_payload(self, call: cst.Call, scope: Scope, d: int, seen: frozenset) -> Payload:
        name = self.qual(call.func, scope)
        member = orbax_member(name)
        if member in SAVE_ARGS or member in RESTORE_ARGS:
            return self._classify(_value(call, 0, "item") or cst.Name("None"), scope, d, seen)
        if member in OTHER_ARGS:
            return Payload("other", call)
        if member == "Composite":
            out = Payload("dict", call, composite=True)
            for arg in call.args:
                if arg.keyword is None:
                    out.open = True
                    continue
                out.items[arg.keyword.value] = self._classify(arg.value, scope, d, seen)
            return out
        if isinstance(call.func, cst.Name) and call.func.value == "dict" and not lookup("dict", scope)[1]:
            out = Payload("dict", call)
            for arg in call.args:
                if arg.keyword is None:
                    out.open = True
                    continue
                out.items[arg.keyword.value] = self._classify(arg.value, scope, d, seen)
            return out
        if name in TRANSPARENT:
            inner = _value(call, 0, None)
            return self._classify(inner, scope, d, seen) if inner is not None else Payload("unknown", call)
        if name in TREE_MAPS:
            positional = [a for a in call.args if a.keyword is None and not a.star]
            if len(positional) >= 2:
                return self._classify(positional[1].value, scope, d, seen)
            return Payload("unknown", call)
        if name == "optax.apply_updates":
            return Payload("params", call)
        if self.is_train_state_create(call, scope):
            return Payload("train_state", call)
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method == "apply_gradients":
                return Payload("train_state", call)
            if method == "replace":
                inner = self._classify(func.value, scope, d, seen)
                if inner.kind in ("train_state", "cycle"):
                    return Payload(inner.kind, call)  # `state = state.replace(...)` keeps its kind
                return Payload("unknown", call)
            if method == "init" and self.facts.pipeline_for(func.value, scope) is not None:
                return Payload("opt_state", call)
        restore = self._restore_by_call.get(call)
        if restore is not None:
            if restore.target == "given" and restore.target_payload is not None:
                return restore.target_payload
            return Payload("unknown", call, reason="restored without a target")
        fn = self.function_of(call.func, scope)
        if fn is not None and fn[0] not in seen:
            return self._classify_returns(fn[0], d, seen | {fn[0]})
        return Payload("unknown", call)

    @functools.cached_property
    def _restore_by_call(self) -> dict[cst.Call, RestoreSite]:
        return {r.call: r for r in self.restores}

    def _classify_returns(self, fn: Scope, d: int, seen: frozenset, index: Optional[int] = None) -> Payload:
        kinds = []
        for ret in fn.returns:
            value = ret.node.value
            if value is None:
                continue
            if index is not None:
                if isinstance(value, (cst.Tuple, cst.List)) and index < len(value.elements):
                    value = value.elements[index].value
                else:
                    return Payload("unknown", value)
            kinds.append(self._classify(value, fn, d, seen))
        return _combine(kinds)

    def _classify_name(self, expr: cst.Name, scope: Scope, d: int, seen: frozenset) -> Payload:
        name = expr.value
        owner, bindings = lookup(name, scope)
        key = (name, id(owner))
        if key in seen:
            return Payload("cycle", expr)
        seen = seen | {key}
        kinds = []
        for b in bindings:
            kinds.append(self._classify_binding(b, d, seen))
        real = [k for k in kinds if k.kind != "cycle"]
        combined = _combine(real) if real else Payload("unknown", expr)
        if combined.kind in ("unknown", "dict") and _params_name(name):
            return Payload("params", expr)
        if combined.kind == "unknown":
            if _params_name(name):
                return Payload("params", expr)
            if _opt_name(name):
                return Payload("opt_state", expr)
        if combined.kind == "dict" and len(real) != 1:
            return Payload("unknown", expr)
        return combined

    def _classify_binding(self, b: Binding, d: int, seen: frozenset) -> Payload:
        if b.kind == "param":
            param = b.node if isinstance(b.node, cst.Param) else None
            if param is not None and param.annotation is not None:
                text = source(param.annotation.annotation)
                if text.endswith("TrainState") or text.endswith("TrainState]"):
                    return Payload("train_state", param.name)
            return Payload("unknown", None)
        if b.kind in ("assign", "annassign", "with", "walrus") and b.value is not None and not b.index:
            if _threads(b.value, b.name):
                return Payload("cycle", b.value)
            return self._classify(b.value, b.scope, d, seen)
        if b.kind == "unpack" and b.value is not None:
            value = b.value
            if isinstance(value, (cst.Tuple, cst.List)) and len(b.index) == 1 and b.index[0] < len(value.elements):
                return self._classify(value.elements[b.index[0]].value, b.scope, d, seen)
            if isinstance(value, cst.Call):
                if _threads(value, b.name):
                    return Payload("cycle", value)
                fn = self.function_of(value.func, b.scope)
                if fn is not None and len(b.index) == 1 and fn[0] not in seen:
                    return self._classify_returns(fn[0], d, seen | {fn[0]}, index=b.index[0])
            return Payload("unknown", value)
        return Payload("unknown", None)

    def is_train_state_create(self, call: cst.Call, scope: Scope) -> bool:
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "create"):
            return False
        name = self.qual(func.value, scope)
        if name is not None and (name.endswith("TrainState") or name in (LINEN_TRAIN_STATE, NNX_TRAIN_STATE)):
            return True
        if isinstance(func.value, cst.Name):
            _, bindings = lookup(func.value.value, scope)
            for b in bindings:
                if b.kind == "class" and isinstance(b.node, cst.ClassDef):
                    for base in b.node.bases:
                        base_name = self.qual(base.value, b.scope) or source(base.value)
                        if base_name.endswith("TrainState"):
                            return True
            if not bindings and func.value.value.endswith("TrainState"):
                return True
        return False

    # -- functions -----------------------------------------------------------------
    def function_of(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Optional[tuple[Scope, int]]:
        """The locally defined function a callee evaluates to, with how many positional
        arguments a functools.partial already bound: `p_train_step` bound to
        `jax.pmap(functools.partial(train_step, ...))` -> (train_step's scope, 0)."""
        if depth > 6:
            return None
        if isinstance(expr, cst.Name):
            _, bindings = lookup(expr.value, scope)
            if len(bindings) != 1:
                return None
            b = bindings[0]
            if b.kind == "def" and isinstance(b.node, cst.FunctionDef):
                fn = self.raw.functions.get(b.node)
                return (fn, 0) if fn is not None else None
            if b.kind in ("assign", "annassign") and isinstance(b.value, cst.Call) and not b.index:
                return self._wrapped(b.value, b.scope, depth + 1)
            return None
        if isinstance(expr, cst.Call):
            return self._wrapped(expr, scope, depth + 1)
        return None

    def _wrapped(self, call: cst.Call, scope: Scope, depth: int) -> Optional[tuple[Scope, int]]:
        name = self.qual(call.func, scope)
        if name not in FUNCTION_WRAPPERS:
            return None
        positional = [a for a in call.args if a.keyword is None]
        if not positional or positional[0].star:
            return None
        inner = self.function_of(positional[0].value, scope, depth + 1)
        if inner is None:
            return None
        shift = len(positional) - 1 if name == "functools.partial" else 0
        if any(a.star for a in positional):
            return None
        return inner[0], inner[1] + shift

    def _callers_map(self) -> dict[Scope, list[CallRecord]]:
        if self._callers is None:
            callers: dict[Scope, list[CallRecord]] = {}
            names = {s.name for s in self.raw.functions.values()}
            for record in self.raw.calls:
                func = record.node.func
                if isinstance(func, cst.Name) and func.value in names:
                    fn = self.function_of(func, record.scope)
                    if fn is not None:
                        callers.setdefault(fn[0], []).append(record)
            self._callers = callers
        return self._callers

    def in_loop(self, record: CallRecord) -> bool:
        """Inside a for/while loop, directly or through functions called from one."""
        if record.loop_depth > 0:
            return True
        scope = record.scope
        while scope is not None and scope.kind not in ("function", "module"):
            scope = scope.parent
        return scope is not None and scope.kind == "function" and self._scope_called_in_loop(scope, 0)

    def _scope_called_in_loop(self, scope: Scope, depth: int) -> bool:
        if scope in self._periodic:
            return self._periodic[scope]
        self._periodic[scope] = False  # recursion guard
        result = False
        if depth < 4:
            for caller in self._callers_map().get(scope, []):
                if caller.loop_depth > 0:
                    result = True
                    break
                outer = caller.scope
                if outer.kind == "function" and self._scope_called_in_loop(outer, depth + 1):
                    result = True
                    break
        self._periodic[scope] = result
        return result

    # -- matching saves and restores -------------------------------------------------
    def _keys(self, site) -> dict:
        """What identifies where a site writes or reads. Managers: the directory the
        manager was built on (when its construction is known) and the variable holding
        it; path-based saves: the variables their path is built from."""
        keys: dict = {}
        if site.api == "orbax" and (site.obj is None or site.obj.kind == "manager"):
            if site.receiver is not None:
                keys["obj"] = source(site.receiver)
            if site.obj is not None and site.obj.call is not None:
                directory = _value(site.obj.call, 0, "directory")
                if directory is not None:
                    keys["dir"] = frozenset(_anchors(directory))
            return keys
        if site.path is not None:
            keys["path"] = frozenset(_anchors(site.path))
        return keys

    def same_target(self, a, b) -> bool:
        ka, kb = self._keys(a), self._keys(b)
        if "dir" in ka and "dir" in kb:
            return a.obj is b.obj or bool(ka["dir"] & kb["dir"])
        if "obj" in ka and "obj" in kb:
            return ka["obj"] == kb["obj"]
        if "path" in ka and "path" in kb:
            return bool(ka["path"] & kb["path"])
        return False


# Names in a path expression that say nothing about *which* checkpoint it is.
_PATH_NOISE = frozenset(
    {"step", "i", "epoch", "latest", "latest_step", "ckpt_step", "it", "n", "global_step", "start", "start_step",
     "True", "False", "None"}
)


def _anchors(expr: cst.CSTNode, depth: int = 0) -> set[str]:
    """The variables a path is built from: `os.path.join(config.workdir, f"step_{step}")`
    -> {'config.workdir'}. Callees (`os.path.join`) and step counters are left out."""
    if depth > 12:
        return set()
    if isinstance(expr, cst.Name):
        return set() if expr.value in _PATH_NOISE else {expr.value}
    if isinstance(expr, cst.Attribute):
        return {source(expr)}
    if isinstance(expr, cst.Call):
        out: set[str] = set()
        for arg in expr.args:
            out |= _anchors(arg.value, depth + 1)
        if isinstance(expr.func, cst.Attribute) and not isinstance(expr.func.value, cst.Name):
            out |= _anchors(expr.func.value, depth + 1)  # Path(d).joinpath(...) / d.joinpath(...)
        elif isinstance(expr.func, cst.Attribute) and expr.func.value.value not in ("os", "pathlib", "epath", "tf", "gfile"):
            out |= _anchors(expr.func.value, depth + 1)
        return out
    out = set()
    for child in iter_children(expr):
        out |= _anchors(child, depth + 1)
    return out


def _subscript_key(expr: cst.Subscript, scope: Scope) -> Optional[str]:
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    key = value_of(expr.slice[0].slice.value, scope)
    return key if isinstance(key, str) else None


def _threads(value: cst.BaseExpression, name: str) -> bool:
    """`state = f(state, ...)` / `state, m = step(state, batch)`: the value is computed
    from the same name, so it is assumed to keep its kind (state threading)."""
    if not isinstance(value, cst.Call):
        return False
    for arg in value.args:
        if isinstance(arg.value, cst.Name) and arg.value.value == name:
            return True
    return False


def _combine(kinds: list[Payload]) -> Payload:
    if not kinds:
        return Payload("unknown", None)
    if any(k.kind == "unknown" for k in kinds):
        return Payload("unknown", kinds[0].node)
    distinct = {k.kind for k in kinds}
    if len(distinct) == 1:
        if kinds[0].kind == "dict" and len(kinds) > 1:
            return Payload("unknown", kinds[0].node)
        return kinds[0]
    return Payload("unknown", kinds[0].node)


# ---------------------------------------------------------------------------
# Data flow of a restored value


@dataclass(frozen=True)
class Use:
    kind: str  # update_state | opt_state_kw | apply_gradients | opt_state_path | reinit
    node: cst.CSTNode
    path: tuple[str, ...]
    scope: Scope


class Flow:
    """Follows a value (a restore's result) through one function: names assigned from
    it, `['key']`/`.attr` selections, replication/transfer wrappers, and into the
    parameters of locally defined functions it is passed to (two levels)."""

    def __init__(self, ckpt: CheckpointFacts, scope: Scope, tracked: dict[str, tuple[str, ...]], depth: int = 0) -> None:
        self.ckpt = ckpt
        self.facts = ckpt.facts
        self.scope = scope
        self.tracked = dict(tracked)
        self.depth = depth
        self._propagate()

    def _bindings(self) -> Iterator[Binding]:
        for bindings in self.scope.bindings.values():
            yield from bindings

    def _propagate(self) -> None:
        changed = True
        rounds = 0
        while changed and rounds < 6:
            changed = False
            rounds += 1
            for b in self._bindings():
                if b.name in self.tracked or b.value is None or b.kind not in ("assign", "annassign", "walrus", "unpack", "with"):
                    continue
                value = b.value
                if b.index:
                    if isinstance(value, (cst.Tuple, cst.List)) and len(b.index) == 1 and b.index[0] < len(value.elements):
                        value = value.elements[b.index[0]].value
                    else:
                        continue
                path = self.path_of(value)
                if path is not None:
                    self.tracked[b.name] = path
                    changed = True

    def path_of(self, expr: Optional[cst.BaseExpression], depth: int = 0) -> Optional[tuple[str, ...]]:
        if expr is None or depth > 8:
            return None
        if isinstance(expr, cst.Name):
            return self.tracked.get(expr.value)
        if isinstance(expr, cst.Subscript):
            base = self.path_of(expr.value, depth + 1)
            if base is None:
                return None
            key = _subscript_key(expr, self.scope)
            return base + ((key,) if key is not None else ("[]",))
        if isinstance(expr, cst.Attribute):
            base = self.path_of(expr.value, depth + 1)
            return None if base is None else base + (expr.attr.value,)
        if isinstance(expr, cst.Call):
            name = self.ckpt.qual(expr.func, self.scope)
            if name in TRANSPARENT:
                return self.path_of(_value(expr, 0, None), depth + 1)
            if name in TREE_MAPS:
                positional = [a for a in expr.args if a.keyword is None]
                return self.path_of(positional[1].value, depth + 1) if len(positional) >= 2 else None
        return None

    def calls(self) -> Iterator[CallRecord]:
        for record in self.ckpt.raw.calls:
            scope = record.scope
            if scope is self.scope or (scope.kind == "lambda" and scope.parent is self.scope):
                yield record

    def uses(self) -> list[Use]:
        out: list[Use] = []
        facts = self.facts
        sites = {site.call: site for site in facts.update_sites}
        for record in self.calls():
            call = record.node
            site = sites.get(call)
            if site is not None and site.kind == "update":
                state_arg = site.arg(1, "state")
                if state_arg is not None:
                    path = self.path_of(state_arg.value)
                    if path is not None:
                        out.append(Use("update_state", state_arg.value, path, self.scope))
            for arg in call.args:
                path = self.path_of(arg.value)
                if path is None:
                    continue
                if arg.keyword is not None and arg.keyword.value == "opt_state":
                    out.append(Use("opt_state_kw", arg.value, path, self.scope))
                if "opt_state" in path:
                    out.append(Use("opt_state_path", arg.value, path, self.scope))
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "apply_gradients":
                path = self.path_of(func.value)
                if path is not None:
                    out.append(Use("apply_gradients", func.value, path, self.scope))
            if self.depth < 2:
                out.extend(self._into_function(record))
        for b in self._bindings():
            if b.value is not None and b.kind in ("assign", "annassign"):
                path = self.path_of(b.value)
                if path is not None and "opt_state" in path:
                    out.append(Use("opt_state_path", b.value, path, self.scope))
        return out

    def _into_function(self, record: CallRecord) -> list[Use]:
        call = record.node
        fn = self.ckpt.function_of(call.func, record.scope)
        if fn is None:
            return []
        scope, shift = fn
        node = scope.node
        if not isinstance(node, cst.FunctionDef):
            return []
        positional_params = [p.name.value for p in list(node.params.posonly_params) + list(node.params.params)]
        tracked: dict[str, tuple[str, ...]] = {}
        position = shift
        for arg in call.args:
            if arg.star:
                return []
            path = self.path_of(arg.value)
            if arg.keyword is not None:
                if path is not None:
                    tracked[arg.keyword.value] = path
                continue
            if path is not None and position < len(positional_params):
                tracked[positional_params[position]] = path
            position += 1
        if not tracked:
            return []
        return Flow(self.ckpt, scope, tracked, self.depth + 1).uses()


def checkpoint_facts(facts) -> CheckpointFacts:
    return facts.memo("checkpoints", CheckpointFacts)
