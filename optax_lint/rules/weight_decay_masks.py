"""Weight-decay masks and parameter partitions: the mask that should keep biases and
norm scales out of the decay, the labels that must match the params, the clip that
should not see frozen gradients, and the learning rate an alias negates itself.

Masks are judged on what they compute (`extract.masks` compiles them), evaluated
against the parameter names the file's model produces (`extract.param_tree`).
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.facts.masks import expr as mx
from optax_lint.facts.masks.extract import (
    MaskFunction,
    MaskSite,
    decay_mask_param,
    decays,
    literal_tree,
    mask_sites,
)
from optax_lint.facts.masks.param_tree import (
    LEAF_NAMES,
    ParamLeaf,
    frameworks,
    model_tree,
    stacked_layers,
    synthetic_tree,
)
from optax_lint.facts.pipelines.build import Pipeline, Step, TxNode, expand
from optax_lint.rules.base import Context, Rule, describe, register
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.values import Unknown, single_binding, value_of

# Every rule here judges an optax optimizer, mask or partition: no optax, no finding.
TRIGGERS = ("optax",)

# Leaf names PyTorch (and Keras) give parameters that flax and haiku never produce.
PYTORCH_LEAVES = frozenset({"weight", "gamma", "beta", "running_mean", "running_var"})
_NORM_OR_BIAS = ("bias", "scale")
_DEFAULT_MODULES = ("Dense_0", "LayerNorm_0", "Embed_0", "layer_0", "encoder", "decoder")


def _code(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


# -- what the params can look like --------------------------------------------


def candidate_leaves(facts, fn: MaskFunction) -> tuple[list[ParamLeaf], bool]:
    """The leaves the mask may see, and whether they are exactly the model's.

    With the whole model visible, its leaves. Otherwise every path built from the
    names the mask itself mentions plus the framework's leaf names: a comparison
    that is false on all of them is false on any params the framework can produce."""
    tree = model_tree(facts)
    if tree is not None and tree.complete:
        return tree.leaves, True
    found = frameworks(facts)
    leaf_names = set(LEAF_NAMES["haiku"] if "haiku" in found and "flax" not in found else LEAF_NAMES["flax"])
    if "torch" in found or "transformers" in found or not found & {"flax", "haiku"} or _own_pytorch_names(facts):
        # The params may use these names after all: a PyTorch checkpoint, transformers'
        # flax models (FlaxT5's layer norms hold a 'weight'), or modules that call
        # self.param("weight", ...) in this file or a project module it imports.
        leaf_names |= PYTORCH_LEAVES
    modules = list(_DEFAULT_MODULES)
    prefixes = []
    for literal in mx.string_literals(fn.pred):
        parts = tuple(p for p in re.split(r"[./]", literal) if p)
        kept = tuple(p for p in parts if p not in PYTORCH_LEAVES or p in leaf_names)
        leaf_names |= {p for p in kept if p in LEAF_NAMES["flax"] or p in LEAF_NAMES["haiku"]}
        modules.extend(p for p in kept if p not in leaf_names)
        prefixes.append(tuple(p for p in kept if p not in leaf_names))
    leaves = []
    for leaf in sorted(leaf_names):
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


_DECLARES_PYTORCH_NAME = re.compile(
    r"""(?:param|get_parameter)\(\s*['"](?:weight|gamma|beta|running_mean|running_var)['"]"""
    r"|self\.(?:weight|gamma|beta)\s*=\s*(?:nnx\.)?Param\("
)


def _own_pytorch_names(facts) -> bool:
    """Whether this file, or a project module it imports, declares a parameter with a
    PyTorch-style name (`self.param("weight", ...)`, `self.weight = nnx.Param(...)`)."""

    def compute(facts) -> bool:
        from optax_lint.facts.project.config import project_of

        texts = [facts.text or ""]
        project = project_of(facts)
        texts += [project.text_of(path) or "" for path in project.imported_paths()]
        return any(_DECLARES_PYTORCH_NAME.search(text) for text in texts)

    return facts.memo("pytorch_leaf_names", compute)


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
                    out.append((bound, node, f"the name {item!r} in any({_short(node)})", _why_never(facts, fn, bound, exact)))
            continue
        if _never(fn, leaves, atom):
            out.append((atom, node, _short(node), _why_never(facts, fn, atom, exact)))
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
    if pytorch and not _own_pytorch_names(facts):
        return f"{pytorch[0]!r} is PyTorch's name: flax calls a LayerNorm's parameters 'scale' and 'bias' and a Dense layer's 'kernel' and 'bias'"
    if exact:
        tree = model_tree(facts)
        names = sorted({n for leaf in tree.leaves for n in leaf.names[:-1]})
        shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        return f"the flax modules of {tree.root} are named {shown}, and none of its parameters matches"
    return "no parameter name flax or haiku produces matches it"


def flipped(facts, fn: MaskFunction, kind: str) -> bool:
    """True where weight decay should not apply and False where it should."""
    tree = model_tree(facts)
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


# -- OPX108 ---------------------------------------------------------------------


_MASK_FN_NAME = "decay_mask"


@register
class DecayWithoutMask(Rule):
    code = "OPX108"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        candidates = []
        for pipeline in facts.pipelines:
            for node in pipeline.nodes():
                if self._unmasked_decay(node):
                    candidates.append((pipeline, node))
        if not candidates:
            return
        arch = facts.run_context.get("arch")
        if arch is None or arch.value != "transformer":
            return
        for pipeline, node in candidates:
            fix = _mask_fix(facts, pipeline, node)
            ctx.report(
                node.call,
                optimizer=describe(node.call),
                evidence=arch.cite(),
                fix=fix,
            )

    @staticmethod
    def _unmasked_decay(node: TxNode) -> bool:
        param = decay_mask_param(node)
        if param is None or node.args is None or node.call is None or node.args.has_star:
            return False
        mask = node.args.expr(param)
        if mask is not None and not (isinstance(mask, cst.Name) and mask.value == "None"):
            return False
        if decays(node) is False:
            return False
        parent = node.parent
        while parent is not None:  # a masked(...) or a partition branch already selects leaves
            if parent.short in ("masked", "multi_transform", "partition", "selective_transform"):
                return False
            parent = parent.parent
        return True


def _mask_fix(facts, pipeline: Pipeline, node: TxNode):
    """mask=decay_mask, plus a path-based `decay_mask` function added once after the imports."""
    if any(c.pipeline is pipeline and c.kind == "nnx_optimizer" for c in facts.consumers):
        return None  # nnx passes an nnx.State: its paths end in `.value`, a different recipe
    param = decay_mask_param(node)
    found = frameworks(facts)
    module_scope = facts.raw.module_scope
    existing = module_scope.bindings.get(_MASK_FN_NAME)
    if existing and not all(b.kind == "def" for b in existing):
        return None
    if "flax" in found:
        traverse = _bound_as(facts, "flax.traverse_util")
        flax_name = _bound_as(facts, "flax")
        if traverse is not None:
            call, needs_import = f"{traverse}.path_aware_map", False
        elif flax_name is not None:
            call, needs_import = f"{flax_name}.traverse_util.path_aware_map", False
        else:
            call, needs_import = "traverse_util.path_aware_map", True
        names = ("bias", "scale")
        body = f"return {call}(lambda path, _: path[-1] not in {_tuple(names, facts)}, params)"
    elif "haiku" in found and _bound_as(facts, "jax") is not None:
        jax_name = _bound_as(facts, "jax")
        needs_import = False
        names = ("b", "offset", "scale")
        body = f"return {jax_name}.tree_util.tree_map_with_path(lambda path, _: path[-1].key not in {_tuple(names, facts)}, params)"
    else:
        return None
    quote = _quote(facts)
    indent = facts.module.default_indent
    doc = f"{quote * 3}Weight decay for kernels and embeddings only: not for biases or norm scales.{quote * 3}"
    text = f"def {_MASK_FN_NAME}(params):\n{indent}{doc}\n{indent}{body}\n"
    function = cst.parse_statement(text)
    call = node.call

    def apply(module: cst.Module) -> cst.Module:
        new_call = fixes.add_keyword(call, param, cst.Name(_MASK_FN_NAME))
        module = module.deep_replace(call, new_call)
        body = list(module.body)
        if any(isinstance(s, cst.FunctionDef) and s.name.value == _MASK_FN_NAME for s in body):
            return module
        at = _after_imports(body)
        blank = cst.EmptyLine()
        new_function = function.with_changes(leading_lines=[blank, blank])
        inserted = [new_function]
        if needs_import:
            inserted.insert(0, cst.parse_statement("from flax import traverse_util\n"))
        if at < len(body):
            following = body[at]
            lines = list(following.leading_lines)
            if len([ln for ln in lines if ln.comment is None]) < 2:
                body[at] = following.with_changes(leading_lines=[blank, blank] + [ln for ln in lines if ln.comment is not None])
        body[at:at] = inserted
        return module.with_changes(body=body)

    return apply


def _after_imports(body: list) -> int:
    """Index after the last top-level import (and the module docstring)."""
    at = 0
    for i, statement in enumerate(body):
        if isinstance(statement, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) or (i == 0 and isinstance(s, cst.Expr) and isinstance(s.value, cst.SimpleString))
            for s in statement.body
        ):
            at = i + 1
        elif i > at:
            break
    return at


