"""Replication of host-side state: fresh state (`TrainState.create`, `.init`, restores),
`replicate` / `device_put_replicated`, `unreplicate` / `tree.map(lambda x: x[0], ...)`
and the outputs of pmapped calls, followed through the module. Records which values
cross into a pmapped call (`Crossing`) and which saves write a replicated tree."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

import libcst as cst

from optax_lint.facts.parallel.calls import (
    call_arg,
    has_star,
    keyword_arg,
    positional_args,
)
from optax_lint.facts.parallel.interpreter import (
    CLEAN,
    UNK,
    AClean,
    AContainer,
    ALocalFn,
    ATuple,
    AUnknown,
    Frame,
    Interpreter,
)
from optax_lint.facts.parallel.names import (
    REPLICATE,
    RESTORES,
    TRAIN_STATE_CREATE_SUFFIX,
    TREE_MAP,
    UNREPLICATE,
)
from optax_lint.facts.parallel.sites import MappedStep
from optax_lint.facts.state.origins import subclasses_train_state
from optax_lint.facts.project.files import defines_function
from optax_lint.facts.project.imported_functions import project_function
from optax_lint.syntax.nodes import last_name
from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import value_of
from optax_lint.syntax.walker import Scope


@dataclass(frozen=True, eq=False)
class AFresh:
    """Host-side state with no device axis: from create/init or a restore."""

    kind: str  # train_state | init | restore
    node: cst.CSTNode = field(repr=False)


@dataclass(frozen=True, eq=False)
class ARepl:
    """A tree with a leading device axis: replicate(...) or the output of a pmapped call."""

    node: cst.CSTNode = field(repr=False)
    how: str = ""  # replicate | pmap output


@dataclass(frozen=True, eq=False)
class ASingle:
    """One copy taken back from replicated state (unreplicate, x[0])."""

    node: cst.CSTNode = field(repr=False)


@dataclass(frozen=True)
class AMapped:
    step: MappedStep


@dataclass(frozen=True)
class AOrbax:
    kind: str  # manager | checkpointer


@dataclass(eq=False)
class Crossing:
    """A value passed to a pmapped callable."""

    step: MappedStep
    call: cst.Call
    arg: cst.Arg
    index: Optional[int]  # positional index, None for a keyword
    axis: Any  # the mapped axis of that argument (int, None, Unknown)
    value: Any  # AFresh | ARepl | ASingle | ...
    scope: Scope


@dataclass(eq=False)
class ReplicatedSave:
    call: cst.Call  # the save call
    saved: cst.BaseExpression  # the expression whose value is replicated
    value: ARepl
    scope: Scope
    how: str  # orbax | flax | pickle | msgpack | numpy


_SAVE_ARGS = re.compile(r"\.args\.(StandardSave|PyTreeSave|Composite|ArraySave|JsonSave)$")
_ORBAX_OBJECT = re.compile(r"^orbax\.checkpoint\..*(Checkpointer|CheckpointManager)$")


class HostInterpreter(Interpreter):
    """Follows host-side state through the module, recording what crosses into a
    pmapped call and which saves write a replicated tree."""

    def __init__(self, pf) -> None:
        super().__init__(pf)
        self.crossings: list[Crossing] = []
        self.saves: list[ReplicatedSave] = []
        self._seen_crossings: set = set()
        self._seen_saves: set = set()
        self._members: dict[tuple[int, str], Any] = {}
        self._imported_pmaps: dict[int, bool] = {}  # call id -> reaches an imported pmapped function

    def eval(self, expr, env: Frame) -> Any:
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            cls = _method_class(env.scope, expr.value.value)
            if cls is not None:
                return self._member(cls, expr.attr.value)
        return super().eval(expr, env)

    def _member(self, cls: Scope, attr: str) -> Any:
        """What `self.<attr>` holds in every method of `cls`: the join of every value the
        class's methods assign to it (a trainer keeps its replicated state in
        `self.state` from __init__ to save). Only replicate/unreplicate calls, pmapped
        callables and their outputs are told apart; anything else is unknown."""
        key = (id(cls), attr)
        if key in self._members:
            return self._members[key]
        self._members[key] = UNK  # recursion guard: `self.state = self.step(self.state)`
        value = None
        for target, stored, scope in self.facts.raw.attribute_stores:
            if target.attr.value != attr or not isinstance(target.value, cst.Name):
                continue
            if _method_class(scope, target.value.value) is not cls:
                continue
            one = self._stored(cls, stored, scope)
            value = one if value is None else self.join2(value, one)
        self._members[key] = UNK if value is None else value
        return self._members[key]

    def _stored(self, cls: Scope, expr: cst.BaseExpression, scope: Scope) -> Any:
        if not isinstance(expr, cst.Call):
            return UNK
        step = self.pf.step_by_site.get(expr)
        if step is not None:
            return AMapped(step)
        name = self.facts.canonical(expr.func, scope)
        if name in REPLICATE:
            return ARepl(expr, "replicate")
        if name in UNREPLICATE:
            return ASingle(expr)
        func = expr.func
        if name is None and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            if _method_class(scope, func.value.value) is cls:
                callee = self._member(cls, func.attr.value)
                if isinstance(callee, AMapped) and callee.step.kind == "pmap":
                    return ARepl(expr, "pmap output")
        return UNK

    def join2(self, a, b):
        if a is b or a == b:
            return a
        if isinstance(a, AFresh) and isinstance(b, AFresh):
            return a
        if isinstance(a, ARepl) and isinstance(b, ARepl):
            return a
        if isinstance(a, ASingle) and isinstance(b, ASingle):
            return a
        return UNK

    def element_of(self, value):
        if isinstance(value, (AFresh, ARepl, ASingle)):
            return value
        return UNK if not isinstance(value, AClean) else CLEAN

    def attribute(self, base, expr):
        if isinstance(base, (AFresh, ARepl, ASingle)):
            return base
        return UNK

    def subscript(self, base, expr):
        if isinstance(base, (AFresh, ARepl, ASingle)):
            return base
        return UNK

    def opaque(self, values):
        return UNK if values and any(not isinstance(v, AClean) for v in values) else CLEAN

    def function_value(self, scope):
        step = self.pf.decorated_step(scope)
        if step is not None:
            return AMapped(step)
        return ALocalFn(scope)

    def global_value(self, expr, env):
        owner, bindings = lookup(expr.value, env.scope)
        if len(bindings) == 1:
            binding = bindings[0]
            if binding.kind == "def":
                fn = self.facts.raw.functions.get(binding.node)
                if fn is not None:
                    return self.function_value(fn)
            if binding.kind in ("assign", "annassign") and binding.value is not None and not binding.index:
                step = self.pf.step_by_site.get(binding.value)
                if step is not None:
                    return AMapped(step)
                orbax = self._orbax_value(binding.value, binding.scope)
                if orbax is not None:
                    return orbax
            if binding.kind == "with" and binding.value is not None:
                orbax = self._orbax_value(binding.value, binding.scope)
                if orbax is not None:
                    return orbax
        return UNK

    def _orbax_value(self, expr, scope) -> Optional[AOrbax]:
        if isinstance(expr, cst.Call):
            name = self.facts.canonical(expr.func, scope)
            if name is not None and _ORBAX_OBJECT.match(name):
                return AOrbax("manager" if name.endswith("CheckpointManager") else "checkpointer")
        return None

    # -- calls --------------------------------------------------------------
    def call(self, call: cst.Call, env: Frame) -> Any:
        facts = self.facts
        scope = env.scope
        func = call.func
        name = facts.canonical(func, scope)
        step = self.pf.step_by_site.get(call)
        if step is not None:
            self.eval_args(call, env)
            return AMapped(step)
        callee = self.eval(func, env) if name is None else None
        if isinstance(callee, AMapped):
            return self._mapped_call(callee.step, call, env)
        values = self.eval_args(call, env)
        if name is not None and _ORBAX_OBJECT.match(name):
            return AOrbax("manager" if name.endswith("CheckpointManager") else "checkpointer")
        if name in REPLICATE:
            return ARepl(call, "replicate")
        if name in UNREPLICATE:
            return ASingle(call)
        if name in TREE_MAP:
            return self._tree_map(call, env, values)
        if name in ("jax.device_get", "jax.block_until_ready", "flax.core.unfreeze", "flax.core.freeze", "flax.core.frozen_dict.unfreeze", "flax.core.frozen_dict.freeze"):
            return values[0] if values else UNK
        if name in RESTORES:
            # Restored into a replicated target: whatever layout comes back is unknown.
            return UNK if any(_repl_in(v) for v in values) else AFresh("restore", call)
        if name is not None and name.endswith(TRAIN_STATE_CREATE_SUFFIX):
            return AFresh("train_state", call)
        self._check_save(call, name, env)
        if isinstance(func, cst.Attribute) and name is None:
            method = func.attr.value
            receiver = callee
            if method == "create" and subclasses_train_state(self.facts, func.value, scope):
                return AFresh("train_state", call)
            if method in ("init", "restore") and any(_repl_in(v) for v in values):
                return UNK  # built from, or restored into, replicated values
            if method == "init" and not isinstance(receiver, (ARepl, AMapped)):
                return AFresh("init", call)
            if method == "restore" and (isinstance(receiver, AOrbax) or keyword_arg(call, "args") is not None):
                return AFresh("restore", call)
            if method in ("replace", "apply_gradients", "copy", "unfreeze", "block_until_ready") and isinstance(receiver, (AFresh, ARepl, ASingle)):
                return receiver
            return UNK
        if isinstance(callee, ALocalFn):
            return self.call_local(callee, call, env, values)
        if name is not None and self._imported_pmap(call):
            return ARepl(call, "pmap output")
        return UNK

    def _imported_pmap(self, call: cst.Call) -> bool:
        """`call` reaches a function another project module defines under a pmap
        decorator (`from steps import train_step`): its output has a device axis."""
        known = self._imported_pmaps.get(id(call))
        if known is None:  # a call is evaluated again from each calling context and loop pass
            record = self.facts.record_of.get(call)
            found = project_function(self.facts, record, ("pmap",), _defines_pmapped) if record is not None else None
            step = found[0].parallel.decorated_step(found[1]) if found is not None else None
            known = self._imported_pmaps[id(call)] = step is not None and step.kind == "pmap"
        return known

    def _tree_map(self, call, env, values) -> Any:
        positional = positional_args(call)
        if not positional or has_star(call):
            return UNK
        fn = positional[0].value
        trees = values[1:len(positional)] if len(values) >= len(positional) else []
        if isinstance(fn, cst.Lambda) and len(fn.params.params) == 1 and trees:
            param = fn.params.params[0].name.value
            body = fn.body
            # lambda x: x[0] -> one copy of a replicated tree
            if (
                isinstance(body, cst.Subscript)
                and isinstance(body.value, cst.Name)
                and body.value.value == param
                and len(body.slice) == 1
                and isinstance(body.slice[0].slice, cst.Index)
                and value_of(body.slice[0].slice.value, env.scope) == 0
            ):
                return ASingle(call) if isinstance(trees[0], ARepl) or not isinstance(trees[0], AFresh) else UNK
        return UNK

    def _mapped_call(self, step: MappedStep, call: cst.Call, env: Frame) -> Any:
        if step.kind != "pmap":
            self.eval_args(call, env)
            return UNK
        index = 0
        for arg in call.args:
            value = self.eval(arg.value, env)
            if arg.star:
                index = None
                continue
            if arg.keyword is not None:
                # pmap maps keyword arguments over axis 0 whatever in_axes says.
                self._cross(step, call, arg, None, 0, value, env)
                continue
            if index is None:
                continue
            axis = step.axis_of_arg(index)
            self._cross(step, call, arg, index, axis, value, env)
            index += 1
        return ARepl(call, "pmap output")

    def _cross(self, step, call, arg, index, axis, value, env) -> None:
        key = (id(call), id(arg))
        if key in self._seen_crossings:
            # Seen before (e.g. from another calling context): keep the most specific.
            for crossing in self.crossings:
                if crossing.call is call and crossing.arg is arg and isinstance(crossing.value, AUnknown):
                    crossing.value = value
            return
        self._seen_crossings.add(key)
        self.crossings.append(Crossing(step, call, arg, index, axis, value, env.scope))

    # -- saves --------------------------------------------------------------
    def _check_save(self, call: cst.Call, name: Optional[str], env: Frame) -> None:
        for expr, how in self._saved_exprs(call, name, env):
            value = self.eval(expr, env)
            for repl in _repl_in(value):
                key = id(expr)
                if key not in self._seen_saves:
                    self._seen_saves.add(key)
                    self.saves.append(ReplicatedSave(call, expr, repl, env.scope, how))
                break

    def _saved_exprs(self, call: cst.Call, name: Optional[str], env: Frame) -> list[tuple[cst.BaseExpression, str]]:
        scope = env.scope
        if name in ("flax.training.checkpoints.save_checkpoint", "flax.training.checkpoints.save_checkpoint_multiprocess"):
            arg = call_arg(call, 1, "target")
            return [(arg.value, "flax")] if arg is not None else []
        if name in ("pickle.dump", "cloudpickle.dump", "dill.dump", "joblib.dump"):
            arg = call_arg(call, 0, "obj")
            return [(arg.value, "pickle")] if arg is not None else []
        if name in ("flax.serialization.to_bytes", "flax.serialization.to_state_dict", "flax.serialization.msgpack_serialize"):
            arg = call_arg(call, 0, "target")
            return [(arg.value, "msgpack")] if arg is not None else []
        if name in ("numpy.save", "jax.numpy.save", "numpy.savez"):
            arg = call_arg(call, 1, "arr")
            return [(arg.value, "numpy")] if arg is not None else []
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "save" and name is None:
            args_kw = keyword_arg(call, "args")
            if args_kw is not None:
                return [(e, "orbax") for e in self._orbax_items(args_kw.value, scope)]
            receiver = self.eval(func.value, env)
            if isinstance(receiver, AOrbax):
                positional = positional_args(call)
                if len(positional) >= 2:
                    return [(positional[1].value, "orbax")]
                item = keyword_arg(call, "items") or keyword_arg(call, "item")
                return [(item.value, "orbax")] if item is not None else []
        return []

    def _orbax_items(self, expr, scope, depth: int = 0) -> list[cst.BaseExpression]:
        if depth > 4 or not isinstance(expr, cst.Call):
            return []
        name = self.facts.canonical(expr.func, scope)
        if name is None or not _SAVE_ARGS.search(name):
            return []
        if name.endswith("Composite"):
            out = []
            for arg in expr.args:
                out.extend(self._orbax_items(arg.value, scope, depth + 1))
            return out
        if name.endswith("JsonSave"):
            return []
        arg = call_arg(expr, 0, "item")
        return [arg.value] if arg is not None else []


def _method_class(scope: Scope, name: str) -> Optional[Scope]:
    """The class whose instance `name` is in `scope`: the first parameter of a method
    (not a staticmethod or classmethod), never rebound in it."""
    cls = scope.parent
    node = scope.node
    if scope.kind != "function" or cls is None or cls.kind != "class" or not isinstance(node, cst.FunctionDef):
        return None
    params = list(node.params.posonly_params) + list(node.params.params)
    if not params or params[0].name.value != name:
        return None
    if any(last_name(d.decorator) in ("staticmethod", "classmethod") for d in node.decorators):
        return None
    bindings = scope.bindings.get(name, [])
    return cls if all(b.kind == "param" for b in bindings) else None


def _repl_in(value) -> list[ARepl]:
    if isinstance(value, ARepl):
        return [value]
    if isinstance(value, (ATuple, AContainer)):
        return [r for v in value.items for r in _repl_in(v)]
    return []


def _defines_pmapped(text: str, rest: list[str]) -> bool:
    return "pmap" in text and defines_function(text, rest)


def walk_host(pf) -> HostInterpreter:
    """Run the host interpreter from the module and from every local function that no
    other code calls by name (those are reached from their callers, with their values)."""
    interp = HostInterpreter(pf)
    if not pf.pmap_steps and not _may_replicate(pf.facts):
        # Crossings are recorded only for pmapped calls (_mapped_call) and replicated
        # saves need a replicated value, which only a replicate call or a pmap output
        # makes: neither can occur, skip the walk (jit/vmap/shard_map steps alone give
        # it nothing to find; it was 5% of a cold lint on the real corpus).
        return interp
    raw = pf.raw
    called = _called_functions(raw)
    roots = [raw.module_scope] + [s for s in raw.functions.values() if s not in called]
    for scope in roots:
        try:
            interp.run(scope, {name: UNK for name in scope.params})
        except RecursionError:  # pathological nesting: what was found so far stands
            pass
    return interp


def _may_replicate(facts) -> bool:
    """Whether the text spells any replicating function (an alias or attribute
    access still spells its last name, or imports it)."""
    text = facts.text or ""
    return any(name.rsplit(".", 1)[-1] in text for name in REPLICATE)


def _called_functions(raw) -> set:
    """Local functions called by name somewhere in the file."""
    called = set()
    for record in raw.calls:
        func = record.node.func
        if isinstance(func, cst.Name):
            _, bindings = lookup(func.value, record.scope)
            if len(bindings) == 1 and bindings[0].kind == "def":
                fn = raw.functions.get(bindings[0].node)
                if fn is not None and fn is not record.scope:
                    called.add(fn)
    return called
