"""OPX109 decay-mask-never-matches: A weight-decay mask or label function whose name
comparison can never be true for the params it sees, or a mask that is flipped."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.facts.masks import expr as mx
from optax_lint.facts.masks.extract import MaskFunction
from optax_lint.facts.masks.param_tree import (
    LEAF_NAMES,
    ParamLeaf,
    frameworks,
    synthetic_tree,
)
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.weight_decay.snippets import snippet

# Leaf names PyTorch (and Keras) give parameters that flax and haiku never produce.
PYTORCH_LEAVES = frozenset({"weight", "gamma", "beta", "running_mean", "running_var"})


_NORM_OR_BIAS = ("bias", "scale")


_DEFAULT_MODULES = ("Dense_0", "LayerNorm_0", "Embed_0", "layer_0", "encoder", "decoder")


def candidate_leaves(facts, fn: MaskFunction) -> tuple[list[ParamLeaf], bool]:
    """The leaves the mask may see, and whether they are exactly the model's.

    With the whole model visible, its leaves. Otherwise every path built from the
    names the mask itself mentions plus the framework's leaf names: a comparison
    that is false on all of them is false on any params the framework can produce."""
    tree = facts.model_tree
    if tree is not None and tree.complete:
        return tree.leaves, True
    found = frameworks(facts)
    leaf_names = set(LEAF_NAMES["haiku"] if "haiku" in found and "flax" not in found else LEAF_NAMES["flax"])
    if "torch" in found or "transformers" in found or not found & {"flax", "haiku"} or facts.declares_pytorch_names:
        # The params may use these names after all: a PyTorch checkpoint, transformers'
        # flax models (FlaxT5's layer norms hold a 'weight'), or modules that call
        # self.param("weight", ...) in this file or a project module it imports.
        leaf_names |= PYTORCH_LEAVES
    modules = list(_DEFAULT_MODULES)
    prefixes = []
    custom = set()
    for literal in mx.string_literals(fn.pred):
        if literal.isidentifier() and (literal not in PYTORCH_LEAVES or literal in leaf_names):
            # Any module may declare `self.param("delay", ...)`: with the model not all
            # visible, a plain name may be a parameter's own.
            custom.add(literal)
        parts = tuple(p for p in re.split(r"[./]", literal) if p)
        kept = tuple(p for p in parts if p not in PYTORCH_LEAVES or p in leaf_names)
        leaf_names |= {p for p in kept if p in LEAF_NAMES["flax"] or p in LEAF_NAMES["haiku"]}
        modules.extend(p for p in kept if p not in leaf_names)
        prefixes.append(tuple(p for p in kept if p not in leaf_names))
    leaves = []
    for leaf in sorted(leaf_names | custom):
        role = _role(leaf)
        shape = (8,) if role in ("bias", "scale") else (8, 8)
        for module in dict.fromkeys(modules):
            leaves.append(ParamLeaf((module, leaf), shape, role))
            leaves.append(ParamLeaf(("model", module, leaf), shape, role))
        for prefix in prefixes:
            if prefix:
                leaves.append(ParamLeaf(prefix + (leaf,), shape, role))
                leaves.append(ParamLeaf(("model",) + prefix + (leaf,), shape, role))
    if tree is not None:
        leaves.extend(tree.leaves)
    return leaves, False


def _role(name: str) -> str:
    if name in ("bias", "b", "offset", "beta"):
        return "bias"
    if name in ("scale", "gamma"):
        return "scale"
    if name in ("embedding", "embeddings"):
        return "embedding"
    return "kernel"


def _values(fn: MaskFunction, leaves: list[ParamLeaf], pred: Optional[list] = None) -> Optional[list]:
    out = []
    for leaf in leaves:
        env = {"path": mx.path_value(leaf.names, fn.path_kind), "leaf": mx.Leaf(leaf.shape)}
        try:
            out.append(mx.evaluate(pred if pred is not None else fn.pred, env))
        except mx.EvalError:
            return None
    return out


def _negative(atom: list) -> bool:
    return atom[0] == "cmp" and atom[1] in ("!=", "not in", "is not")


def never_matching_atoms(facts, fn: MaskFunction) -> list[tuple[list, cst.CSTNode, str, str]]:
    """String comparisons in the mask that are false for every leaf it can see:
    (atom, node, how to name it, why). `any(x in path for x in [...])` is judged
    name by name, since one dead name among live ones is the usual mistake."""
    leaves, exact = candidate_leaves(facts, fn)
    out = []
    for atom, node in fn.atoms:
        if not mx.uses(atom, "path"):
            continue
        if atom[0] == "gen":
            if atom[1] != "any" or atom[3][0] != "const" or not isinstance(atom[3][1], list):
                continue
            for item in atom[3][1]:
                if not isinstance(item, str):
                    continue
                bound = _bind(atom[4], atom[2], item)
                if _never(fn, leaves, bound):
                    out.append((bound, node, f"the name {item!r} in any({snippet(node)})", _why_never(facts, fn, bound, exact)))
            continue
        if _never(fn, leaves, atom):
            out.append((atom, node, snippet(node), _why_never(facts, fn, atom, exact)))
    return out


def _bind(body: list, var: str, value) -> list:
    """Substitute a generator variable by a constant."""
    if not isinstance(body, list) or not body:
        return body
    if body[0] == "var" and body[1] == var:
        return ["const", value]
    if body[0] == "const":
        return body
    return [body[0]] + [
        _bind(part, var, value) if isinstance(part, list) and part and isinstance(part[0], str)
        else [_bind(x, var, value) for x in part] if isinstance(part, list) else part
        for part in body[1:]
    ]


def _never(fn: MaskFunction, leaves: list[ParamLeaf], atom: list) -> bool:
    values = _values(fn, leaves, atom)
    if values is None:
        return False
    matched = [not v for v in values] if _negative(atom) else [bool(v) for v in values]
    return not any(matched)


def _why_never(facts, fn: MaskFunction, atom: list, exact: bool) -> str:
    literals = mx.string_literals(atom)
    if fn.path_kind == mx.KEYS and not any(x[0] == "attr" for x in mx.walk(atom)) and not any(
        x[0] == "call" and x[1] in ("keystr", "str") for x in mx.walk(atom)
    ):
        return "tree_map_with_path passes key entries such as DictKey(key='bias'), never plain strings; compare path[-1].key"
    if fn.path_kind == mx.NAMES and any(("." in s or "/" in s) for s in literals):
        dotted = next(s for s in literals if "." in s or "/" in s)
        return f"flatten_dict keys and path_aware_map paths are tuples of names such as ('LayerNorm_0', 'scale'); the joined name {dotted!r} is never one of them"
    pytorch = sorted({p for s in literals for p in re.split(r"[./]", s) if p in PYTORCH_LEAVES})
    if pytorch and not facts.declares_pytorch_names:
        return f"{pytorch[0]!r} is PyTorch's name: flax calls a LayerNorm's parameters 'scale' and 'bias' and a Dense layer's 'kernel' and 'bias'"
    if exact:
        tree = facts.model_tree
        names = sorted({n for leaf in tree.leaves for n in leaf.names[:-1]})
        if not names:  # the root declares its parameters itself (self.param)
            names = sorted({leaf.names[-1] for leaf in tree.leaves})
            return f"the parameters of {tree.root} are named {_shown(names)}, and none of them matches"
        return f"the flax modules of {tree.root} are named {_shown(names)}, and none of its parameters matches"
    return "no parameter name flax or haiku produces matches it"


def _shown(names: list[str]) -> str:
    return ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")


def flipped(facts, fn: MaskFunction, kind: str) -> bool:
    """True where weight decay should not apply and False where it should."""
    tree = facts.model_tree
    leaves = list(tree.leaves) if tree is not None else []
    if not leaves:
        leaves = synthetic_tree().leaves
    values = _values(fn, leaves)
    if values is None or any(not isinstance(v, bool) for v in values):
        return False
    decayed = values if kind == "decay" else [not v for v in values]
    weights = [d for d, leaf in zip(decayed, leaves) if leaf.role in ("kernel", "embedding")]
    others = [d for d, leaf in zip(decayed, leaves) if leaf.role in _NORM_OR_BIAS]
    return bool(weights) and bool(others) and not any(weights) and any(others)


class DecayMaskNeverMatches(Rule):
    code = "OPX109"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        seen: set = set()
        for site in facts.mask_sites:
            fn = site.function(facts)
            if fn is None or not fn.uses_path:
                continue
            kind = site.role()
            for atom, node, label, why in never_matching_atoms(facts, fn):
                if (id(node), label) in seen:
                    continue
                seen.add((id(node), label))
                ctx.report(
                    node,
                    subject=label,
                    what=_what(kind),
                    # `!=`/`not in` on a name that never occurs holds for every leaf.
                    problem=f"{'is true for every parameter' if _negative(atom) else 'can never be true'}: {why}",
                    consequence=_consequence(kind, atom),
                    related=[(site.expr, "the mask is passed here")],
                )
            if kind in ("decay", "no_decay") and flipped(facts, fn, kind):
                ctx.report(
                    site.expr,
                    subject=snippet(site.expr),
                    what=_what(kind),
                    problem="is flipped: it is True for the biases and norm scales and False for the weight matrices" if kind == "decay"
                    else "is flipped: it is True for the weight matrices and False for the biases and norm scales",
                    consequence="optax applies the transformation where the mask is True, so "
                    + ("only biases and norm scales are decayed" if kind == "decay" else "the weight matrices get no decay and the biases and norm scales do"),
                )


def _what(kind: str) -> str:
    return {"decay": "weight-decay mask", "no_decay": "no-decay mask", "labels": "partition label function", "mask": "mask"}[kind]


def _consequence(kind: str, atom: list) -> str:
    if kind == "decay":
        return "the leaves it was meant to exclude (biases, norm scales) are decayed anyway"
    if kind == "no_decay":
        return "the leaves it was meant to spare (biases, norm scales) are decayed anyway"
    if kind == "labels":
        return "every parameter gets the other label"
    return "the mask selects a different set of leaves than written"