def _bound_as(facts, qualname: str) -> Optional[str]:
    for name, bindings in facts.raw.module_scope.bindings.items():
        if len(bindings) == 1 and bindings[0].kind == "import" and bindings[0].qualname == qualname:
            return name
    return None


def _quote(facts) -> str:
    text = facts.text or facts.module.code
    return "'" if text.count("'") > 2 * text.count('"') else '"'


def _tuple(names: tuple[str, ...], facts) -> str:
    q = _quote(facts)
    return "(" + ", ".join(f"{q}{n}{q}" for n in names) + ")"


# -- OPX109 ---------------------------------------------------------------------


@register
class DecayMaskNeverMatches(Rule):
    code = "OPX109"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        seen: set = set()
        for site in mask_sites(facts):
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
                    problem=f"can never be true: {why}",
                    consequence=_consequence(kind, atom),
                    related=[(site.expr, "the mask is passed here")],
                )
            if kind in ("decay", "no_decay") and flipped(facts, fn, kind):
                ctx.report(
                    site.expr,
                    subject=_short(site.expr),
                    what=_what(kind),
                    problem="is flipped: it is True for the biases and norm scales and False for the weight matrices" if kind == "decay"
                    else "is flipped: it is True for the weight matrices and False for the biases and norm scales",
                    consequence="optax applies the transformation where the mask is True, so "
                    + ("only biases and norm scales are decayed" if kind == "decay" else "the weight matrices get no decay and the biases and norm scales do"),
                )


