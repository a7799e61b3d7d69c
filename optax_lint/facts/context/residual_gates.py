"""Transformer blocks that start as the identity: each residual branch is multiplied by
a gate that is zero at initialisation (adaLN-Zero, as in DiT: `x + gate * attn(h)`
with the gate regressed by a Dense layer whose kernel starts at zero; ReZero: a scalar
parameter initialised to zero).

Read from the model's own source, in the module the run context's architecture came
from. The protocol rules ask a Transformer to clip its gradient and to warm up because
its stack of residual branches is prone to early blow-ups and loss spikes; a stack whose
branches are gated shut at the start grows into its depth from the identity instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst
from libcst.helpers import get_full_name_for_node

from optax_lint.facts.project.found import line_of

# Layer keywords that take the weight initialiser (flax/nnx, haiku), and the bias one.
_KERNEL_KEYWORDS = frozenset({"kernel_init", "w_init"})
_BIAS_KEYWORDS = frozenset({"bias_init", "b_init"})
# Calls that cut one array into pieces (the shift/scale/gate chunks) or reshape it.
_SPLITS = frozenset({"split", "array_split", "chunk", "reshape", "expand_dims"})


@dataclass(frozen=True)
class GatedBlock:
    name: str  # the block class
    module: object  # the ModuleFacts it is defined in
    node: cst.BinaryOperation  # its first gated residual addition

    def describe(self) -> str:
        return (f"{self.name} ({self.module.display_path}:{line_of(self.module, self.node)}) gates its residual "
                "branches by values that start at zero, so each block starts as the identity")


def _last(name: Optional[str]) -> str:
    return (name or "").rsplit(".", 1)[-1]


def _number_is_zero(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.Integer, cst.Float)):
        try:
            return float(expr.value.replace("_", "")) == 0.0
        except ValueError:
            return False
    return False


class _Zeros:
    """Which expressions are a zero initialiser: `nn.initializers.zeros`,
    `nnx.initializers.zeros_init()`, `initializers.constant(0.)`, `hk.initializers.Constant(0)`,
    or a module-level name bound once to one (`zero_init = ...`)."""

    def __init__(self, module: cst.Module) -> None:
        counts: dict[str, int] = {}
        values: dict[str, cst.BaseExpression] = {}
        for statement in module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                    name = small.targets[0].target.value
                    counts[name] = counts.get(name, 0) + 1
                    values[name] = small.value
        self.aliases = {name for name, value in values.items() if counts[name] == 1 and self.direct(value)}

    @staticmethod
    def direct(expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            last = _last(get_full_name_for_node(expr.func))
            if last in ("zeros_init", "zeros"):
                return True
            if last in ("constant", "Constant") and expr.args:
                return _number_is_zero(expr.args[0].value)
            return False
        name = get_full_name_for_node(expr)
        return name is not None and "." in name and _last(name) == "zeros"

    def __call__(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Name) and expr.value in self.aliases:
            return True
        return self.direct(expr)


def _zero_layer(call: cst.Call, zeros: _Zeros) -> bool:
    """A layer built with a zero weight initialiser and a zero (or default) bias: its
    output is zero whatever its input, until it trains."""
    kernel = bias = None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in _KERNEL_KEYWORDS:
            kernel = arg.value
        elif arg.keyword is not None and arg.keyword.value in _BIAS_KEYWORDS:
            bias = arg.value
    return kernel is not None and zeros(kernel) and (bias is None or zeros(bias))


def _zero_param(call: cst.Call, zeros: _Zeros) -> bool:
    """`self.param("alpha", zeros, ...)` (linen) or `nnx.Param(jnp.zeros(...))`."""
    last = _last(get_full_name_for_node(call.func))
    if last == "param" and len(call.args) >= 2:
        return zeros(call.args[1].value)
    if last == "Param" and call.args:
        inner = call.args[0].value
        return isinstance(inner, cst.Call) and _last(get_full_name_for_node(inner.func)) in ("zeros", "zeros_like")
    return False


def _self_attr(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return expr.attr.value
    return None


class _BlockReader(cst.CSTVisitor):
    """One pass over a class: the layers and values that start at zero, then the residual
    additions gated by them. Names are followed through plain and tuple assignments, in
    source order (a block's `__init__` comes before its `__call__`)."""

    def __init__(self, zeros: _Zeros) -> None:
        self.zeros = zeros
        self.zero_layers: set[str] = set()  # self.adaln = nnx.Linear(..., kernel_init=zeros)
        self.zero_names: set[str] = set()  # values that are zero at initialisation
        self.zero_attrs: set[str] = set()  # self.alpha = nnx.Param(jnp.zeros(()))
        self.gated_at: list[cst.BinaryOperation] = []

    # -- what starts at zero -------------------------------------------------
    def _is_zero(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Name):
            return expr.value in self.zero_names
        attr = _self_attr(expr)
        if attr is not None:
            return attr in self.zero_attrs
        if isinstance(expr, cst.Attribute) and expr.attr.value == "value":
            return self._is_zero(expr.value)  # nnx: self.alpha.value
        if isinstance(expr, cst.Subscript):
            return self._is_zero(expr.value)  # gate[:, None]
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Call) and _zero_layer(func, self.zeros):
                return True  # nn.Dense(..., kernel_init=zeros)(c)
            attr = _self_attr(func)
            if attr is not None and attr in self.zero_layers:
                return True  # self.adaln(c)
            if isinstance(func, cst.Name) and func.value in self.zero_layers:
                return True  # dense = nn.Dense(..., kernel_init=zeros); dense(c)
            if _zero_param(expr, self.zeros):
                return True
            if _last(get_full_name_for_node(func)) in _SPLITS:
                if isinstance(func, cst.Attribute) and self._is_zero(func.value):
                    return True  # c.split(6, axis=-1)
                return bool(expr.args) and self._is_zero(expr.args[0].value)  # jnp.split(c, 6)
        return False

    def _bind(self, target: cst.BaseExpression, zero: bool, layer: bool) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value, zero, False)
            return
        attr = _self_attr(target)
        if isinstance(target, cst.Name):
            names, layers = self.zero_names, self.zero_layers
            key = target.value
        elif attr is not None:
            names, layers = self.zero_attrs, self.zero_layers
            key = attr
        else:
            return
        (layers if layer else names).add(key) if (zero or layer) else (names.discard(key), layers.discard(key))

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        layer = isinstance(value, cst.Call) and _zero_layer(value, self.zeros)
        zero = not layer and self._is_zero(value)
        for target in node.targets:
            self._bind(target.target, zero, layer)

    # -- where it gates a residual branch -------------------------------------
    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if not isinstance(node.operator, cst.Add):
            return
        for side in (node.left, node.right):
            if isinstance(side, cst.BinaryOperation) and isinstance(side.operator, cst.Multiply):
                if self._is_zero(side.left) or self._is_zero(side.right):
                    self.gated_at.append(node)
                    return


