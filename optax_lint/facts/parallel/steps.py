"""Multi-device facts: mapped train steps, collectives, gradient data-flow inside a
step, and replication of host-side state (docs/protocol.md#multi-device-training).

- **Mapped steps.** Every `jax.pmap` (decorator, call, `functools.partial(jax.pmap,
  axis_name=...)`), `jax.shard_map` / `jax.smap`, `jax.vmap` and `jax.jit` site, with
  the function it maps (resolved through names, `functools.partial` and lambdas), its
  axis name(s), `in_axes` and `static_broadcasted_argnums`. shard_map and jit steps are
  recorded so that pmap rules can tell them apart: SPMD `jit` needs no `pmean`.
- **Collectives.** `lax.pmean` / `psum` / `pmax` / `all_gather` / ... with the axis
  names they name, and what they reduce (grads, loss, metrics).
- **Gradient data-flow.** A small abstract interpreter follows the output of
  `jax.grad` / `value_and_grad` (and flax's `DynamicScale.value_and_grad`) through
  assignments, tuple unpacking, `tree.map` lambdas and local helper functions to
  `tx.update` / `apply_gradients` / `optax.apply_updates`, recording over which axes
  the gradients were reduced on the way.
- **Replication.** A second interpreter follows host-side values: fresh state
  (`TrainState.create`, `.init`, restores), `replicate` / `device_put_replicated`,
  `unreplicate` / `tree.map(lambda x: x[0], ...)`, and the outputs of pmapped calls.
  It records which values cross into a pmapped call (`crossings`) and which saves
  write a replicated tree.

Whatever cannot be followed is Unknown, and rules stay silent on Unknown.

For other families: `crossings(facts)` lists the values passed to pmapped callables
(`Crossing.value` is `AFresh` for host-side state from create/init/restore, `ARepl`
for replicated or pmap-output trees, `ASingle` for unreplicated copies), and
`parallel_facts(facts).replicated_saves` the saves that write a replicated tree.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

import libcst as cst

from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import CallRecord, Scope, iter_children

# ---------------------------------------------------------------------------
# Names

PMAP = frozenset({"jax.pmap", "jax.api.pmap", "equinox.filter_pmap"})
SHARD_MAP = frozenset({"jax.shard_map", "jax.experimental.shard_map.shard_map", "jax.smap"})
VMAP = frozenset({"jax.vmap", "flax.linen.vmap", "flax.nnx.vmap", "equinox.filter_vmap", "haiku.vmap"})
JIT = frozenset({"jax.jit", "jax.pjit", "jax.experimental.pjit.pjit", "flax.nnx.jit", "equinox.filter_jit"})
PARTIAL = frozenset({"functools.partial"})
MAPPERS = PMAP | SHARD_MAP | VMAP | JIT

# Positional parameters after the mapped function, per mapper (keywords work for all).
_POSITIONAL = {
    "jax.pmap": ("axis_name",),
    "jax.api.pmap": ("axis_name",),
    "jax.vmap": ("in_axes", "out_axes", "axis_name", "axis_size", "spmd_axis_name"),
}

# Collective -> position of its axis_name argument.
COLLECTIVES = {
    "psum": 1, "pmean": 1, "pmax": 1, "pmin": 1, "all_gather": 1, "psum_scatter": 1,
    "ppermute": 1, "all_to_all": 1, "pshuffle": 1, "pswapaxes": 1, "pcast": 1,
    "pbroadcast": 1, "axis_index": 0, "axis_size": 0, "ragged_all_to_all": None,
}
# Collectives that combine values across the axis (a gradient passed through one is
# no longer a per-device gradient).
REDUCTIONS = frozenset({"psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter"})
_COLLECTIVE_PREFIXES = ("jax.lax.", "jax.lax.parallel.", "jax._src.lax.parallel.")

GRAD_TRANSFORMS = {
    "jax.grad": "grad", "jax.value_and_grad": "value_and_grad",
    "flax.nnx.grad": "grad", "flax.nnx.value_and_grad": "value_and_grad",
    "flax.linen.grad": "grad", "flax.linen.value_and_grad": "value_and_grad",
    "equinox.filter_grad": "grad", "equinox.filter_value_and_grad": "value_and_grad",
}
TREE_MAP = frozenset({"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map", "optax.tree_utils.tree_map_params"})
REPLICATE = frozenset({"flax.jax_utils.replicate", "jax.device_put_replicated"})
UNREPLICATE = frozenset({"flax.jax_utils.unreplicate"})
# Functions a function passed to them is traced by, in the caller's axis environment.
PASS_THROUGH = frozenset(
    {
        "jax.grad", "jax.value_and_grad", "jax.jit", "jax.checkpoint", "jax.remat", "jax.vjp", "jax.jvp",
        "jax.linearize", "jax.lax.scan", "jax.lax.fori_loop", "jax.lax.while_loop", "jax.lax.cond",
        "jax.lax.switch", "jax.lax.map", "jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map",
        "functools.partial", "jax.named_call", "jax.custom_vjp", "jax.custom_jvp", "jax.eval_shape",
        "flax.linen.remat", "flax.linen.checkpoint", "flax.nnx.grad", "flax.nnx.value_and_grad",
        "flax.nnx.jit", "flax.nnx.remat", "equinox.filter_jit", "equinox.filter_grad",
        "equinox.filter_value_and_grad",
    }
)
# Calls whose result is a plain function of their (array) arguments.
_NUMERIC_PREFIXES = ("jax.numpy.", "numpy.", "jax.nn.", "jax.scipy.", "optax.tree.", "optax.tree_utils.", "math.")
TRAIN_STATE_CREATE_SUFFIX = "TrainState.create"
RESTORES = frozenset(
    {
        "flax.training.checkpoints.restore_checkpoint", "flax.serialization.from_bytes",
        "flax.serialization.from_state_dict", "flax.serialization.msgpack_restore",
    }
)
DEVICE_COUNT_CALLS = frozenset({"jax.device_count", "jax.local_device_count", "jax.devices", "jax.local_devices"})
DEFAULT_DEVICE_COUNT_NAMES = (
    "device_count", "local_device_count", "num_devices", "n_devices", "ndevices", "n_devs", "num_devs",
    "ndev", "n_dev", "num_replicas", "n_replicas", "replica_count", "world_size", "num_local_devices",
    "n_local_devices",
)
DEFAULT_PER_DEVICE_BATCH_NAMES = (
    r"per_device_batch", r"batch_size_per_device", r"batch_per_device", r"per_replica_batch",
    r"batch_size_per_replica", r"device_batch_size", r"per_core_batch", r"batch_per_core",
    r"per_device_train_batch",
)
# Axis names that say "data parallel" on their own.
DATA_PARALLEL_AXES = frozenset({"batch", "data", "dp", "devices", "device", "replica", "replicas", "data_parallel", "i"})
PARTITION_SPEC = frozenset({"jax.sharding.PartitionSpec", "jax.P", "jax.experimental.PartitionSpec"})
MESH_CTORS = {"jax.make_mesh": 1, "jax.sharding.Mesh": 1, "jax.experimental.maps.Mesh": 1}


def _canon(facts, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
    return facts.canonical(expr, scope)


def collective_op(name: Optional[str]) -> Optional[str]:
    """'jax.lax.pmean' -> 'pmean'; None for anything that is not a collective."""
    if name is None:
        return None
    if name == "flax.jax_utils.pmean":
        return "pmean"
    for prefix in _COLLECTIVE_PREFIXES:
        if name.startswith(prefix):
            op = name[len(prefix):]
            return op if op in COLLECTIVES else None
    return None


def axis_set(value: Any) -> Any:
    """A static axis-name value -> frozenset of names, None (no name), or Unknown."""
    if isinstance(value, Unknown):
        return value
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, str) for v in value):
        return frozenset(value)
    return Unknown("axis name is not a string")


def fmt_axes(axes) -> str:
    if axes is None:
        return "no axis name"
    if isinstance(axes, Unknown):
        return "an unknown axis"
    return ", ".join(repr(a) for a in sorted(axes))


def _positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def _keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def _has_star(call: cst.Call) -> bool:
    return any(a.star for a in call.args)


def call_arg(call: cst.Call, position: Optional[int], keyword: str) -> Optional[cst.Arg]:
    arg = _keyword(call, keyword)
    if arg is not None or position is None:
        return arg
    positional = _positional(call)
    return positional[position] if position < len(positional) else None


def root_name(expr: cst.BaseExpression) -> Optional[str]:
    """`state.params['x']` -> 'state'."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def code_of(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


# ---------------------------------------------------------------------------
# Mapped steps


