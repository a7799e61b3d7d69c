"""A Transformer with no stack: the model the file trains builds one attention layer,
once (one block, not repeated by a loop, a comprehension or `nn.scan`, and not applied
in a loop of the class that holds it).

The protocol rules ask a Transformer to clip its gradient and to warm up because a deep
stack of residual attention blocks is prone to early blow-ups and loss spikes; a model
with a single attention layer has no such stack, and is a small model, which the
protocol lets train without either. Read from the model's own source: the linted
file's classes, or those of the project module the model is imported from (where a
class that module never builds is the model itself, built once per model). A declared
`arch=transformer` is the user's word and is not second-guessed; any doubt (a loop or
comprehension that builds or re-applies a block, a second construction, a repeating
wrapper, attention built outside a class) leaves the premise standing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from optax_lint.facts.context.models import name_arch
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


def _class_loops(facts) -> dict[str, list[cst.CSTNode]]:
    """The loops in each class's body: a block built once may still be applied many
    times there (shared weights)."""
    out: dict[str, list[cst.CSTNode]] = defaultdict(list)
    for loop in facts.raw.loops:
        owner = loop.scope.enclosing_class()
        if owner is not None:
            out[owner.name].append(loop.node)
    return out


def _reapplied(facts, loops: list, node: cst.CSTNode) -> bool:
    """A loop of the class that builds `node` may apply it more than once: the loop reads
    the name the construction is bound to (`self.attention`, `block`), or the binding is
    not a plain name."""
    if not loops:
        return False
    record = facts.record_of.get(node)
    target = record.assigned_to if record is not None else None
    if isinstance(target, cst.Attribute):
        bound = target.attr.value
    elif isinstance(target, cst.Name):
        bound = target.value
    else:
        return True
    for loop in loops:
        for part in walk(loop):
            if (isinstance(part, cst.Name) and part.value == bound) or (isinstance(part, cst.Attribute) and part.attr.value == bound):
                return True
    return False


def _instances(facts, sites, loops: dict, name: str, path: tuple[str, ...], roots: frozenset = frozenset(),
               unused: frozenset = frozenset()) -> Optional[int]:
    """How many instances of class `name` the module builds; None when not known (a class
    nothing here builds may be built any number of times elsewhere). A module-level
    function, not a closure: a recursive closure would hold the tree in a reference cycle."""
    if name in path:
        return None
    if not sites.get(name):
        # the imported model's own class, built by the file that trains it: one model;
        # another model of that module, which the file does not build: none of it
        return 1 if name in roots else (0 if name in unused else None)
    total = 0
    for owner, node, scope in sites[name]:
        more = 1 if owner is None else _instances(facts, sites, loops, owner, path + (name,), roots, unused)
        if more is None:
            return None
        if more == 0:
            continue  # built only inside a model the file does not train
        if _repeated(facts, node, scope) or (owner is not None and _reapplied(facts, loops.get(owner), node)):
            return None
        total += more
    return total


def _built_by(facts, names: frozenset) -> frozenset:
    """Which of `names` (the model module's classes it never builds itself) the linted
    file constructs: `head = AttentionPoolingHead(...)`."""
    return frozenset(last_name(record.node.func) for record in facts.raw.calls) & names


def single_attention_layer(facts, arch) -> Optional[SingleAttentionLayer]:
    """The one attention layer of the file's model, when the inferred architecture comes
    from the model's classes (this file's, or those of the project module the model is
    imported from) and that module builds exactly one; else None."""
    if arch is None or getattr(arch, "source", None) != "inferred":
        return None
    model_module = getattr(arch, "module", None) or facts
    roots: frozenset = frozenset()
    unused: frozenset = frozenset()
    if model_module is not facts:
        # A model imported from a project module: its classes are read there, and a
        # class that module never builds is the model itself, built once per model by
        # the file that trains it (several classes of that kind count together). When
        # the file builds some of them by name, those are the model; the module's other
        # models (a second head, a variant) are not part of it.
        roots = frozenset(model_module.model_index.roots())
        built = _built_by(facts, roots)
        if built:
            roots, unused = built, roots - built
        facts = model_module
    index = facts.model_index
    if any(s.arch == "transformer" and not s.by_name for s in index.direct):
        return None  # attention built outside any class: how often is not known
    attention = index.attention_signals()
    named: list[str] = []
    if getattr(arch, "by_name", False):
        # Known by a class name alone: count only when every class named like a
        # Transformer is an attention layer written by hand (`class MultiHeadAttention`);
        # each construction of such a class is one attention layer.
        named = [name for name in index.classes if name_arch(name) == "transformer"]
        if attention or not named or any("attention" not in name.lower() for name in named):
            return None
        # ...and the name the architecture rests on is one of them (`class MultiHeadAttention
        # (...)`), not an imported model known by its name (`NanoGPT (imported model)`).
        detail = str(getattr(arch, "detail", "") or "")
        if not detail.startswith("class ") or detail.split()[1] not in named:
            return None
    elif not attention:
        return None
    sites: dict[str, list[tuple[Optional[str], cst.CSTNode, Scope]]] = defaultdict(list)
    for kind, value, node, scope, owner in index.built_in_classes:
        if kind == "use":
            sites[value].append((owner, node, scope))
    for name, node, scope in index.used:
        sites[name].append((None, node, scope))
    loops = _class_loops(facts)
    layers = 0
    first: Optional[SingleAttentionLayer] = None
    for name, signals in attention.items():
        count = _instances(facts, sites, loops, name, (), roots, unused)
        if count is None:
            return None
        if count == 0:
            continue  # a class of a model the file does not train
        for signal in signals:
            if signal.scope is None or _repeated(facts, signal.origin.node, signal.scope):
                return None
            if _reapplied(facts, loops.get(name), signal.origin.node):
                return None
        layers += count * len(signals)
        if first is None:
            first = SingleAttentionLayer(name, facts, signals[0].origin.node)
    for name in named:
        count = _instances(facts, sites, loops, name, (), roots, unused)
        if count is None:
            return None
        layers += count
        if first is None and count:
            first = SingleAttentionLayer(name, facts, index.classes[name].scope.node)
    return first if layers == 1 else None
