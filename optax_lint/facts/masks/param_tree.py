"""The parameter tree a file's model produces, read from its flax modules.

Mask rules need the names the params will have: flax linen names a submodule by its
`name=` or `ClassName_<n>` in call order (`Dense_0`, `LayerNorm_1`), a lifted
`nn.scan(Block, ...)` becomes `ScanBlock_0` whose leaves get a leading layer axis;
nnx names submodules by attribute. Leaves are synthetic (shapes of the right rank,
not the real sizes) and carry a role: kernel, bias, scale or embedding.

`complete` is True only when every submodule call was understood; rules that need
exact names (a literal that matches none of them) act only on complete trees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from optax_lint.syntax.arguments import call_arg_expr
from optax_lint.syntax.names import lookup, qualified_name
from optax_lint.syntax.values import value_of
from optax_lint.syntax.walker import walk

_DENSE = (("kernel", (8, 8), "kernel"), ("bias", (8,), "bias"))
_NORM = (("scale", (8,), "scale"), ("bias", (8,), "bias"))
_ATTN_IN = (("kernel", (8, 2, 4), "kernel"), ("bias", (2, 4), "bias"))
_ATTN_OUT = (("kernel", (2, 4, 8), "kernel"), ("bias", (8,), "bias"))
_ATTENTION = {"query": _ATTN_IN, "key": _ATTN_IN, "value": _ATTN_IN, "out": _ATTN_OUT}

# flax layer -> its params: a tuple of (name, shape, role), or {submodule: tuple}
LAYERS: dict[str, object] = {
    "Dense": _DENSE, "DenseGeneral": _DENSE, "Linear": _DENSE, "LinearGeneral": _DENSE,
    "Conv": (("kernel", (3, 3, 8, 8), "kernel"), ("bias", (8,), "bias")),
    "Embed": (("embedding", (16, 8), "embedding"),),
    "LayerNorm": _NORM, "GroupNorm": _NORM, "BatchNorm": _NORM, "RMSNorm": (("scale", (8,), "scale"),),
    "MultiHeadDotProductAttention": _ATTENTION, "SelfAttention": _ATTENTION, "MultiHeadAttention": _ATTENTION,
}
_PARAMLESS = frozenset({"Dropout", "Rngs", "Param", "Variable", "BatchStat"})
LINEN_MODULE = ("flax.linen.Module", "flax.linen.module.Module")
NNX_MODULE = ("flax.nnx.Module",)
_LIFTS = {"scan": "Scan", "remat": "Checkpoint", "checkpoint": "Checkpoint", "vmap": "Vmap", "jit": "Jit"}
# Leaf names each framework gives its parameters.
LEAF_NAMES = {
    "flax": ("kernel", "bias", "scale", "embedding"),
    "haiku": ("w", "b", "scale", "offset", "embeddings"),
}
_MAX_DEPTH = 8


@dataclass(frozen=True)
class ParamLeaf:
    names: tuple[str, ...]
    shape: tuple[int, ...]
    role: str  # kernel | bias | scale | embedding | other
    zero_centred: bool = False  # a scale initialised to zeros (applied as 1 + scale)


@dataclass
class ParamTree:
    leaves: list[ParamLeaf]
    complete: bool
    root: str  # the model class it was read from, or "<synthetic>"
    framework: str  # linen | nnx | <synthetic>
    scanned: bool = False  # some leaves carry a stacked layer axis
    # Every layer that creates params was understood, so the roles of all leaves are
    # known (names may still be unknown: a layer built in a loop).
    roles_known: bool = False

    def top_level(self) -> set[str]:
        return {leaf.names[0] for leaf in self.leaves if leaf.names}

    def decay_pulls_to_zero_output(self) -> Optional[bool]:
        """Whether decaying every leaf decays a bias or a norm scale that multiplies as
        is (towards a layer that outputs zeros); False when all layers are bias-free and
        every scale is zero-centred (decay pulls it towards the identity); None when
        some layer was not understood."""
        if not self.roles_known:
            return None
        return any(leaf.role == "bias" or (leaf.role == "scale" and not leaf.zero_centred) for leaf in self.leaves)


@dataclass
class _Class:
    node: cst.ClassDef
    framework: str  # linen | nnx
    children: list = field(default_factory=list)


def frameworks(facts) -> set[str]:
    """Which parameter-naming frameworks the module imports: flax, haiku, torch."""
    found = set()
    for scope in (facts.raw.module_scope,):
        for bindings in scope.bindings.values():
            for b in bindings:
                qual = b.qualname or ""
                if b.kind != "import":
                    continue
                top = qual.split(".")[0]
                if top in ("flax", "haiku", "torch", "equinox", "transformers"):
                    found.add(top)
    return found



def synthetic_tree(scanned: bool = False) -> ParamTree:
    """A small Transformer's params with flax's default names, for when no model is visible."""
    block = [
        ParamLeaf(("Dense_0", "kernel"), (8, 8), "kernel"), ParamLeaf(("Dense_0", "bias"), (8,), "bias"),
        ParamLeaf(("LayerNorm_0", "scale"), (8,), "scale"), ParamLeaf(("LayerNorm_0", "bias"), (8,), "bias"),
    ]
    if scanned:
        block = [ParamLeaf(("ScanBlock_0",) + leaf.names, (4,) + leaf.shape, leaf.role) for leaf in block]
    leaves = [ParamLeaf(("Embed_0", "embedding"), (16, 8), "embedding")] + block + [
        ParamLeaf(("LayerNorm_1", "scale"), (8,), "scale"), ParamLeaf(("LayerNorm_1", "bias"), (8,), "bias"),
    ]
    return ParamTree(leaves, False, "<synthetic>", "<synthetic>", scanned)


def build_model_tree(facts) -> Optional[ParamTree]:
    classes = _module_classes(facts)
    if not classes:
        return None
    reader = _TreeReader(facts, classes)
    used = set()
    for name in classes:
        used |= reader.used_classes(name)
    roots = [name for name in classes if name not in used]
    everything = [reader.tree(name) for name in roots]
    trees = [t for t in everything if t.leaves]
    if not trees:
        return None
    best = max(trees, key=lambda t: len(t.leaves))
    if len(trees) > 1 or any(not t.complete for t in everything if t is not best):
        # Another root model whose layers were not all understood may hold any name.
        best.complete = False
        best.roles_known = False
    return best


def _module_classes(facts) -> dict[str, _Class]:
    scope = facts.raw.module_scope
    out: dict[str, _Class] = {}
    for statement in facts.module.body:
        if not isinstance(statement, cst.ClassDef):
            continue
        for base in statement.bases:
            qual = qualified_name(base.value, scope)
            if qual in LINEN_MODULE:
                out[statement.name.value] = _Class(statement, "linen")
            elif qual in NNX_MODULE:
                out[statement.name.value] = _Class(statement, "nnx")
            elif isinstance(base.value, cst.Name) and base.value.value in out:
                out[statement.name.value] = _Class(statement, out[base.value.value].framework)
    return out


class _TreeReader:
    def __init__(self, facts, classes: dict[str, _Class]) -> None:
        self.facts = facts
        self.classes = classes
        self.scope = facts.raw.module_scope

    def _methods(self, cls: _Class) -> list[cst.FunctionDef]:
        body = cls.node.body.body if isinstance(cls.node.body, cst.IndentedBlock) else ()
        wanted = ("__call__", "setup") if cls.framework == "linen" else ("__init__",)
        out = []
        for statement in body:
            if isinstance(statement, cst.FunctionDef):
                compact = any(qualified_name(d.decorator, self.scope) in ("flax.linen.compact",) for d in statement.decorators)
                if statement.name.value in wanted or compact:
                    out.append(statement)
        return out

    def _layer(self, func: cst.BaseExpression) -> Optional[tuple[str, str]]:
        """(kind, class name) of a module constructor: ("layer", "Dense") / ("local", "Block")."""
        if isinstance(func, cst.Name) and func.value in self.classes:
            return "local", func.value
        qual = qualified_name(func, self.scope)
        if qual is not None and qual.split(".")[0] == "flax":
            short = qual.rsplit(".", 1)[-1]
            if short in LAYERS:
                return "layer", short
        return None

    def used_classes(self, name: str) -> set[str]:
        out = set()
        for method in self._methods(self.classes[name]):
            for node in walk(method):
                if isinstance(node, cst.Name) and node.value in self.classes and node.value != name:
                    out.add(node.value)
        return out

    def tree(self, name: str) -> ParamTree:
        cls = self.classes[name]
        leaves: list[ParamLeaf] = []
        state = {"complete": True, "scanned": False, "roles": True}
        self._read(name, (), (), leaves, state, 0, set())
        return ParamTree(leaves, state["complete"], name, cls.framework, state["scanned"], state["roles"])

    def _read(self, name, prefix, stack, leaves, state, depth, active) -> None:
        if depth > _MAX_DEPTH or name in active:
            state["complete"] = state["roles"] = False
            return
        cls = self.classes[name]
        counters: dict[str, int] = {}
        for method in self._methods(cls):
            for node in walk(method):
                if isinstance(node, cst.Call):
                    self._constructor(node, cls, prefix, stack, leaves, state, depth, active | {name}, counters, method)

    def _constructor(self, call, cls, prefix, stack, leaves, state, depth, active, counters, method) -> None:
        func = call.func
        lift = None
        if isinstance(func, cst.Call):  # nn.scan(Block, ...)(...)
            qual = qualified_name(func.func, self.scope) or ""
            short = qual.rsplit(".", 1)[-1]
            if qual.split(".")[0] != "flax" or short not in _LIFTS or not func.args:
                return
            lift = short
            target = self._layer(func.args[0].value)
            lifted_call = func
        else:
            target = self._layer(func)
            lifted_call = None
            if isinstance(func, cst.Attribute) and func.attr.value == "param" and isinstance(func.value, cst.Name) and func.value.value == "self":
                self._own_param(call, prefix, stack, leaves, state)
                return
        if target is None:
            short = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if short == "Param" and cls.framework == "nnx":
                attr = _assigned_attribute(self.facts, call)
                if attr is None:
                    state["complete"] = state["roles"] = False
                else:
                    leaves.append(ParamLeaf(prefix + (attr,), stack + (8, 8), _role(attr)))
                return
            if short in _PARAMLESS:
                return
            if isinstance(func, cst.Name) and self._local_value(func.value, method):
                # `dense = functools.partial(nn.Dense, ...)`, then `dense(width)(x)`: a
                # layer made from a local value is one the tree does not know.
                state["complete"] = state["roles"] = False
                return
            if _looks_like_module(func) or (cls.framework == "nnx" and _assigned_attribute(self.facts, call) is not None):
                state["complete"] = state["roles"] = False  # an imported module or a helper: its params are unknown
            return
        kind, class_name = target
        sub_stack = stack
        if lift in ("scan", "vmap") and lifted_call is not None and _stacks_params(lifted_call, self.scope):
            sub_stack = stack + (4,)
            state["scanned"] = True
        display = (_LIFTS[lift] + class_name) if lift else class_name
        given = call_arg_expr(call, None, "name")
        sub_name = self._name(call, cls, given, display, counters, method, state)
        if sub_name is None:
            return
        path = prefix + (sub_name,)
        if kind == "local":
            self._read(class_name, path, sub_stack, leaves, state, depth + 1, active)
            return
        spec = LAYERS[class_name]
        use_bias = _keyword_value(call, "use_bias")
        use_scale = _keyword_value(call, "use_scale")
        groups = spec.items() if isinstance(spec, dict) else [(None, spec)]
        for group, params in groups:
            for param, shape, role in params:
                if (role == "bias" and use_bias is False) or (role == "scale" and use_scale is False):
                    continue
                names = path + ((group,) if group else ()) + (param,)
                leaves.append(ParamLeaf(names, sub_stack + shape, role))

    def _local_value(self, name: str, method: cst.FunctionDef) -> bool:
        scope = self.facts.raw.functions.get(method)
        if scope is None:
            return False
        where, bindings = lookup(name, scope)
        return where is not None and where.kind == "function" and any(b.kind != "def" and b.kind != "class" and b.kind != "import" for b in bindings)

    def _name(self, call, cls, given, display, counters, method, state) -> Optional[str]:
        if cls.framework == "nnx" or (cls.framework == "linen" and method.name.value == "setup"):
            target = _assigned_attribute(self.facts, call)
            if target is None:
                state["complete"] = False
                return None
            return target
        if given is not None:
            value = value_of(given, self.scope)
            if not isinstance(value, str):
                state["complete"] = False
                return None
            return value
        index = counters.get(display, 0)
        counters[display] = index + 1
        if _in_loop(self.facts, call):
            state["complete"] = False
        return f"{display}_{index}"

    def _own_param(self, call, prefix, stack, leaves, state) -> None:
        name = value_of(call.args[0].value, self.scope) if call.args else None
        if not isinstance(name, str):
            state["complete"] = state["roles"] = False
            return
        role = _role(name)
        init = call_arg_expr(call, 1, "init_fn")
        zero = role == "scale" and init is not None and _zeros_initializer(init, self.scope)
        leaves.append(ParamLeaf(prefix + (name,), stack + ((8,) if role in ("bias", "scale") else (8, 8)), role, zero))


def _zeros_initializer(expr: cst.BaseExpression, scope) -> bool:
    """`nn.initializers.zeros`, `zeros_init()`, `jax.nn.initializers.zeros`, `jnp.zeros`."""
    if isinstance(expr, cst.Call) and not expr.args:
        expr = expr.func
    qual = qualified_name(expr, scope) or ""
    return qual.rsplit(".", 1)[-1] in ("zeros", "zeros_init") and qual.split(".")[0] in ("flax", "jax")


def _role(name: str) -> str:
    return "bias" if "bias" in name else "scale" if "scale" in name else "embedding" if "embed" in name else "kernel"


def _keyword_value(call: cst.Call, name: str):
    expr = call_arg_expr(call, None, name)
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


def _looks_like_module(func: cst.BaseExpression) -> bool:
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return bool(name) and name[0].isupper()


def _stacks_params(lift_call: cst.Call, scope) -> bool:
    """nn.scan / nn.vmap with variable_axes={"params": <axis>}: params get a layer axis."""
    axes = call_arg_expr(lift_call, None, "variable_axes")
    if isinstance(axes, cst.Name):
        from optax_lint.syntax.values import single_binding

        binding, _ = single_binding(axes.value, scope)
        axes = binding.value if binding is not None else None
    if not isinstance(axes, cst.Dict):
        return False
    for element in axes.elements:
        if isinstance(element, cst.DictElement) and value_of(element.key, scope) in ("params", True):
            return True
    return False


def _assigned_attribute(facts, call: cst.Call) -> Optional[str]:
    """`self.ln = nn.LayerNorm()` -> "ln" (setup / nnx __init__)."""
    record = facts.record_of.get(call)
    target = record.assigned_to if record is not None else None
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        return target.attr.value
    return None


def _in_loop(facts, call: cst.Call) -> bool:
    record = facts.record_of.get(call)
    return record is not None and record.loop_depth > 0


# -- stacked layers ------------------------------------------------------------


@dataclass(frozen=True)
class StackSite:
    node: cst.CSTNode
    how: str  # "nn.scan(..., variable_axes={'params': 0})", "nnx.scan", ...



_NNX_STACKING = {"flax.nnx.scan": "nnx.scan", "flax.nnx.vmap": "nnx.vmap"}


def find_stacked_layers(facts) -> list[StackSite]:
    out: list[StackSite] = []
    for record in facts.raw.calls:
        qual = qualified_name(record.node.func, record.scope)
        if qual is None:
            continue
        short = qual.rsplit(".", 1)[-1]
        if qual in ("flax.linen.scan", "flax.linen.vmap", "flax.linen.partitioning.scan_with_axes") or (
            qual.startswith("flax.linen.") and short in ("scan", "vmap")
        ):
            if _stacks_params(record.node, record.scope):
                out.append(StackSite(record.node, f"nn.{short}(..., variable_axes={{'params': ...}})"))
        elif qual == "flax.nnx.scan":
            out.append(StackSite(record.node, "nnx.scan"))
        elif qual == "flax.nnx.vmap" and _creates_module(facts, record):
            out.append(StackSite(record.node, "nnx.vmap over module construction"))
        elif qual in ("haiku.layer_stack",):
            out.append(StackSite(record.node, "hk.layer_stack"))
    for scope in facts.raw.scopes:
        node = scope.node
        if not isinstance(node, cst.FunctionDef):
            continue
        for decorator in node.decorators:
            target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
            qual = qualified_name(target, scope.parent or scope)
            if qual == "flax.nnx.scan":
                out.append(StackSite(decorator, "nnx.scan"))
            elif qual == "flax.nnx.vmap" and _returns_module(scope):
                out.append(StackSite(decorator, "nnx.vmap over module construction"))
    return out


def _creates_module(facts, record) -> bool:
    """nnx.vmap(create_block, ...) / nnx.vmap(lambda r: Block(r)) builds stacked modules."""
    if not record.node.args:
        return False
    fn = record.node.args[0].value
    if isinstance(fn, cst.Lambda):
        return isinstance(fn.body, cst.Call) and _looks_like_module(fn.body.func)
    if isinstance(fn, cst.Name):
        _, bindings = lookup(fn.value, record.scope)
        if len(bindings) == 1 and bindings[0].kind == "def":
            scope = facts.raw.functions.get(bindings[0].node)
            return scope is not None and _returns_module(scope)
    return False


def _returns_module(scope) -> bool:
    return any(
        isinstance(r.node.value, cst.Call) and _looks_like_module(r.node.value.func) for r in scope.returns
    )