@dataclass(eq=False)
class MappedStep:
    kind: str  # pmap | shard_map | vmap | jit
    mapper: str  # canonical name of the mapper (jax.pmap, jax.shard_map, ...)
    site: cst.CSTNode  # the call (or decorator expression) that maps
    scope: Scope  # the scope the site is written in
    target: Optional[cst.BaseExpression]  # the mapped function expression (None for decorators)
    function: Optional[Scope]  # the local function (def or lambda) that is mapped
    params: dict[str, cst.Arg] = field(default_factory=dict)  # mapper arguments by name
    has_star: bool = False
    bound_positional: int = 0  # arguments bound by functools.partial(f, a, b)
    bound_keywords: frozenset = frozenset()
    decorated: Optional[cst.FunctionDef] = None
    name: Optional[str] = None  # the variable holding the mapped callable (or the def name)
    arg_call: Optional[cst.Call] = None  # the call carrying the mapper's arguments (pmap(...) or partial(...))
    facts: Any = field(default=None, repr=False)

    def arg_value(self, name: str) -> Any:
        arg = self.params.get(name)
        if arg is None:
            return Unknown("arguments passed with * or **") if self.has_star else None
        return value_of(arg.value, self.scope)

    @property
    def axis_names(self) -> Any:
        """frozenset of the names this site binds, None when it binds none, or Unknown."""
        if self.kind == "jit":
            return None
        if self.kind == "shard_map":
            if "axis_name" in self.params:  # jax.smap
                return axis_set(self.arg_value("axis_name"))
            if "axis_names" in self.params:
                value = self.arg_value("axis_names")
                if isinstance(value, (set, frozenset, tuple, list)) and all(isinstance(v, str) for v in value):
                    return frozenset(value) if value else self.mesh_axes()
                return Unknown("axis_names is not static")
            return self.mesh_axes()
        if self.has_star and "axis_name" not in self.params:
            return Unknown("arguments passed with * or **")
        return axis_set(self.arg_value("axis_name"))

    def mesh_axes(self) -> Any:
        arg = self.params.get("mesh")
        if arg is None:
            return Unknown("the mesh comes from the context")
        return mesh_axis_names(self.facts, arg.value, self.scope)

    @property
    def in_axes(self) -> Any:
        if "in_axes" not in self.params:
            return Unknown("* arguments") if self.has_star else 0
        return self.arg_value("in_axes")

    @property
    def static_broadcasted_argnums(self) -> Any:
        if "static_broadcasted_argnums" not in self.params:
            return Unknown("* arguments") if self.has_star else ()
        value = self.arg_value("static_broadcasted_argnums")
        if isinstance(value, int) and not isinstance(value, bool):
            return (value,)
        if isinstance(value, (tuple, list)) and all(isinstance(v, int) for v in value):
            return tuple(value)
        return Unknown("static_broadcasted_argnums is not static")

    def axis_of_arg(self, index: int) -> Any:
        """The mapped axis of the call's positional argument `index`: int, None
        (broadcast or static), or Unknown."""
        static = self.static_broadcasted_argnums
        if isinstance(static, Unknown):
            return static
        if index in static:
            return None
        axes = self.in_axes
        if isinstance(axes, Unknown):
            return axes
        if axes is None or (isinstance(axes, int) and not isinstance(axes, bool)):
            return axes
        if isinstance(axes, (tuple, list)):
            return axes[index] if index < len(axes) and (axes[index] is None or isinstance(axes[index], int)) else Unknown("in_axes entry")
        return Unknown("in_axes is not static")

    @property
    def check_vma(self) -> Any:
        for name in ("check_vma", "check_rep"):
            if name in self.params:
                return self.arg_value(name)
        return True

    @property
    def sharded_jit(self) -> bool:
        return self.kind == "jit" and any(k in self.params for k in ("in_shardings", "out_shardings"))

    def __repr__(self) -> str:
        return f"MappedStep({self.kind}, {self.describe()}, axes={fmt_axes(self.axis_names)})"

    def param_index(self, name: str) -> Optional[int]:
        """Position of the mapped function's parameter `name` among the arguments the
        mapped callable receives (after functools.partial's bound positionals)."""
        if self.function is None or not isinstance(self.function.node, (cst.FunctionDef, cst.Lambda)):
            return None
        params = self.function.node.params
        ordered = [p.name.value for p in list(params.posonly_params) + list(params.params)]
        if name not in ordered:
            return None
        index = ordered.index(name) - self.bound_positional
        return index if index >= 0 else None

    def in_spec_replicated(self, index: int) -> Optional[bool]:
        """shard_map: whether argument `index` comes in replicated (P()), sharded
        (False), or unknown (None)."""
        arg = self.params.get("in_specs")
        if arg is None:
            return None
        expr, scope = arg.value, self.scope
        if isinstance(expr, cst.Name):
            _, bindings = lookup(expr.value, scope)
            if len(bindings) != 1 or bindings[0].value is None or bindings[0].index:
                return None
            expr, scope = bindings[0].value, bindings[0].scope
        if isinstance(expr, (cst.Tuple, cst.List)):
            if any(isinstance(e, cst.StarredElement) for e in expr.elements) or index >= len(expr.elements):
                return None
            return partition_spec_replicated(self.facts, expr.elements[index].value, scope)
        return partition_spec_replicated(self.facts, expr, scope)

    def mesh_sizes(self) -> dict:
        """{axis name: size} when the mesh is built here with literal sizes."""
        arg = self.params.get("mesh")
        return mesh_axis_sizes(self.facts, arg.value, self.scope) if arg is not None else {}

    def describe(self) -> str:
        short = self.mapper.rsplit(".", 1)[-1]
        target = self.function.name if self.function is not None and self.function.kind == "function" else None
        if target is None and self.target is not None:
            target = code_of(self.target)
            if len(target) > 40:
                target = target[:37] + "..."
        return f"{short}({target})" if target else short