def gated_block(module_facts, name: str) -> Optional[GatedBlock]:
    """The class `name` of a module when its residual branches are gated by values that
    start at zero, else None; each class read once, cached on the module's facts (only
    the attention classes are ever asked, so the other classes are never visited)."""
    cache = module_facts.__dict__.setdefault("_gated_blocks", {})
    if name in cache:
        return cache[name]
    zeros = module_facts.__dict__.get("_gate_zeros")
    if zeros is None:
        zeros = module_facts.__dict__["_gate_zeros"] = _Zeros(module_facts.module)
    found = None
    for scope in module_facts.raw.scopes:
        if scope.kind == "class" and scope.name == name and isinstance(scope.node, cst.ClassDef):
            reader = _BlockReader(zeros)
            scope.node.visit(reader)
            found = GatedBlock(scope.name, module_facts, reader.gated_at[0]) if reader.gated_at else None
            break
    cache[name] = found
    return found


def identity_initialised(facts, arch) -> Optional[GatedBlock]:
    """The first gated block when every class of the model's module that builds an
    attention layer gates its residual branches shut at initialisation; None otherwise."""
    module = getattr(arch, "module", None) or facts
    index = module.model_index
    attention = list(index.attention_signals())
    if not attention:
        return None
    first = None
    for name in attention:  # the first ungated class settles it
        block = gated_block(module, name)
        if block is None:
            return None
        first = first or block
    return first