def _short(node: cst.CSTNode) -> str:
    text = _code(node)
    return text if len(text) <= 60 else text[:57] + "..."


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


# -- OPX110 ---------------------------------------------------------------------


@register
class NdimMaskWithScannedLayers(Rule):
    code = "OPX110"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sites = [s for s in mask_sites(facts) if s.role() in ("decay", "no_decay")]
        if not sites:
            return
        stacks: Optional[list] = None
        for site in sites:
            fn = site.function(facts)
            if fn is None or fn.uses_path or not fn.uses_leaf:
                continue
            kind = site.role()
            try:
                flat = fn.value(("LayerNorm_0", "scale"), (8,))
                stacked = fn.value(("ScanBlock_0", "LayerNorm_0", "scale"), (4, 8))
            except mx.EvalError:
                continue
            if not isinstance(flat, bool) or flat == stacked:
                continue  # the mask does not tell a vector from a stacked vector
            decayed_when_stacked = stacked if kind == "decay" else not stacked
            if not decayed_when_stacked:
                continue
            if stacks is None:
                stacks = _stacks(facts)
            if not stacks:
                return
            site_facts, stack = stacks[0]
            if site_facts is facts:
                how, related = stack.how, [(stack.node, "layers are stacked here")]
            else:
                how, related = f"{stack.how} in {_where(facts, site_facts, stack.node)}", []
            ctx.report(site.expr, mask=_short(site.expr), how=how, related=related)


def _stacks(facts) -> list:
    """Where this file, or a project module it imports (the model's), stacks layers."""
    found = [(facts, s) for s in stacked_layers(facts)]
    if found:
        return found
    from optax_lint.facts.project.config import project_of

    for module in project_of(facts).imported_modules(("scan", "vmap", "layer_stack")):
        found.extend((module, s) for s in stacked_layers(module))
        if found:
            break
    return found


def _where(facts, module_facts, node: cst.CSTNode) -> str:
    import os

    from optax_lint.facts.project.config import line_of

    here = os.path.dirname(os.path.abspath(facts.path))
    return f"{os.path.relpath(os.path.abspath(module_facts.path), here)}:{line_of(module_facts, node)}"


# -- OPX111 ---------------------------------------------------------------------


_FREEZE_CALLS = ("flax.core.freeze", "flax.core.frozen_dict.freeze", "flax.core.FrozenDict", "flax.core.frozen_dict.FrozenDict")


