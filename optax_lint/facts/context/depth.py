"""A Transformer with no stack: the model the file trains builds one attention layer,
once (one block, not repeated by a loop, a comprehension or `nn.scan`).

The protocol rules ask a Transformer to clip its gradient and to warm up because a deep
stack of residual attention blocks is prone to early blow-ups and loss spikes; a model
with a single attention layer has no such stack, and is a small model, which the
protocol lets train without either. Read from the model's own source, only where the
architecture was inferred from the linted file's own model classes (a declared
`arch=transformer` is the user's word, and a model imported from another module may be
built there many times); any doubt (a loop or comprehension in a model class, a second
construction, a repeating wrapper, attention built outside a class) leaves the premise
standing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from optax_lint.facts.project.found import line_of
from optax_lint.syntax.nodes import holds, last_name
from optax_lint.syntax.walker import Scope, walk

# Wrappers that build a layer many times over (a scanned or vmapped stack of blocks).
_REPEATING = frozenset({"scan", "Scan", "vmap", "Vmap", "layer_stack", "remat_scan", "fori_loop"})
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


@dataclass(frozen=True)
class SingleAttentionLayer:
    name: str  # the class that builds it
    module: object
    node: cst.CSTNode  # the attention layer's construction

    def describe(self) -> str:
        return (f"the model builds one attention layer ({self.name}, {self.module.display_path}:"
                f"{line_of(self.module, self.node)}): no stack of Transformer blocks")


def _repeated(facts, node: cst.CSTNode, scope: Scope) -> bool:
    """The construction at `node` runs more than once per model: inside a loop or a
    comprehension, or through a repeating wrapper."""
    record = facts.record_of.get(node)
    if record is None or record.loop_depth > 0:
        return True
    current: Optional[Scope] = scope
    while current is not None and current.kind not in ("class", "module"):
        if current.kind in ("comprehension", "lambda"):
            return True
        current = current.parent
    if any(isinstance(part, _COMPREHENSIONS) and holds(part, node) for part in walk(record.statement)):
        return True  # [Block() for _ in range(n)]
    return isinstance(node, cst.Call) and last_name(node.func) in _REPEATING


def _classes_that_repeat(facts) -> set[str]:
    """Model classes with a loop in their body: a block built once may still be applied
    many times there (shared weights), so its count is not known."""
    out: set[str] = set()
    for loop in facts.raw.loops:
        owner = loop.scope.enclosing_class()
        if owner is not None:
            out.add(owner.name)
    return out


def _instances(facts, sites, repeats: set[str], name: str, path: tuple[str, ...]) -> Optional[int]:
    """How many instances of class `name` the module builds; None when not known (a class
    nothing here builds may be built any number of times elsewhere). A module-level
    function, not a closure: a recursive closure would hold the tree in a reference cycle."""
    if name in path or name in repeats or not sites.get(name):
        return None
    total = 0
    for owner, node, scope in sites[name]:
        if _repeated(facts, node, scope):
            return None
        more = 1 if owner is None else _instances(facts, sites, repeats, owner, path + (name,))
        if more is None:
            return None
        total += more
    return total


def single_attention_layer(facts, arch) -> Optional[SingleAttentionLayer]:
    """The one attention layer of the file's model, when the inferred architecture comes
    from this file's classes and the whole module builds exactly one; else None."""
    if arch is None or getattr(arch, "source", None) != "inferred" or getattr(arch, "by_name", False):
        return None
    if (getattr(arch, "module", None) or facts) is not facts:
        return None
    index = facts.model_index
    if any(s.arch == "transformer" and not s.by_name for s in index.direct):
        return None  # attention built outside any class: how often is not known
    attention = index.attention_signals()
    if not attention:
        return None
    sites: dict[str, list[tuple[Optional[str], cst.CSTNode, Scope]]] = defaultdict(list)
    for kind, value, node, scope, owner in index.built_in_classes:
        if kind == "use":
            sites[value].append((owner, node, scope))
    for name, node, scope in index.used:
        sites[name].append((None, node, scope))
    repeats = _classes_that_repeat(facts)
    layers = 0
    first: Optional[SingleAttentionLayer] = None
    for name, signals in attention.items():
        for signal in signals:
            if signal.scope is None or _repeated(facts, signal.origin.node, signal.scope):
                return None
        count = _instances(facts, sites, repeats, name, ())
        if count is None:
            return None
        layers += count * len(signals)
        if first is None:
            first = SingleAttentionLayer(name, facts, signals[0].origin.node)
    return first if layers == 1 else None