def mesh_axis_names(facts, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Any:
    if depth > 6:
        return Unknown("mesh too deep")
    if isinstance(expr, cst.Name):
        _, bindings = lookup(expr.value, scope)
        if len(bindings) != 1 or bindings[0].value is None or bindings[0].index:
            return Unknown(f"'{expr.value}' is not a mesh built once in this file")
        return mesh_axis_names(facts, bindings[0].value, bindings[0].scope, depth + 1)
    if isinstance(expr, cst.Call):
        name = _canon(facts, expr.func, scope)
        if name in MESH_CTORS and not _has_star(expr):
            arg = call_arg(expr, MESH_CTORS[name], "axis_names")
            if arg is not None:
                return axis_set(value_of(arg.value, scope))
    return Unknown("mesh not built in this file")


def partition_spec_replicated(facts, expr, scope: Scope) -> Optional[bool]:
    """True for `P()` / `P(None, ...)`, False for a spec naming a mesh axis, None when
    the expression is not a PartitionSpec written here."""
    if isinstance(expr, cst.Name):
        _, bindings = lookup(expr.value, scope)
        if len(bindings) == 1 and bindings[0].value is not None and not bindings[0].index and bindings[0].kind == "assign":
            return partition_spec_replicated(facts, bindings[0].value, bindings[0].scope)
        return None
    if not isinstance(expr, cst.Call) or _canon(facts, expr.func, scope) not in PARTITION_SPEC or _has_star(expr):
        return None
    values = [value_of(a.value, scope) for a in expr.args]
    if all(v is None for v in values):
        return True
    if any(isinstance(v, (str, tuple)) for v in values):
        return False
    return None


def mesh_axis_sizes(facts, expr, scope: Scope, depth: int = 0) -> dict:
    if depth > 6:
        return {}
    if isinstance(expr, cst.Name):
        _, bindings = lookup(expr.value, scope)
        if len(bindings) != 1 or bindings[0].value is None or bindings[0].index:
            return {}
        return mesh_axis_sizes(facts, bindings[0].value, bindings[0].scope, depth + 1)
    if isinstance(expr, cst.Call) and _canon(facts, expr.func, scope) == "jax.make_mesh" and not _has_star(expr):
        shape = call_arg(expr, 0, "axis_shapes")
        names = call_arg(expr, 1, "axis_names")
        if shape is None or names is None:
            return {}
        shape_v, names_v = value_of(shape.value, scope), value_of(names.value, scope)
        if isinstance(names_v, str):
            names_v = (names_v,)
        if isinstance(shape_v, int):
            shape_v = (shape_v,)
        if isinstance(shape_v, (tuple, list)) and isinstance(names_v, (tuple, list)) and len(shape_v) == len(names_v):
            if all(isinstance(v, int) and not isinstance(v, bool) for v in shape_v):
                return dict(zip(names_v, shape_v))
    return {}


class _SiteFinder:
    def __init__(self, facts) -> None:
        self.facts = facts
        self.raw = facts.raw
        self.lambda_scopes = {s.node: s for s in self.raw.scopes if s.kind == "lambda"}

    def find(self) -> list[MappedStep]:
        steps: list[MappedStep] = []
        decorator_nodes: set = set()
        for fdef, fscope in self.raw.functions.items():
            for decorator in fdef.decorators:
                expr = decorator.decorator
                decorator_nodes.add(expr)
                step = self._decorator(expr, fdef, fscope)
                if step is not None:
                    steps.append(step)
        for record in self.raw.calls:
            if record.node in decorator_nodes:
                continue
            step = self._call(record)
            if step is not None:
                steps.append(step)
        return steps

    # -- recognising a mapper ----------------------------------------------
    def _mapper(self, expr: cst.BaseExpression, scope: Scope) -> Optional[tuple[str, Optional[cst.Call]]]:
        """(mapper name, the partial(...) call carrying its arguments) for `jax.pmap`
        or `functools.partial(jax.pmap, ...)`."""
        name = _canon(self.facts, expr, scope)
        if name in MAPPERS:
            return name, None
        if isinstance(expr, cst.Call) and _canon(self.facts, expr.func, scope) in PARTIAL:
            positional = _positional(expr)
            if positional:
                inner = _canon(self.facts, positional[0].value, scope)
                if inner in MAPPERS:
                    return inner, expr
        return None

    def _bind(self, step: MappedStep, call: Optional[cst.Call], skip: int) -> None:
        """Mapper arguments of `call` (after the first `skip` positionals) by name."""
        if call is None:
            return
        step.arg_call = call
        names = _POSITIONAL.get(step.mapper, ())
        for i, arg in enumerate(a for a in call.args if a.keyword is None):
            if arg.star:
                step.has_star = True
                continue
            j = i - skip
            if 0 <= j < len(names):
                step.params[names[j]] = arg
            elif j >= 0:
                step.has_star = True  # an argument we cannot place
        for arg in call.args:
            if arg.keyword is not None:
                step.params[arg.keyword.value] = arg
            elif arg.star == "**":
                step.has_star = True

    def _make(self, mapper: str, site, scope) -> MappedStep:
        kind = "pmap" if mapper in PMAP else "shard_map" if mapper in SHARD_MAP else "vmap" if mapper in VMAP else "jit"
        return MappedStep(kind, mapper, site, scope, None, None, facts=self.facts)

    def _decorator(self, expr, fdef: cst.FunctionDef, fscope: Scope) -> Optional[MappedStep]:
        scope = fscope.parent
        found = self._mapper(expr, scope)
        if found is not None:  # @jax.pmap / @partial(jax.pmap, axis_name=...)
            mapper, partial_call = found
            step = self._make(mapper, expr, scope)
            self._bind(step, partial_call, 1)
        elif isinstance(expr, cst.Call) and _canon(self.facts, expr.func, scope) in MAPPERS and not _positional(expr):
            # @jax.shard_map(mesh=..., in_specs=..., out_specs=...) / @jax.jit(...)-style factories
            step = self._make(_canon(self.facts, expr.func, scope), expr, scope)
            self._bind(step, expr, 0)
        else:
            return None
        step.function = fscope
        step.decorated = fdef
        step.name = fdef.name.value
        return step

    def _call(self, record: CallRecord) -> Optional[MappedStep]:
        call, scope = record.node, record.scope
        found = self._mapper(call.func, scope)
        if found is not None and found[1] is not None:
            # functools.partial(jax.pmap, axis_name=...)(train_step)
            mapper, partial_call = found
            positional = _positional(call)
            if not positional:
                return None
            step = self._make(mapper, call, scope)
            self._bind(step, partial_call, 1)
            step.target = positional[0].value
        else:
            mapper = _canon(self.facts, call.func, scope)
            if mapper not in MAPPERS:
                return None
            positional = [a for a in call.args if a.keyword is None]
            if not positional or positional[0].star:
                return None  # a decorator factory (shard_map(mesh=...)) used as a value
            step = self._make(mapper, call, scope)
            self._bind(step, call, 1)
            step.target = positional[0].value
        self._resolve_target(step)
        if isinstance(record.assigned_to, cst.Name):
            step.name = record.assigned_to.value
        return step

    def _resolve_target(self, step: MappedStep) -> None:
        fn, positional, keywords = self.resolve_function(step.target, step.scope)
        step.function, step.bound_positional, step.bound_keywords = fn, positional, frozenset(keywords)

    def resolve_function(self, expr, scope, depth: int = 0) -> tuple[Optional[Scope], int, set]:
        """The local function an expression names: def, lambda, or functools.partial of one."""
        if expr is None or depth > 6:
            return None, 0, set()
        if isinstance(expr, cst.Lambda):
            return self.lambda_scopes.get(expr), 0, set()
        if isinstance(expr, cst.Name):
            _, bindings = lookup(expr.value, scope)
            if len(bindings) != 1:
                return None, 0, set()
            binding = bindings[0]
            if binding.kind == "def":
                return self.raw.functions.get(binding.node), 0, set()
            if binding.kind in ("assign", "annassign") and binding.value is not None and not binding.index:
                return self.resolve_function(binding.value, binding.scope, depth + 1)
            return None, 0, set()
        if isinstance(expr, cst.Call) and _canon(self.facts, expr.func, scope) in PARTIAL and not _has_star(expr):
            positional = _positional(expr)
            if not positional:
                return None, 0, set()
            fn, n, kws = self.resolve_function(positional[0].value, scope, depth + 1)
            kws = set(kws) | {a.keyword.value for a in expr.args if a.keyword is not None}
            return fn, n + len(positional) - 1, kws
        return None, 0, set()


# ---------------------------------------------------------------------------
# Collectives


@dataclass(eq=False)
class Collective:
    op: str  # pmean, psum, ...
    record: CallRecord
    axis_arg: Optional[cst.Arg]
    axes: Any  # frozenset of names, None (not given), or Unknown
    operand: Optional[cst.BaseExpression]
    reduces: str = "other"  # grads | loss | metrics | other

    @property
    def call(self) -> cst.Call:
        return self.record.node


_LOSS = re.compile(r"loss", re.IGNORECASE)
_METRIC = re.compile(r"metric|acc|summary|stats|count|norm", re.IGNORECASE)
_GRAD = re.compile(r"grad", re.IGNORECASE)


def _classify_operand(expr: Optional[cst.BaseExpression]) -> str:
    if expr is None:
        return "other"
    if isinstance(expr, cst.Dict):
        return "metrics"
    text = code_of(expr)
    if _GRAD.search(text):
        return "grads"
    if _LOSS.search(text):
        return "loss"
    if _METRIC.search(text):
        return "metrics"
    return "other"


# ---------------------------------------------------------------------------
# Abstract values shared by the two interpreters


@dataclass(frozen=True)
class AUnknown:
    why: str = ""


UNK = AUnknown()


@dataclass(frozen=True)
class AClean:
    pass


CLEAN = AClean()


@dataclass(frozen=True, eq=False)
class ATuple:
    items: tuple


@dataclass(frozen=True, eq=False)
class AContainer:
    """A dict (or other container) literal: what matters is what it holds."""

    items: tuple


@dataclass(frozen=True)
class ALocalFn:
    scope: Scope = field(repr=False)
    bound: tuple = ()  # abstract values of partial-bound positional arguments


class _Interpreter:
    """Sequential abstract execution of a function body over a small value domain.

    Subclasses give `call`, `join2` and the global fallback; this class walks the
    statements, binds targets (tuple unpacking included), joins branches and
    evaluates expressions structurally."""

    MAX_DEPTH = 4

    def __init__(self, pf: "ParallelFacts") -> None:
        self.pf = pf
        self.facts = pf.facts
        self.stack: list[Scope] = []
        self._memo: dict = {}

    # -- entry --------------------------------------------------------------
    def run(self, scope: Scope, args: dict[str, Any]) -> Any:
        if len(self.stack) >= self.MAX_DEPTH or scope in self.stack:
            return UNK
        self.stack.append(scope)
        try:
            env = Frame(scope, dict(args))
            node = scope.node
            if isinstance(node, cst.Lambda):
                return self.eval(node.body, env)
            if isinstance(node, cst.Module):
                self.block(node.body, env)
                return CLEAN
            self.block(node.body.body if isinstance(node.body, cst.IndentedBlock) else node.body.body, env)
            return env.returned if env.returned is not None else CLEAN
        finally:
            self.stack.pop()

    # -- statements ---------------------------------------------------------
    def block(self, body, env: "Frame") -> None:
        for stmt in body:
            self.stmt(stmt, env)

    def suite(self, suite, env) -> None:
        self.block(suite.body, env)

    def stmt(self, stmt, env: "Frame") -> None:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self.small(small, env, stmt)
        elif isinstance(stmt, cst.If):
            self.eval(stmt.test, env)
            then = env.copy()
            self.suite(stmt.body, then)
            other = env.copy()
            if stmt.orelse is not None:
                if isinstance(stmt.orelse, cst.If):
                    self.stmt(stmt.orelse, other)
                else:
                    self.suite(stmt.orelse.body, other)
            env.merge([then, other], self)
        elif isinstance(stmt, (cst.For, cst.While)):
            if isinstance(stmt, cst.For):
                self.eval(stmt.iter, env)
            else:
                self.eval(stmt.test, env)
            body = env.copy()
            if isinstance(stmt, cst.For):
                self.bind(stmt.target, self.loop_item(stmt.iter, env), body, stmt)
            self.suite(stmt.body, body)
            if stmt.orelse is not None:
                self.suite(stmt.orelse.body, body)
            env.merge([env.copy(), body], self)
        elif isinstance(stmt, cst.With):
            for item in stmt.items:
                value = self.eval(item.item, env)
                if item.asname is not None:
                    self.bind(item.asname.name, value, env, stmt)
            self.suite(stmt.body, env)
        elif isinstance(stmt, cst.Try) or type(stmt).__name__ == "TryStar":
            branches = []
            body = env.copy()
            self.suite(stmt.body, body)
            if stmt.orelse is not None:
                self.suite(stmt.orelse.body, body)
            branches.append(body)
            for handler in stmt.handlers:
                h = env.copy()
                self.suite(handler.body, h)
                branches.append(h)
            env.merge(branches, self)
            if stmt.finalbody is not None:
                self.suite(stmt.finalbody.body, env)
        elif isinstance(stmt, cst.FunctionDef):
            fn = self.facts.raw.functions.get(stmt)
            env.values[stmt.name.value] = self.function_value(fn) if fn is not None else UNK
        elif isinstance(stmt, cst.ClassDef):
            env.values[stmt.name.value] = UNK
        elif type(stmt).__name__ == "Match":
            self.eval(stmt.subject, env)
            branches = []
            for case in stmt.cases:
                c = env.copy()
                self.suite(case.body, c)
                branches.append(c)
            branches.append(env.copy())
            env.merge(branches, self)

    def small(self, node, env: "Frame", line) -> None:
        if isinstance(node, cst.Assign):
            value = self.eval(node.value, env)
            for target in node.targets:
                self.bind(target.target, value, env, line)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self.bind(node.target, self.eval(node.value, env), env, line)
        elif isinstance(node, cst.AugAssign):
            value = self.binop(self.eval(node.target, env), self.eval(node.value, env))
            if isinstance(node.target, cst.Name):
                env.set(node.target.value, value, line)
        elif isinstance(node, cst.Expr):
            self.eval(node.value, env)
        elif isinstance(node, cst.Return):
            value = self.eval(node.value, env) if node.value is not None else CLEAN
            env.returned = value if env.returned is None else self.join2(env.returned, value)
        else:
            for child in iter_children(node):
                if isinstance(child, cst.BaseExpression):
                    self.eval(child, env)

    def bind(self, target, value, env: "Frame", line) -> None:
        if isinstance(target, cst.Name):
            env.set(target.value, value, line)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            starred = any(isinstance(e, cst.StarredElement) for e in elements)
            for i, element in enumerate(elements):
                if isinstance(value, ATuple) and not starred and len(value.items) == len(elements):
                    item = value.items[i]
                elif isinstance(value, ATuple):
                    item = UNK
                else:
                    item = self.element_of(value)
                self.bind(element.value, item, env, line)
        else:
            self.eval(target, env)

    def loop_item(self, iterable, env) -> Any:
        return CLEAN

    def element_of(self, value) -> Any:
        """A part of a value unpacked without a known structure."""
        return value

    # -- expressions --------------------------------------------------------
    def eval(self, expr, env: "Frame") -> Any:
        if expr is None:
            return CLEAN
        if isinstance(expr, cst.Name):
            if expr.value in env.values:
                return env.values[expr.value]
            return self.global_value(expr, env)
        if isinstance(expr, cst.Call):
            return self.call(expr, env)
        if isinstance(expr, cst.Attribute):
            return self.attribute(self.eval(expr.value, env), expr)
        if isinstance(expr, cst.Subscript):
            base = self.eval(expr.value, env)
            index = None
            if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
                inner = expr.slice[0].slice.value
                self.eval(inner, env)
                if isinstance(inner, cst.Integer) or (isinstance(inner, cst.UnaryOperation) and isinstance(inner.expression, cst.Integer)):
                    index = value_of(inner, env.scope)
            if isinstance(base, ATuple):
                if isinstance(index, int) and -len(base.items) <= index < len(base.items):
                    return base.items[index]
                return UNK
            return self.subscript(base, expr)
        if isinstance(expr, (cst.Tuple, cst.List)):
            items = []
            for element in expr.elements:
                value = self.eval(element.value, env)
                if isinstance(element, cst.StarredElement):
                    return AContainer(tuple(items + [value]))
                items.append(value)
            return ATuple(tuple(items)) if isinstance(expr, cst.Tuple) else AContainer(tuple(items))
        if isinstance(expr, cst.Dict):
            items = []
            for element in expr.elements:
                if isinstance(element, cst.DictElement):
                    self.eval(element.key, env)
                items.append(self.eval(element.value, env))
            return AContainer(tuple(items))
        if isinstance(expr, cst.BinaryOperation):
            return self.binop(self.eval(expr.left, env), self.eval(expr.right, env))
        if isinstance(expr, cst.UnaryOperation):
            return self.eval(expr.expression, env)
        if isinstance(expr, cst.Lambda):
            scope = self.pf.sites.lambda_scopes.get(expr)
            return ALocalFn(scope) if scope is not None else UNK
        if isinstance(expr, (cst.BaseNumber, cst.BaseString)):
            return CLEAN
        # Anything else: evaluate the parts (calls inside still count), then give up
        # on the value itself unless nothing interesting went in.
        values = [self.eval(child, env) for child in iter_children(expr) if isinstance(child, cst.BaseExpression)]
        return self.opaque(values)

    def opaque(self, values: list) -> Any:
        return CLEAN if all(v == CLEAN for v in values) else UNK

    def binop(self, left, right) -> Any:
        return self.opaque([left, right])

    def attribute(self, base, expr: cst.Attribute) -> Any:
        return base if base == CLEAN else UNK

    def subscript(self, base, expr: cst.Subscript) -> Any:
        return base if base == CLEAN else UNK

    def function_value(self, scope: Scope) -> Any:
        return ALocalFn(scope)

    def global_value(self, expr: cst.Name, env: "Frame") -> Any:
        _, bindings = lookup(expr.value, env.scope)
        if len(bindings) == 1 and bindings[0].kind == "def":
            fn = self.facts.raw.functions.get(bindings[0].node)
            if fn is not None:
                return self.function_value(fn)
        if len(bindings) == 1 and bindings[0].kind == "param":
            return CLEAN
        return UNK if bindings and bindings[0].kind != "import" else CLEAN

    def join2(self, a, b) -> Any:
        if a is b or a == b:
            return a
        return UNK

    def call(self, call: cst.Call, env: "Frame") -> Any:  # pragma: no cover - subclasses
        raise NotImplementedError

    # -- helpers ------------------------------------------------------------
    def eval_args(self, call: cst.Call, env) -> list:
        return [self.eval(arg.value, env) for arg in call.args]

    def call_local(self, fn: ALocalFn, call: cst.Call, env, arg_values: Optional[list] = None) -> Any:
        """Run a local function with the abstract values of the call's arguments."""
        scope = fn.scope
        node = scope.node
        params = node.params
        if arg_values is None:
            arg_values = [self.eval(a.value, env) for a in call.args]
        ordered = [p.name.value for p in list(params.posonly_params) + list(params.params)]
        values: dict[str, Any] = {}
        for name in list(scope.params):
            values[name] = CLEAN
        positional = list(fn.bound)
        if any(a.star for a in call.args):
            for name in scope.params:
                values[name] = UNK
        else:
            positional += [v for a, v in zip(call.args, arg_values) if a.keyword is None]
            for name, value in zip(ordered, positional):
                values[name] = value
            for a, v in zip(call.args, arg_values):
                if a.keyword is not None and a.keyword.value in values:
                    values[a.keyword.value] = v
        return self.run_memo(scope, values)

    def run_memo(self, scope: Scope, values: dict) -> Any:
        """`run`, once per function and abstract arguments: keeps helper-heavy files
        linear instead of exponential in the call depth."""
        try:
            key = (scope, tuple(sorted(values.items(), key=lambda kv: kv[0])))
            hash(key)
        except TypeError:
            return self.run(scope, values)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = UNK  # recursion guard while it runs
        result = self.run(scope, values)
        self._memo[key] = result
        return result


class Frame:
    def __init__(self, scope: Scope, values: dict, origins: Optional[dict] = None) -> None:
        self.scope = scope
        self.values = values
        self.origins: dict[str, Optional[cst.CSTNode]] = origins if origins is not None else {}
        self.returned = None

    def set(self, name: str, value, line) -> None:
        self.values[name] = value
        self.origins[name] = line

    def copy(self) -> "Frame":
        frame = Frame(self.scope, dict(self.values), dict(self.origins))
        frame.returned = self.returned
        return frame

    def merge(self, branches: list["Frame"], interp: _Interpreter) -> None:
        names = set()
        for b in branches:
            names |= set(b.values)
        for name in names:
            vals = [b.values.get(name, _MISSING) for b in branches]
            present = [v for v in vals if v is not _MISSING]
            value = present[0]
            for other in present[1:]:
                value = interp.join2(value, other)
            if len(present) < len(vals):
                value = interp.join2(value, UNK)  # unbound on some path
            self.values[name] = value
            origins = {id(b.origins.get(name)) for b in branches}
            self.origins[name] = branches[0].origins.get(name) if len(origins) == 1 else None
        returned = [b.returned for b in branches if b.returned is not None]
        if returned:
            value = returned[0]
            for other in returned[1:]:
                value = interp.join2(value, other)
            self.returned = value


_MISSING = object()


# ---------------------------------------------------------------------------
# Gradient data-flow


@dataclass(frozen=True, eq=False)
class AGrad:
    """A gradient (or something computed from one), reduced over `axes` so far."""

    source: cst.Call = field(repr=False)  # the grad_fn(...) call that produced it
    axes: frozenset = frozenset()
    unknown_axis: bool = False  # reduced over an axis whose name is not static
    wrt: Optional[str] = None  # the step parameter it is the gradient with respect to
    wrt_text: Optional[str] = None  # how that argument is written (`state.params`)
    loss_reduced: Any = False  # the differentiated function reduces its value over an axis

    def reduced(self, axes) -> "AGrad":
        if isinstance(axes, Unknown) or axes is None:
            return dataclasses.replace(self, unknown_axis=True)
        return dataclasses.replace(self, axes=self.axes | axes)

    def is_reduced_over(self, axes) -> bool:
        if self.unknown_axis:
            return True
        if not axes or isinstance(axes, Unknown):
            return bool(self.axes)
        return bool(self.axes & axes)


@dataclass(frozen=True, eq=False)
class AGradFn:
    kind: str  # grad | value_and_grad | dynamic_scale
    call: cst.Call
    has_aux: Any
    argnums: Any
    axes: Any = None  # DynamicScale(axis_name=...) reduces inside
    fun: Optional[cst.BaseExpression] = None
    scope: Optional[Scope] = None


@dataclass(frozen=True)
class AParam:
    """A parameter of the step function, untouched (attributes of it included)."""

    name: str


@dataclass(eq=False)
class Sink:
    """Gradients reaching an update call."""

    kind: str  # update | apply_gradients | apply_updates
    call: cst.Call
    arg: cst.Arg
    value: Any  # AGrad (or other abstract value)
    scope: Scope  # the function the sink is written in
    origin: Optional[cst.CSTNode]  # the statement that last bound the argument name, if a Name


@dataclass(eq=False)
class GradReduction:
    """A collective applied to a gradient."""

    collective: cst.Call
    op: str
    axes: Any
    grad: AGrad
    scope: Scope


@dataclass(eq=False)
class GradFlow:
    function: Scope
    sinks: list[Sink] = field(default_factory=list)
    reductions: list[GradReduction] = field(default_factory=list)
    sources: list[cst.Call] = field(default_factory=list)  # grad_fn(...) calls

    def seen(self, node) -> bool:
        return any(s.call is node for s in self.sinks)


def _has_grad(value) -> bool:
    if isinstance(value, AGrad):
        return True
    if isinstance(value, (ATuple, AContainer)):
        return any(_has_grad(v) for v in value.items)
    return False


def _grads_in(value) -> list[AGrad]:
    if isinstance(value, AGrad):
        return [value]
    if isinstance(value, (ATuple, AContainer)):
        return [g for v in value.items for g in _grads_in(v)]
    return []


class GradInterpreter(_Interpreter):
    def __init__(self, pf: "ParallelFacts", flow: GradFlow) -> None:
        super().__init__(pf)
        self.flow = flow

    def opaque(self, values):
        if any(isinstance(v, AUnknown) for v in values):
            return UNK
        grads = [g for v in values for g in _grads_in(v)]
        if grads:
            return _merge_grads(grads)
        return CLEAN

    def binop(self, left, right):
        return self.opaque([left, right])

    def attribute(self, base, expr):
        if isinstance(base, (AGrad, AParam)):
            return base
        if isinstance(base, (ATuple, AContainer)):
            return UNK
        return base if isinstance(base, (AClean, AUnknown)) else UNK

    def subscript(self, base, expr):
        if isinstance(base, (AGrad, AParam, AClean, AUnknown)):
            return base
        if isinstance(base, AContainer):
            return self.opaque(list(base.items))
        return UNK

    def join2(self, a, b):
        if a is b or a == b:
            return a
        if isinstance(a, AGrad) and isinstance(b, AGrad):
            if a.axes == b.axes and a.unknown_axis == b.unknown_axis:
                return a
            if a.source is not b.source:
                # Each branch computes its own gradients (ImageNet's `if dynamic_scale:`
                # shape): a branch that never reduces them is wrong whichever is taken.
                unreduced = [g for g in (a, b) if not g.axes and not g.unknown_axis]
                if len(unreduced) == 1:
                    return unreduced[0]
            # One gradient, reduced under a condition only: the branch taken is unknown.
            return UNK
        if isinstance(a, ATuple) and isinstance(b, ATuple) and len(a.items) == len(b.items):
            return ATuple(tuple(self.join2(x, y) for x, y in zip(a.items, b.items)))
        return UNK

    def global_value(self, expr, env):
        _, bindings = lookup(expr.value, env.scope)
        if len(bindings) == 1 and bindings[0].kind == "def":
            fn = self.facts.raw.functions.get(bindings[0].node)
            if fn is not None:
                return ALocalFn(fn)
        return CLEAN  # imports, module constants, closures: not gradients

    # -- calls --------------------------------------------------------------
    def call(self, call: cst.Call, env: Frame) -> Any:
        facts = self.facts
        scope = env.scope
        func = call.func
        name = _canon(facts, func, scope)

        # grad transforms: jax.grad(f, ...) -> a gradient function
        if name in GRAD_TRANSFORMS:
            return self._grad_fn(GRAD_TRANSFORMS[name], call, env)
        if isinstance(func, cst.Attribute) and func.attr.value == "value_and_grad" and name is None:
            # flax DynamicScale.value_and_grad(fun, argnums, has_aux, axis_name)
            self.eval(func.value, env)
            return self._grad_fn("dynamic_scale", call, env)

        callee = self.eval(func, env) if name is None or isinstance(func, cst.Call) else None
        if isinstance(callee, AGradFn):
            return self._apply_grad_fn(callee, call, env)

        op = collective_op(name)
        if op is not None:
            return self._collective(op, call, env)

        if name in TREE_MAP:
            return self._tree_map(call, env)

        if name == "optax.apply_updates":
            values = self.eval_args(call, env)
            arg = call_arg(call, 1, "updates")
            if arg is not None:
                self._sink("apply_updates", call, arg, self.eval(arg.value, env), env)
            return CLEAN

        if isinstance(func, cst.Attribute) and name is None:
            method = func.attr.value
            receiver = callee if callee is not None else self.eval(func.value, env)
            if method == "apply_gradients":
                arg = _keyword(call, "grads")
                values = self.eval_args(call, env)
                if arg is not None:
                    self._sink("apply_gradients", call, arg, self.eval(arg.value, env), env)
                return CLEAN
            if method == "update" and len(call.args) >= 2 and not _has_star(call):
                values = self.eval_args(call, env)
                first = call.args[0]
                if first.keyword is None or first.keyword.value in ("updates", "grads"):
                    self._sink("update", call, first, values[0], env)
                return ATuple((CLEAN, CLEAN))
            values = self.eval_args(call, env)
            if isinstance(receiver, AGrad):
                return receiver  # grads.unfreeze(), g.astype(...)
            if any(_has_grad(v) for v in values):
                return UNK
            return CLEAN if receiver in (CLEAN,) or isinstance(receiver, AParam) else UNK

        if isinstance(callee, ALocalFn):
            return self.call_local(callee, call, env)

        values = self.eval_args(call, env)
        if name is not None and (name.startswith(_NUMERIC_PREFIXES) or (name.startswith("jax.lax.") and op is None)):
            return self.opaque(values)
        if name in PARTIAL:
            return UNK
        if isinstance(func, cst.Name) and name is None and func.value in ("float", "int", "abs", "len", "sum", "max", "min", "print", "range"):
            return self.opaque(values) if func.value in ("abs", "sum", "max", "min") else CLEAN
        if any(_has_grad(v) or isinstance(v, AUnknown) for v in values):
            return UNK
        return CLEAN if callee is None or callee == CLEAN else UNK

    def _grad_fn(self, kind: str, call: cst.Call, env: Frame) -> Any:
        self.eval_args(call, env)
        if _has_star(call):
            return UNK
        fun = call_arg(call, 0, "fun" if kind != "dynamic_scale" else "fun")
        if fun is None:
            fun = call_arg(call, 0, "f")
        has_aux_arg = call_arg(call, 2, "has_aux")
        has_aux = value_of(has_aux_arg.value, env.scope) if has_aux_arg is not None else False
        argnums_arg = call_arg(call, 1, "argnums")
        argnums = value_of(argnums_arg.value, env.scope) if argnums_arg is not None else 0
        axes = None
        axis_arg = call_arg(call, 3 if kind == "dynamic_scale" else None, "axis_name")
        if axis_arg is not None:
            axes = axis_set(value_of(axis_arg.value, env.scope))
        return AGradFn(kind, call, has_aux, argnums, axes, fun.value if fun is not None else None, env.scope)

    def _loss_reduced(self, fn: AGradFn) -> Any:
        """Whether the differentiated function reduces its value with a collective:
        the axes, True (unknown axis), or False."""
        if fn.fun is None or fn.scope is None:
            return Unknown("no function")
        scope, _, _ = self.pf.sites.resolve_function(fn.fun, fn.scope)
        if scope is None:
            return Unknown("not a local function")
        axes: set = set()
        for collective in self.pf.collectives_in(scope, transitive=True):
            if collective.op in ("pmean", "psum"):
                if isinstance(collective.axes, frozenset):
                    axes |= collective.axes
                else:
                    return True
        return frozenset(axes) if axes else False

    def _apply_grad_fn(self, fn: AGradFn, call: cst.Call, env: Frame) -> Any:
        values = self.eval_args(call, env)
        self.flow.sources.append(call)
        wrt = wrt_text = None
        argnums = fn.argnums
        if isinstance(argnums, int) and not isinstance(argnums, bool) and not _has_star(call):
            pairs = [(a, v) for a, v in zip(call.args, values) if a.keyword is None]
            if argnums < len(pairs) and isinstance(pairs[argnums][1], AParam):
                wrt = pairs[argnums][1].name
                wrt_text = code_of(pairs[argnums][0].value)
        grad = AGrad(call, wrt=wrt, loss_reduced=self._loss_reduced(fn), wrt_text=wrt_text)
        if fn.axes is not None:
            grad = grad.reduced(fn.axes)
        if fn.kind == "dynamic_scale":
            return ATuple((CLEAN, CLEAN, CLEAN, grad))
        if fn.kind == "value_and_grad":
            return ATuple((CLEAN, grad))
        if fn.has_aux is True:
            return ATuple((grad, CLEAN))
        if fn.has_aux is False or fn.has_aux is None:
            return grad
        return UNK

    def _collective(self, op: str, call: cst.Call, env: Frame) -> Any:
        values = self.eval_args(call, env)
        position = COLLECTIVES.get(op)
        axis_arg = call_arg(call, position, "axis_name")
        axes = axis_set(value_of(axis_arg.value, env.scope)) if axis_arg is not None else Unknown("no axis")
        operand = call_arg(call, 0, "x")
        value = self.eval(operand.value, env) if operand is not None else CLEAN
        if op not in REDUCTIONS:
            return value if op in ("pcast", "ppermute", "pshuffle", "pswapaxes", "pbroadcast", "all_to_all") and not isinstance(value, AParam) else CLEAN
        grads = _grads_in(value)
        for grad in grads:
            self.flow.reductions.append(GradReduction(call, op, axes, grad, env.scope))
        return _map_grads(value, lambda g: g.reduced(axes))

    def _tree_map(self, call: cst.Call, env: Frame) -> Any:
        positional = _positional(call)
        if _has_star(call) or not positional:
            self.eval_args(call, env)
            return UNK
        fn_value = self.eval(positional[0].value, env)
        trees = [self.eval(a.value, env) for a in positional[1:]]
        for a in call.args:
            if a.keyword is not None:
                self.eval(a.value, env)
        leaves = [_leaf(t) for t in trees]
        if isinstance(fn_value, ALocalFn):
            return self._run_with(fn_value, leaves)
        fname = _canon(self.facts, positional[0].value, env.scope)
        if fname is not None and (fname.startswith(_NUMERIC_PREFIXES) or fname.startswith("jax.lax.")):
            op = collective_op(fname)
            if op is not None:
                return UNK
            return self.opaque(leaves)
        if isinstance(fn_value, AGradFn) or any(isinstance(v, AUnknown) for v in leaves):
            return UNK
        return UNK if any(_has_grad(v) for v in leaves) else CLEAN

    def _run_with(self, fn: ALocalFn, leaves: list) -> Any:
        scope = fn.scope
        node = scope.node
        params = node.params
        ordered = [p.name.value for p in list(params.posonly_params) + list(params.params)]
        values = {name: CLEAN for name in scope.params}
        for name, value in zip(ordered, list(fn.bound) + leaves):
            values[name] = value
        return self.run_memo(scope, values)

    def _sink(self, kind: str, call: cst.Call, arg: cst.Arg, value, env: Frame) -> None:
        if any(s.call is call for s in self.flow.sinks):
            return
        origin = env.origins.get(arg.value.value) if isinstance(arg.value, cst.Name) else None
        self.flow.sinks.append(Sink(kind, call, arg, value, env.scope, origin))


def _leaf(value):
    if isinstance(value, (ATuple, AContainer)):
        return _merge_values(list(value.items))
    return value


def _merge_values(values: list):
    if any(isinstance(v, AUnknown) for v in values):
        return UNK
    grads = [g for v in values for g in _grads_in(v)]
    return _merge_grads(grads) if grads else CLEAN


def _merge_grads(grads: list[AGrad]) -> AGrad:
    first = grads[0]
    axes = first.axes
    unknown = first.unknown_axis
    for g in grads[1:]:
        axes = axes & g.axes
        unknown = unknown and g.unknown_axis
    return dataclasses.replace(first, axes=axes, unknown_axis=unknown)


def _map_grads(value, fn):
    if isinstance(value, AGrad):
        return fn(value)
    if isinstance(value, ATuple):
        return ATuple(tuple(_map_grads(v, fn) for v in value.items))
    if isinstance(value, AContainer):
        return AContainer(tuple(_map_grads(v, fn) for v in value.items))
    return value


# ---------------------------------------------------------------------------
# Replication (host side)


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


class HostInterpreter(_Interpreter):
    MAX_DEPTH = 4

    def __init__(self, pf: "ParallelFacts") -> None:
        super().__init__(pf)
        self.crossings: list[Crossing] = []
        self.saves: list[ReplicatedSave] = []
        self._seen_crossings: set = set()
        self._seen_saves: set = set()

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
        return UNK if not isinstance(base, AClean) else UNK

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
            name = _canon(self.facts, expr.func, scope)
            if name is not None and _ORBAX_OBJECT.match(name):
                return AOrbax("manager" if name.endswith("CheckpointManager") else "checkpointer")
        return None

    # -- calls --------------------------------------------------------------
    def call(self, call: cst.Call, env: Frame) -> Any:
        facts = self.facts
        scope = env.scope
        func = call.func
        name = _canon(facts, func, scope)
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
            if method == "create" and self._is_train_state_class(func.value, scope):
                return AFresh("train_state", call)
            if method in ("init", "restore") and any(_repl_in(v) for v in values):
                return UNK  # built from, or restored into, replicated values
            if method == "init" and not isinstance(receiver, (ARepl, AMapped)):
                return AFresh("init", call)
            if method == "restore" and (isinstance(receiver, AOrbax) or _keyword(call, "args") is not None):
                return AFresh("restore", call)
            if method in ("replace", "apply_gradients", "copy", "unfreeze", "block_until_ready") and isinstance(receiver, (AFresh, ARepl, ASingle)):
                return receiver
            return UNK
        if isinstance(callee, ALocalFn):
            return self.call_local(callee, call, env, values)
        return UNK

    def _is_train_state_class(self, expr, scope) -> bool:
        if not isinstance(expr, cst.Name):
            return False
        _, bindings = lookup(expr.value, scope)
        if len(bindings) != 1 or bindings[0].kind != "class":
            return False
        cls: cst.ClassDef = bindings[0].node
        for base in cls.bases:
            base_name = _canon(self.facts, base.value, bindings[0].scope)
            if base_name is not None and base_name.endswith("TrainState"):
                return True
        return False

    def _tree_map(self, call, env, values) -> Any:
        positional = _positional(call)
        if not positional or _has_star(call):
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
            args_kw = _keyword(call, "args")
            if args_kw is not None:
                return [(e, "orbax") for e in self._orbax_items(args_kw.value, scope)]
            receiver = self.eval(func.value, env)
            if isinstance(receiver, AOrbax):
                positional = _positional(call)
                if len(positional) >= 2:
                    return [(positional[1].value, "orbax")]
                item = _keyword(call, "items") or _keyword(call, "item")
                return [(item.value, "orbax")] if item is not None else []
        return []

    def _orbax_items(self, expr, scope, depth: int = 0) -> list[cst.BaseExpression]:
        if depth > 4 or not isinstance(expr, cst.Call):
            return []
        name = _canon(self.facts, expr.func, scope)
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


def _repl_in(value) -> list[ARepl]:
    if isinstance(value, ARepl):
        return [value]
    if isinstance(value, (ATuple, AContainer)):
        return [r for v in value.items for r in _repl_in(v)]
    return []


# ---------------------------------------------------------------------------
# The facts object


@dataclass(eq=False)
class Reference:
    """A local function named inside another function."""

    name: cst.Name
    function: Scope
    holders: list  # calls that receive it (or a lambda around it) as a function
    direct: bool  # the name is called right there: f(...)
    escaped: bool  # stored, returned or otherwise used as a value: cannot be followed


@dataclass(eq=False)
class UnboundUse:
    collective: Collective
    root: MappedStep  # the pmap/shard_map site whose trace reaches it
    missing: frozenset  # axis names not bound there
    bound: frozenset  # names bound there
    path: list  # the names followed from the mapped function to the collective


class ParallelFacts:
    def __init__(self, facts) -> None:
        self.facts = facts
        self.raw = facts.raw
        self.sites = _SiteFinder(facts)
        self.steps: list[MappedStep] = self.sites.find()
        self.step_by_site: dict[cst.CSTNode, MappedStep] = {s.site: s for s in self.steps if s.decorated is None}
        self._decorated: dict[Scope, MappedStep] = {}
        for s in self.steps:
            if s.decorated is not None and s.function is not None and s.kind in ("pmap", "shard_map"):
                self._decorated.setdefault(s.function, s)
        self._flows: dict[Scope, GradFlow] = {}
        self._collectives: Optional[list[Collective]] = None
        self._host: Optional[HostInterpreter] = None
        self._references: dict[Scope, list] = {}
        self._traced_cache: Optional[set] = None
        self._classified = False
        self._unbound: Optional[list] = None

    # -- steps --------------------------------------------------------------
    @property
    def pmap_steps(self) -> list[MappedStep]:
        return [s for s in self.steps if s.kind == "pmap"]

    def steps_of(self, function: Scope) -> list[MappedStep]:
        return [s for s in self.steps if s.function is function]

    def decorated_step(self, function: Scope) -> Optional[MappedStep]:
        return self._decorated.get(function)

    # -- collectives --------------------------------------------------------
    @property
    def collectives(self) -> list[Collective]:
        if self._collectives is None:
            out = []
            for record in self.raw.calls:
                op = collective_op(self.facts.callee(record))
                if op is None:
                    continue
                call = record.node
                axis_arg = call_arg(call, COLLECTIVES[op], "axis_name") if not _has_star(call) else None
                if axis_arg is not None:
                    axes = axis_set(value_of(axis_arg.value, record.scope))
                elif _has_star(call):
                    axes = Unknown("* arguments")
                else:
                    axes = None
                operand = call_arg(call, 0, "x") if COLLECTIVES[op] != 0 else None
                out.append(Collective(op, record, axis_arg, axes, operand.value if operand is not None else None))
            self._collectives = out
        return self._collectives

    @property
    def classified_collectives(self) -> list[Collective]:
        """The collectives, each with what it reduces: `grads` when the gradient
        data-flow of a mapped step reaches its operand, else judged by the operand's
        name (`loss`, `metrics`, `grads`) or `other`."""
        collectives = self.collectives
        if not self._classified:
            reduced = set()
            for step in self.steps:
                if step.function is not None:
                    reduced.update(r.collective for r in self.grad_flow(step.function).reductions)
            for collective in collectives:
                collective.reduces = "grads" if collective.call in reduced else _classify_operand(collective.operand)
            self._classified = True
        return collectives

    @staticmethod
    def belongs(scope: Scope, function: Scope) -> bool:
        """Whether code in `scope` runs as part of `function`: the function itself or a
        lambda/comprehension inside it (nested defs are separate functions)."""
        while True:
            if scope is function:
                return True
            if scope.kind in ("lambda", "comprehension") and scope.parent is not None:
                scope = scope.parent
                continue
            return False

    def collectives_in(self, function: Scope, transitive: bool = False) -> list[Collective]:
        functions = self.reachable(function) if transitive else [function]
        return [c for c in self.collectives if any(self.belongs(c.record.scope, f) for f in functions)]

    # -- references and reachability ----------------------------------------
    def references(self, function: Scope) -> list["Reference"]:
        """Names inside `function` (its lambdas included, nested defs excluded) that
        refer to local functions, with the calls that receive them as functions."""
        cached = self._references.get(function)
        if cached is not None:
            return cached
        out: list[Reference] = []
        node = function.node
        body = node.body if isinstance(node, (cst.FunctionDef, cst.Lambda)) else None
        if body is not None:
            try:
                self._collect_refs(body, function, (), False, False, out)
            except RecursionError:  # pathological nesting: keep what was found
                pass
        self._references[function] = out
        return out

    def _collect_refs(self, node, function: Scope, chain: tuple, top: bool, callee: bool, out: list) -> None:
        # chain: ((call, confirmed), ...) outer to inner: calls whose argument holds
        # `node`; confirmed once we know they receive a function containing it.
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return
        if isinstance(node, cst.Name):
            _, bindings = lookup(node.value, function)
            if len(bindings) == 1 and bindings[0].kind == "def":
                fn = self.raw.functions.get(bindings[0].node)
                if fn is not None and fn is not function:
                    holders = [c for c, confirmed in chain if confirmed]
                    if top and chain:
                        holders = [c for c, _ in chain if _ or c is chain[-1][0]]
                    escaped = not callee and not (top and chain)
                    out.append(Reference(node, fn, holders, callee, escaped))
            return
        if isinstance(node, cst.Lambda):
            scope = self.sites.lambda_scopes.get(node)
            if top and chain and scope is not None:
                # A lambda handed to a call (vmap, tree.map, an unknown wrapper...): a
                # function of its own, traced in whatever the call adds.
                holders = [c for c, confirmed in chain if confirmed] + [chain[-1][0]]
                out.append(Reference(cst.Name("lambda"), scope, holders, False, False))
                return
            confirmed = tuple((c, True) for c, _ in chain)
            self._collect_refs(node.body, function, confirmed, False, False, out)
            return
        if isinstance(node, cst.Call):
            name = _canon(self.facts, node.func, function)
            if name in PARTIAL:
                positional = _positional(node)
                for arg in node.args:
                    if positional and arg is positional[0]:
                        self._collect_refs(arg.value, function, chain, top, False, out)
                    else:
                        self._collect_refs(arg.value, function, chain + ((node, False),), True, False, out)
                return
            self._collect_refs(node.func, function, chain, False, True, out)
            for arg in node.args:
                self._collect_refs(arg.value, function, chain + ((node, False),), True, False, out)
            return
        for child in iter_children(node):
            self._collect_refs(child, function, chain, False, False, out)

    def reachable(self, function: Scope) -> list[Scope]:
        seen = [function]
        i = 0
        while i < len(seen) and i < 64:
            for ref in self.references(seen[i]):
                if ref.function not in seen:
                    seen.append(ref.function)
            i += 1
        return seen

    def _traced(self) -> set:
        if self._traced_cache is None:
            traced: set = set()
            for step in self.steps:
                if step.function is not None:
                    traced.update(self.reachable(step.function))
            self._traced_cache = traced
        return self._traced_cache

    def is_nested_site(self, step: MappedStep) -> bool:
        """Whether the site is written inside a function that some mapped step traces."""
        traced = self._traced()
        scope: Optional[Scope] = step.scope
        while scope is not None:
            if scope in traced:
                return True
            scope = scope.parent
        return False

    def under_if(self, record: CallRecord) -> bool:
        stmt = record.statement
        parents = self.raw.parent_stmt
        while stmt in parents:
            parent = parents[stmt]
            if isinstance(parent, cst.If):
                return True
            if isinstance(parent, (cst.FunctionDef, cst.Module)):
                return False
            stmt = parent
        return False

    @staticmethod
    def _inside(scope: Scope, lambdas: set, function: Scope) -> bool:
        """Whether `scope` sits in one of `lambdas` (below `function`)."""
        while scope is not None and scope is not function:
            if scope in lambdas:
                return True
            scope = scope.parent
        return False

    def _binder_axes(self, call: cst.Call, scope: Scope) -> Any:
        """What a call that receives a function adds to the axis environment:
        frozenset (possibly empty), or Unknown when it cannot be known."""
        site = self.step_by_site.get(call)
        if site is not None:
            if site.kind == "jit":
                return frozenset()
            axes = site.axis_names
            return frozenset() if axes is None else axes
        name = _canon(self.facts, call.func, scope)
        if name in PASS_THROUGH:
            return frozenset()
        axis = _keyword(call, "axis_name")
        if axis is not None:
            return axis_set(value_of(axis.value, scope)) or frozenset()
        return Unknown(f"passed to {code_of(call.func)[:40]}")

    def unbound_axis_uses(self) -> list["UnboundUse"]:
        """Collectives naming an axis that the pmap/shard_map site tracing them does not
        bind (nor any vmap/pmap/shard_map between the site and the collective)."""
        if self._unbound is not None:
            return self._unbound
        out: list[UnboundUse] = []
        seen: set = set()
        for step in self.steps:
            if step.kind not in ("pmap", "shard_map") or step.function is None:
                continue
            if self.is_nested_site(step):
                continue
            env = step.axis_names
            if isinstance(env, Unknown):
                continue
            self._visit(step.function, env or frozenset(), step, [], out, seen, set())
        self._unbound = out
        return out

    def _visit(self, function: Scope, env: frozenset, root: MappedStep, path: list, out: list, seen: set, visiting: set) -> None:
        key = (function, env)
        if key in visiting or len(visiting) > 200:
            return
        visiting.add(key)
        refs = self.references(function)
        separate = {ref.function for ref in refs if ref.function.kind == "lambda"}
        for collective in self.collectives_in(function):
            if not isinstance(collective.axes, frozenset) or self._inside(collective.record.scope, separate, function):
                continue
            missing = collective.axes - env
            if missing and collective.call not in seen and not self.under_if(collective.record):
                seen.add(collective.call)
                out.append(UnboundUse(collective, root, frozenset(missing), env, list(path)))
        for ref in refs:
            if ref.escaped:
                continue
            new_env: Any = env
            for holder in ref.holders:
                added = self._binder_axes(holder, function)
                if isinstance(added, Unknown):
                    new_env = added
                    break
                new_env = new_env | added
            if isinstance(new_env, Unknown):
                continue
            for step in self.steps:
                if step.decorated is not None and step.function is ref.function and step.kind != "jit":
                    axes = step.axis_names
                    if isinstance(axes, Unknown):
                        new_env = axes
                        break
                    new_env = new_env | (axes or frozenset())
            if isinstance(new_env, Unknown):
                continue
            self._visit(ref.function, new_env, root, path + [ref.name], out, seen, visiting)

    # -- gradient flow ------------------------------------------------------
    def grad_flow(self, function: Scope) -> GradFlow:
        flow = self._flows.get(function)
        if flow is None:
            flow = GradFlow(function)
            self._flows[function] = flow
            interp = GradInterpreter(self, flow)
            args = {name: AParam(name) for name in function.params}
            try:
                interp.run(function, args)
            except RecursionError:  # pragma: no cover - pathological nesting
                pass
        return flow

    # -- host-side replication ----------------------------------------------
    @property
    def host(self) -> HostInterpreter:
        if self._host is None:
            interp = HostInterpreter(self)
            if not self.steps and not self._may_replicate():
                # Crossings need a pmapped call and replicated saves a replicated value
                # (a replicate call or a pmap output): neither can occur, skip the walk.
                self._host = interp
                return interp
            called = self._called_functions()
            roots = [self.raw.module_scope] + [s for s in self.raw.functions.values() if s not in called]
            for scope in roots:
                try:
                    interp.run(scope, {name: UNK for name in scope.params})
                except RecursionError:  # pathological nesting: what was found so far stands
                    pass
            self._host = interp
        return self._host

    def _may_replicate(self) -> bool:
        """Whether the text spells any replicating function (an alias or attribute
        access still spells its last name, or imports it)."""
        text = self.facts.text or ""
        return any(name.rsplit(".", 1)[-1] in text for name in REPLICATE)

    def _called_functions(self) -> set:
        """Local functions called by name somewhere in the file: the host interpreter
        reaches them from their callers, with the callers' values."""
        called = set()
        for record in self.raw.calls:
            func = record.node.func
            if isinstance(func, cst.Name):
                _, bindings = lookup(func.value, record.scope)
                if len(bindings) == 1 and bindings[0].kind == "def":
                    fn = self.raw.functions.get(bindings[0].node)
                    if fn is not None and fn is not record.scope:
                        called.add(fn)
        return called

    @property
    def crossings(self) -> list[Crossing]:
        """Values passed to pmapped callables (which state crosses into a pmapped call)."""
        return self.host.crossings

    @property
    def replicated_saves(self) -> list[ReplicatedSave]:
        return self.host.saves

    # -- data parallelism ---------------------------------------------------
    def is_data_parallel(self, step: MappedStep) -> bool:
        """A pmap whose devices hold copies of one model: a replicated argument, host
        state broadcast with in_axes=None, a collective over its axis, or an axis
        named like a data axis. (A pmap over independent models, an ensemble, has
        none of these.)"""
        if step.kind != "pmap":
            return False
        axes = step.axis_names
        if isinstance(axes, frozenset) and axes & DATA_PARALLEL_AXES:
            return True
        for crossing in self.crossings:
            if crossing.step is not step:
                continue
            if isinstance(crossing.value, ARepl) and crossing.value.how == "replicate":
                return True  # one model copied to every device
            if crossing.axis is None and isinstance(crossing.value, AFresh):
                return True  # one host-side state broadcast with in_axes=None
        if step.function is not None and isinstance(axes, frozenset):
            for collective in self.collectives_in(step.function, transitive=True):
                if isinstance(collective.axes, frozenset) and collective.axes & axes:
                    return True
        return False

    def train_steps(self) -> list[MappedStep]:
        """pmapped data-parallel steps that update parameters."""
        out = []
        for step in self.pmap_steps:
            if step.function is None or not self.is_data_parallel(step):
                continue
            if self.grad_flow(step.function).sinks:
                out.append(step)
        return out


def parallel_facts(facts) -> ParallelFacts:
    return facts.memo("parallel", ParallelFacts)


def crossings(facts) -> list[Crossing]:
    """Which values cross into a pmapped call, with their replication state."""
    return parallel_facts(facts).crossings


# ---------------------------------------------------------------------------
# Device counts and per-device batches (for the linear scaling rule)


def mentions_device_count(facts, expr, scope: Scope, names: Iterable[str] = DEFAULT_DEVICE_COUNT_NAMES, depth: int = 0) -> bool:
    """Whether an expression involves the device count: jax.device_count(),
    len(jax.devices()), or a name that holds or is named like it."""
    if expr is None or depth > 6:
        return False
    names = tuple(names)
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call):
            name = _canon(facts, node.func, scope)
            if name in DEVICE_COUNT_CALLS:
                return True
        if isinstance(node, cst.Name):
            if node.value.lower() in names:
                return True
            _, bindings = lookup(node.value, scope)
            if len(bindings) == 1 and bindings[0].value is not None and bindings[0].kind in ("assign", "annassign", "unpack"):
                if mentions_device_count(facts, bindings[0].value, bindings[0].scope, names, depth + 1):
                    return True
            continue
        if isinstance(node, cst.Attribute):
            if node.attr.value.lower() in names:
                return True
        if isinstance(node, cst.Lambda):
            continue
        stack.extend(iter_children(node))
    return False