@register
class PartitionLabelsMismatch(Rule):
    code = "OPX111"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        for site in mask_sites(facts):
            tree = literal_tree(site.expr, site.scope)
            if tree is None:
                continue
            what = "labels" if site.kind == "labels" else "mask"
            problem = self._problem(facts, site, tree)
            if problem is None:
                continue
            ctx.report(site.expr, what=what, owner=site.owner.short, problem=problem, related=[(tree, f"the {what} tree is built here")] if tree is not site.expr else [])

    def _problem(self, facts, site: MaskSite, tree: cst.CSTNode) -> Optional[str]:
        if any(c.pipeline is site.pipeline and c.kind == "nnx_optimizer" for c in facts.consumers):
            return "nnx.Optimizer passes the params as an nnx.State, and a plain dict never has the same pytree structure (optax raises 'pytree structure error: different types')"
        if self._frozen_params(facts, site.pipeline):
            return "the params are a FrozenDict and this is a plain dict: their pytree structures differ (optax raises 'pytree structure error: different types'); build it with flax.core.freeze or pass a function"
        if isinstance(tree, cst.Dict):
            keys = [value_of(e.key, site.scope) for e in tree.elements if isinstance(e, cst.DictElement)]
            model = model_tree(facts)
            if (
                model is not None and model.complete and keys and all(isinstance(k, str) for k in keys)
                and len(keys) == len(tree.elements) and set(keys) != {"params"}
            ):
                top = model.top_level()
                missing, extra = sorted(top - set(keys)), sorted(set(keys) - top)
                if missing or extra:
                    parts = []
                    if missing:
                        parts.append(f"it has no entry for {', '.join(repr(k) for k in missing)}")
                    if extra:
                        parts.append(f"{', '.join(repr(k) for k in extra)} is not a top-level name of the params")
                    return f"the params of {model.root} have top-level names {', '.join(sorted(top))}: " + " and ".join(parts) + " (optax raises a pytree structure error)"
            if site.kind == "labels" and site.owner.labels:
                known = {label for label in site.owner.labels if not isinstance(label, Unknown)}
                if len(known) == len(site.owner.labels):
                    unknown = sorted({v for v in _leaf_strings(tree, site.scope) if v not in known})
                    if unknown:
                        return f"label {unknown[0]!r} has no transformation in the transforms dict (optax raises 'Some parameters have no corresponding transformation')"
        return None

    @staticmethod
    def _frozen_params(facts, pipeline: Pipeline) -> bool:
        for record in facts.raw.calls:
            func = record.node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "init" and record.node.args):
                continue
            if facts.pipeline_for(func.value, record.scope) is not pipeline:
                continue
            if _is_frozen(facts, record.node.args[0].value, record.scope):
                return True
        for consumer in facts.consumers:
            if consumer.pipeline is pipeline and consumer.kind == "train_state":
                params = next((a.value for a in consumer.record.node.args if a.keyword is not None and a.keyword.value == "params"), None)
                if params is not None and _is_frozen(facts, params, consumer.record.scope):
                    return True
        return False


def _is_frozen(facts, expr: cst.BaseExpression, scope, depth: int = 0) -> bool:
    if depth > 6:
        return False
    if isinstance(expr, cst.Call):
        from optax_lint.syntax.names import qualified_name

        return qualified_name(expr.func, scope) in _FREEZE_CALLS
    if isinstance(expr, cst.Name):
        binding, _ = single_binding(expr.value, scope)
        return binding is not None and not binding.index and _is_frozen(facts, binding.value, binding.scope, depth + 1)
    return False


def _leaf_strings(tree: cst.CSTNode, scope) -> list[str]:
    out = []
    if isinstance(tree, cst.Dict):
        for element in tree.elements:
            if isinstance(element, cst.DictElement):
                if isinstance(element.value, cst.Dict):
                    out.extend(_leaf_strings(element.value, scope))
                else:
                    value = value_of(element.value, scope)
                    if isinstance(value, str):
                        out.append(value)
    return out


# -- OPX112 ---------------------------------------------------------------------


_ZEROING = ("set_to_zero", "transforms.freeze", "freeze")


def _zeroes(node: TxNode) -> bool:
    sequences = expand(node)
    for sequence in sequences:
        if not sequence:
            return False
        for step in sequence:
            if step.primitive in _ZEROING:
                break
            if step.primitive == "scale":
                value = step.arg_value("step_size")
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
                    break
        else:
            return False
    return True