@dataclass
class BatchEvidence:
    per_device: Optional[cst.BaseExpression] = field(repr=False)  # the per-device batch expression
    scope: Optional[Scope] = field(repr=False)
    node: Optional[cst.CSTNode] = field(repr=False)  # where the evidence is written
    value: Any  # its static value, or Unknown
    declared: bool = False


_BATCH = re.compile(r"batch", re.IGNORECASE)


def _name_of(expr) -> Optional[str]:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


def _divides_by_devices(facts, expr, scope, names) -> bool:
    for node in _walk_expr(expr):
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Divide, cst.FloorDivide)):
            if mentions_device_count(facts, node.right, scope, names):
                return True
    return False


def _walk_expr(expr) -> Iterator[cst.CSTNode]:
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, cst.Lambda):
            continue
        stack.extend(iter_children(node))


def per_device_batch(facts, batch_patterns: Iterable[str] = DEFAULT_PER_DEVICE_BATCH_NAMES, device_names: Iterable[str] = DEFAULT_DEVICE_COUNT_NAMES) -> Optional[BatchEvidence]:
    """Evidence that the script keeps a fixed per-device batch (so the global batch
    grows with the device count), or None. Any sign of a fixed global batch split
    across devices (`global // jax.device_count()`, `reshape((n_devices, -1, ...))`)
    makes the answer None."""
    declared = _context_value(facts, "batch_per_device")
    if declared is not None and declared.source != "inferred":
        # Only a declared value: an inferred per-device batch may itself be a fixed
        # global batch divided by the device count, which this function rules out below.
        return BatchEvidence(None, None, None, declared.value, declared=True)
    device_names = tuple(n.lower() for n in device_names)
    pattern = re.compile("|".join(f"(?:{p})" for p in batch_patterns), re.IGNORECASE) if batch_patterns else None
    evidence: list[BatchEvidence] = []
    for scope in facts.raw.scopes:
        for name, bindings in scope.bindings.items():
            for binding in bindings:
                if binding.value is None or binding.kind not in ("assign", "annassign"):
                    continue
                if _BATCH.search(name) and _divides_by_devices(facts, binding.value, binding.scope, device_names):
                    return None  # a global batch split across devices
                if pattern is not None and pattern.search(name) and not binding.index:
                    if mentions_device_count(facts, binding.value, binding.scope, device_names):
                        return None
                    evidence.append(BatchEvidence(binding.value, binding.scope, binding.node, value_of(binding.value, binding.scope)))
    for record in facts.raw.calls:
        for arg in record.node.args:
            for node in _walk_expr(arg.value):
                if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
                    for side, other in ((node.left, node.right), (node.right, node.left)):
                        name = _name_of(side)
                        if name and _BATCH.search(name) and mentions_device_count(facts, other, record.scope, device_names) and not mentions_device_count(facts, side, record.scope, device_names):
                            evidence.append(BatchEvidence(side, record.scope, node, value_of(side, record.scope)))
                if isinstance(node, cst.Tuple) and len(node.elements) >= 2:
                    first, second = node.elements[0].value, node.elements[1].value
                    if not mentions_device_count(facts, first, record.scope, device_names):
                        continue
                    if _divides_by_devices(facts, second, record.scope, device_names):
                        return None
                    second_value = value_of(second, record.scope)
                    if second_value == -1:
                        return None
                    name = _name_of(second)
                    if name and _BATCH.search(name):
                        evidence.append(BatchEvidence(second, record.scope, node, second_value))
    for scope in facts.raw.scopes:
        for name, bindings in scope.bindings.items():
            if not _BATCH.search(name):
                continue
            for binding in bindings:
                if binding.value is None or binding.kind not in ("assign", "annassign"):
                    continue
                value = binding.value
                if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
                    for side, other in ((value.left, value.right), (value.right, value.left)):
                        side_name = _name_of(side)
                        if side_name and _BATCH.search(side_name) and mentions_device_count(facts, other, binding.scope, device_names):
                            evidence.append(BatchEvidence(side, binding.scope, value, value_of(side, binding.scope)))
    if not evidence:
        return None
    known = [e for e in evidence if isinstance(e.value, int) and not isinstance(e.value, bool)]
    return known[0] if known else evidence[0]


def _context_value(facts, name: str):
    """A run-context value (declared or inferred), or None; never fails the rule."""
    try:
        context = facts.run_context
        return context.get(name) if context is not None else None
    except Exception:  # the run context is another family's work: degrade to unknown
        return None


_XLA_DEVICES = re.compile(r"--xla_force_host_platform_device_count=(\d+)")


def known_device_count(facts) -> Optional[tuple[int, str]]:
    """(count, where it comes from) when the device count is declared or set in the
    file through XLA_FLAGS; None otherwise."""
    declared = _context_value(facts, "devices")
    if declared is not None and isinstance(declared.value, int) and not isinstance(declared.value, bool):
        if declared.source == "inferred":
            return declared.value, f"from {declared.detail}" if declared.detail else "inferred"
        return declared.value, f"declared in {declared.source}"
    text = facts.text
    if text is None:
        return None
    match = _XLA_DEVICES.search(text)
    if match is not None:
        return int(match.group(1)), "XLA_FLAGS in this file"
    return None