@register
class ClipOverFrozenParams(Rule):
    code = "OPX112"

    def check(self, ctx: Context) -> None:
        for pipeline in ctx.facts.pipelines:
            for chain in pipeline.nodes():
                if chain.short not in ("chain", "named_chain"):
                    continue
                self._check_chain(ctx, chain)

    def _check_chain(self, ctx: Context, chain: TxNode) -> None:
        clip: Optional[TxNode] = None
        for child in chain.children:
            if child.key == "clip_by_global_norm" and child.call is not None and not child.conditional:
                clip = clip or child
                continue
            if clip is None:
                continue
            frozen = self._frozen_label(child)
            if frozen is None:
                continue
            ctx.report(
                clip.call,
                clip=describe(clip.call),
                partition=describe(child.call) if child.call is not None else child.short,
                frozen=frozen,
                fix=_clip_into_branches(chain, clip, child),
                related=[(child.call, "the frozen parameters are zeroed only here, after the clip")],
            )
            return

    @staticmethod
    def _frozen_label(node: TxNode) -> Optional[str]:
        if node.short in ("multi_transform", "partition"):
            for label, child in zip(node.labels, node.children):
                if _zeroes(child) and not isinstance(label, Unknown):
                    return f"label {label!r}"
            return None
        if node.key in ("transforms.freeze", "freeze"):
            return "the frozen leaves"
        if node.short == "selective_transform":
            return "the frozen leaves"
        return None


def _clip_into_branches(chain: TxNode, clip: TxNode, partition: TxNode):
    """chain(clip, multi_transform({"train": opt, "frozen": set_to_zero()}, labels))
    -> chain(multi_transform({"train": chain(clip, opt), "frozen": set_to_zero()}, labels)):
    every branch that trains gets the clip, over its own leaves only."""
    if partition.short not in ("multi_transform", "partition") or partition.args is None or partition.args.has_star:
        return None
    slot = clip.slot
    if not isinstance(slot, cst.Arg) or slot.star or clip.slot_owner is not chain.call or chain.call is None:
        return None
    transforms = partition.args.expr("transforms")
    elements = transforms.elements if isinstance(transforms, cst.Dict) else ()
    if not elements or any(not isinstance(e, cst.DictElement) for e in elements) or len(elements) != len(partition.children):
        return None
    chain_func = chain.call.func
    if chain.short != "chain":
        return None
    new_elements = []
    for element, child in zip(elements, partition.children):
        if _zeroes(child):
            new_elements.append(element)
            continue
        wrapped = cst.Call(func=chain_func, args=[cst.Arg(clip.call, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(element.value)])
        new_elements.append(element.with_changes(value=wrapped))
    new_dict = transforms.with_changes(elements=new_elements)
    new_chain = fixes.remove_arg(chain.call, slot).deep_replace(transforms, new_dict)
    return fixes.replace(chain.call, new_chain)


# -- OPX113 ---------------------------------------------------------------------


def negative_alias_lr(step: Step) -> bool:
    """An alias's own learning-rate step given a negative rate: it negates twice."""
    if step.primitive != "scale_by_learning_rate" or step.origin.kind != "alias":
        return False
    if step.arg_value("flip_sign") is False:
        return False
    return step.arg_sign("learning_rate") == -1


_ASCENT_WORDS = re.compile(r"\bascent\b|\bmaximi[sz]", re.IGNORECASE)


@register
class NegativeLearningRateToAlias(Rule):
    """Deliberate gradient ascent is common in RL (`optax.sgd(-lr)` on a return to
    maximise), so a minus written in the alias call itself, or a file that speaks of
    ascent or maximising, is taken at its word."""

    code = "OPX113"

    def check(self, ctx: Context) -> None:
        seen: set = set()
        facts = ctx.facts
        for pipeline in facts.pipelines:
            for sequence in pipeline.sequences():
                for step in sequence:
                    if not negative_alias_lr(step):
                        continue
                    alias = step.origin
                    if alias.call is None or alias.call in seen:
                        continue
                    seen.add(alias.call)
                    param = step.passed.get("learning_rate", "learning_rate") if step.passed else "learning_rate"
                    expr = alias.args.expr(param) if alias.args is not None else None
                    if expr is None or _explicit_minus(expr):
                        continue
                    if _ASCENT_WORDS.search(facts.text or ""):
                        return
                    schedule = facts.schedule_of(expr, alias.scope)
                    if schedule is not None:
                        detail = f"the schedule {describe(schedule.call)} starts or peaks at a negative value"
                        related = [(schedule.call, "negative schedule built here")]
                    else:
                        value = value_of(expr, alias.scope)
                        shown = describe(expr)
                        if isinstance(value, (int, float)) and not isinstance(value, bool) and shown != repr(value):
                            shown = f"{shown} (= {value:g})"
                        detail = f"the learning rate {shown} is negative"
                        related = []
                    ctx.report(expr, alias=alias.short, detail=detail, related=related)


def _explicit_minus(expr: cst.BaseExpression) -> bool:
    """`sgd(-lr)`, `sgd(-1.0 * lr)`: the author wrote the sign at the call."""
    while isinstance(expr, cst.BinaryOperation):
        expr = expr.left
    return isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus)
