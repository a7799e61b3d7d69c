"""The model's weights: where they come from (the `fine_tune` field: a checkpoint
restored from a pretrained source, `from_pretrained` of the model the optimizer is handed
(not a VAE or a teacher beside it) or a restore whose arguments say
pretrained / init_checkpoint (as written, or as the config field they read holds), a
model built from saved weights (`create_model_from_checkpoint`), LoRA adapters on a base
model, or a config field `init_*` whose value constructs a checkpoint loader; False when the params come from `model.init` and
nothing is restored or loaded) and how many there are (the `params` field, estimated
for a Transformer from its config: layers L, width d, vocab V, MLP width d_ff,
default 4d: params ~ L * (4 d^2 + 2 d d_ff) + V d)."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.facts.context.evidence import (
    Evidence,
    code_text,
    last_name,
    positive_int,
    shortened,
)
from optax_lint.facts.context.models import factory_constructions
from optax_lint.facts.context.run_context import ContextValue
from optax_lint.facts.project.evaluate import ConfigEvaluator, config_of
from optax_lint.facts.project.found import Found, Origin, weaker
from optax_lint.syntax.names import lookup
from optax_lint.syntax.nodes import holds
from optax_lint.syntax.walker import walk

_RESTORE = frozenset(
    {
        "restore_checkpoint", "restore", "load", "from_bytes", "from_pretrained", "load_checkpoint", "restore_params",
        "load_params", "load_pretrained", "from_state_dict", "msgpack_restore", "load_variables", "restore_state",
    }
)
_PRETRAINED = re.compile(
    r"pre_?train|fine_?tun|init_checkpoint|init_ckpt|init_from|init_transform|warm_?start|base_model|backbone_ckpt|imagenet21k|hf_hub|from_pretrained",
    re.IGNORECASE,
)
# A config field that initialises the params from a checkpoint: `init_transform=LoadCheckpoint(...)`.
_INIT_FIELD = re.compile(r"^init_|^initiali[sz]", re.IGNORECASE)
_LOADER = re.compile(r"^Load\w*(Checkpoint|Pretrained|Params|Weights)$|^(load|restore)_\w*(checkpoint|pretrained|params|weights)$")
# Model constructors that read trained weights (tunix's `create_model_from_checkpoint`,
# `create_model_from_safe_tensors`): what they build is already trained.
_BUILT_FROM_WEIGHTS = re.compile(r"^create_model_from_(checkpoint|safe_?tensors|pretrained|hf\w*)$|^from_safe_?tensors$")
_L_NAMES = ("num_layers", "n_layer", "n_layers", "nlayers", "num_hidden_layers", "depth", "layers", "num_blocks")
# An encoder-decoder's two stacks (T5's num_layers is its encoder's: num_decoder_layers beside it)
_ENC_NAMES = ("enc_depth", "num_encoder_layers", "encoder_layers", "n_enc_layers", "enc_layers", "num_enc_layers", "encoder_depth")
_DEC_NAMES = ("dec_depth", "num_decoder_layers", "decoder_layers", "n_dec_layers", "dec_layers", "num_dec_layers", "decoder_depth")
# Picked in this order. `n_embed` and `num_features` come last: a VQ-GAN's config spells
# its codebook size `n_embed` (beside embed_dim), a nanoGPT port its width; nnx's layers
# take their width as `num_features`, which a tabular model may use for its inputs.
_D_NAMES = ("emb_dim", "d_model", "d_m", "n_emb", "hidden_size", "n_embd", "embed_dim", "embed_size", "emb_size", "model_dim", "width", "hidden_dim", "embedding_dim", "dim", "qkv_dim", "n_embed", "num_features", "dm")
_V_NAMES = ("vocab_size", "n_vocab", "num_embeddings", "output_vocab_size", "vocab")
_FF_NAMES = ("mlp_dim", "d_ff", "ff_dim", "intermediate_size", "mlp_hidden_dim", "ffn_dim", "hidden_mlp_dim", "n_inner", "num_hidden", "dff")
# "Attention Is All You Need"'s notation (`make_model(N=6, d_model=512, d_ff=2048, h=8)`):
# N layers in the encoder and N in the decoder. A bare `N` is too common a name (a batch,
# a sample count) to be a depth anywhere else, so it counts only beside both widths.
_PAPER_DEPTH = "N"
_PAPER_D, _PAPER_FF = frozenset({"d_model", "dm"}), frozenset({"d_ff", "dff"})
# A width given as heads x head size (T5's num_heads x d_kv)
_HEADS_NAMES = ("num_heads", "n_heads", "n_head", "num_attention_heads", "heads")
_HEAD_SIZE_NAMES = ("d_head", "head_dim", "d_kv", "d_q", "d_k", "dim_head", "head_size", "key_size", "attn_size")
# An MLP width given as a multiple of the model's (haiku's widening_factor, ViT's mlp_ratio)
_FF_FACTOR_NAMES = ("widening_factor", "mlp_ratio", "ff_mult", "mlp_factor")
_DEPTH_NAMES = _L_NAMES + _ENC_NAMES + _DEC_NAMES
# A depth given in parts, summed when no other depth is given: a model of edge-encoder,
# node-encoder and combined blocks (`num_edge_encoder_blocks=1, num_node_encoder_blocks=1,
# num_combined_encoder_blocks=1`) has three blocks.
_BLOCK_PART = re.compile(r"^num_\w+_blocks$")
_SIZE_NAMES = frozenset(_DEPTH_NAMES + _D_NAMES + _V_NAMES + _FF_NAMES + _FF_FACTOR_NAMES + _HEADS_NAMES + _HEAD_SIZE_NAMES + (_PAPER_DEPTH,))
# as sets, for _sizes_a_model, asked of every call's keywords
_DEPTH_SET, _D_SET = frozenset(_DEPTH_NAMES), frozenset(_D_NAMES)
_HEADS_SET, _HEAD_SIZE_SET = frozenset(_HEADS_NAMES), frozenset(_HEAD_SIZE_NAMES)


def _sizes_a_model(keys) -> bool:
    """Names that give both a depth and a width (directly, or as heads x head size)."""
    keys = set(keys)
    width = keys & _D_SET or (keys & _HEADS_SET and keys & _HEAD_SIZE_SET)
    depth = keys & _DEPTH_SET or any(_BLOCK_PART.match(key) for key in keys)
    return bool(depth and width) or _paper_notation(keys)


def _size_key(key: Optional[str]) -> bool:
    return key is not None and (key in _SIZE_NAMES or _BLOCK_PART.match(key) is not None)


def _paper_notation(keys) -> bool:
    return _PAPER_DEPTH in keys and bool(keys & _PAPER_D) and bool(keys & _PAPER_FF)


def infer_fine_tune(inf: Evidence, context) -> Optional[ContextValue]:
    facts = inf.facts
    restores = []
    keep = facts.training_region
    handed: Optional[set[str]] = None
    for record in facts.raw.calls:
        last = last_name(record.node.func)
        if last not in _RESTORE or not keep(record.scope):
            continue
        callee = code_text(record.node.func)
        if last == "from_pretrained" and re.search(r"Tokenizer|Processor|FeatureExtractor|Config|tokenizer", callee):
            continue  # a pretrained tokenizer or config, not weights
        if last == "from_pretrained":
            if handed is None:
                handed = _handed_to_optimizer(facts)
            loaded = _target_names(record.assigned_to) or _statement_targets(record)
            if handed and loaded and not loaded & handed:
                continue  # a pretrained VAE, teacher or encoder the optimizer never receives
        restores.append(record)
        target = record.assigned_to
        pieces = [code_text(a.value) for a in record.node.args]
        if target is not None:
            pieces.append(code_text(target))
        hint = next((p for p in pieces if _PRETRAINED.search(p)), None)
        if hint is None:
            hint = _pretrained_value(inf, record)
        if last == "from_pretrained" or hint is not None:
            label = shortened(code_text(record.node), 70)
            confidence = "high" if last == "from_pretrained" else "medium"
            return ContextValue(True, "inferred", None, confidence, f"pretrained weights restored: {label}", locate=inf.here(record.node).location)
    for record in facts.raw.calls:
        if _BUILT_FROM_WEIGHTS.match(last_name(record.node.func)) and keep(record.scope):
            label = shortened(code_text(record.node), 70)
            return ContextValue(True, "inferred", None, "medium", f"the model is built from saved weights: {label}", locate=inf.here(record.node).location)
    adapters = facts.adapters_only
    if adapters is not None:
        label = shortened(code_text(adapters), 70)
        return ContextValue(True, "inferred", None, "medium", f"only LoRA adapters train on a base model: {label}", locate=inf.here(adapters).location)
    loader = _init_loader(facts)
    if loader is not None:
        module, call, field_name = loader
        label = shortened(code_text(call), 70)
        return ContextValue(True, "inferred", None, "medium", f"params initialised from a checkpoint: {field_name}={label}", locate=Origin(module, call).location)
    if restores:
        inf.note("fine_tune", f"a checkpoint is restored ({shortened(code_text(restores[0].node))}) but nothing says it is pretrained")
        return None
    for record in facts.raw.calls:
        func = record.node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "init"
            and not re.search(r"tx|opt", code_text(func.value), re.IGNORECASE)
            and facts.pipeline_for(func.value, record.scope) is None
        ):
            if facts.pipelines and (facts.update_sites or facts.consumers):
                return ContextValue(False, "inferred", None, "medium", f"params from {code_text(func)}(...); nothing restored or loaded", locate=inf.here(record.node).location)
            inf.note("fine_tune", f"params from {code_text(func)}(...), but no optimizer this file builds consumes them")
            return None
    inf.note("fine_tune", "no model.init and no restore in this file")
    return None


def _target_names(target) -> set[str]:
    """The names an assignment target binds: `vae` or `vae, vae_params`."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {e.value.value for e in target.elements if isinstance(e.value, cst.Name)}
    return set()


def _steps_state(call: cst.Call, target) -> bool:
    """A call handed the optimizer that returns the state it is given (its result rebinds
    one of its plain-name arguments): a training step. Which parameters the optimizer
    trains is set where that state was built (its `init`, `TrainState.create`), and the
    step may read only part of it (`state.head`, beside a frozen `state.encoder`)."""
    bound = _target_names(target)
    return bool(bound) and any(isinstance(a.value, cst.Name) and a.value.value in bound for a in call.args)


def _statement_targets(record) -> set[str]:
    """The names an assignment binds when the call is nested in its value:
    `encoder = to_jax(Encoder.from_pretrained(...))` loads into `encoder`."""
    statement = record.statement
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return set()
    small = statement.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and holds(small.value, record.node):
        return _target_names(small.targets[0].target)
    if isinstance(small, cst.AnnAssign) and small.value is not None and holds(small.value, record.node):
        return _target_names(small.target)
    return set()


def _names_in(node: cst.CSTNode, out: set[str], budget: list[int], fields: Optional[dict] = None) -> None:
    """The names `node` reads. With `fields`, a name read only as `name.field` maps to
    the fields read (`state.head` -> {"state": {"head"}}), a name read whole to None."""
    selected: set[int] = set()  # `a` and `b` of an `a.b`: a field read, and a field's name
    for child in walk(node):  # pre-order: an attribute comes before its names
        if budget[0] <= 0:
            return
        budget[0] -= 1
        if isinstance(child, cst.Attribute):
            selected.add(id(child.attr))
            if fields is not None and isinstance(child.value, cst.Name):
                selected.add(id(child.value))
                name = child.value.value
                if name not in fields:
                    fields[name] = {child.attr.value}
                elif fields[name] is not None:
                    fields[name].add(child.attr.value)
        elif isinstance(child, cst.Name):
            out.add(child.value)
            if fields is not None and id(child) not in selected:
                fields[child.value] = None


def _field_value(value: cst.BaseExpression, wanted: Optional[set]) -> list[cst.CSTNode]:
    """What to follow in a binding's value for the fields read from it: a record built
    with those fields as keywords (`State(head=head, encoder=encoder)`, read as
    `state.head`) gives just those keywords' values; anything else, the whole value."""
    if wanted and isinstance(value, cst.Call):
        keywords = {a.keyword.value: a.value for a in value.args if a.keyword is not None}
        if all(field in keywords for field in wanted):
            return [keywords[field] for field in sorted(wanted)]
    return [value]


def _handed_to_optimizer(facts) -> set[str]:
    """The names whose values reach a call that is also handed an optimizer pipeline
    (`nnx.Optimizer(model, tx)`, `TrainState.create(params=model.params, tx=tx)`,
    `tx.init(params)`, `initialize_state(dit, mesh, tx)`), followed back through the
    assignments that feed them (`params = model.params`), with the names such calls'
    results are bound to. Empty when no call is handed a pipeline here: then which
    model trains is not known, and every pretrained load still counts."""
    handed: set[str] = set()
    budget = [5000]  # names walked, over the whole file: a bound, not a limit met in practice
    for record in facts.raw.calls:
        call = record.node
        func = call.func
        receiver = isinstance(func, cst.Attribute) and func.attr.value == "init" and facts.pipeline_for(func.value, record.scope)
        pipeline_args = [a for a in call.args if facts.pipeline_for(a.value, record.scope) is not None]
        if not receiver and not pipeline_args:
            continue
        if not receiver and _steps_state(call, record.assigned_to):
            continue  # `state, loss = train_step(state, batch, tx)` advances what was built elsewhere
        found: set[str] = set()
        fields: dict = {}
        for arg in call.args:
            if arg not in pipeline_args:
                _names_in(arg.value, found, budget, fields)
        handed |= _target_names(record.assigned_to)
        frontier = found
        for _ in range(3):  # follow `params = model.params` back to the model
            handed |= frontier
            more: set[str] = set()
            more_fields: dict = {}
            for name in frontier:
                _, bindings = lookup(name, record.scope)
                for binding in bindings:
                    if binding.value is not None:
                        for part in _field_value(binding.value, fields.get(name)):
                            _names_in(part, more, budget, more_fields)
            frontier = more - handed
            fields = more_fields
    return handed


def _pretrained_value(inf: Evidence, record) -> Optional[str]:
    """A restore argument whose value, followed through the project (a config field's
    default, a flag), is a path that says pretrained."""
    for arg in record.node.args:
        found = inf.ev.eval(arg.value, record.scope)
        if isinstance(found, Found) and isinstance(found.value, str) and _PRETRAINED.search(found.value):
            return found.value
    return None


def _init_loader(facts):
    """(module, call, field) for a config field or keyword named `init_*` whose value
    constructs a checkpoint loader (`init_transform=LoadCheckpoint(path=...)`), in this
    file or a project module it imports; None when there is none."""
    project = facts.project
    modules = [facts] + (project.imported_modules(("Load", "load_", "restore_"), _may_hold_init_loader) if project.file else [])
    for module in modules:
        for record in module.raw.calls:
            callee = last_name(record.node.func)
            if not _LOADER.match(callee):
                continue
            field_name = _field_holding(module, record)
            if field_name is not None and _INIT_FIELD.search(field_name):
                return module, record.node, field_name
    return None


_LOADER_CALL = re.compile(r"\b(Load\w*(Checkpoint|Pretrained|Params|Weights)|(load|restore)_\w*(checkpoint|pretrained|params|weights))\s*\(")
_INIT_WORD = re.compile(r"\b(init_|initiali[sz])", re.IGNORECASE)


def _may_hold_init_loader(text: str, rest: list[str]) -> bool:
    """A text check before the parse: a loader call and an `init_*` name must appear."""
    return _LOADER_CALL.search(text) is not None and _INIT_WORD.search(text) is not None


def _field_holding(module, record) -> Optional[str]:
    """The keyword, class field or assignment target whose value is the call."""
    target = record.assigned_to
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, cst.Attribute):
        return target.attr.value
    statement = record.statement
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.AnnAssign) and small.value is record.node and isinstance(small.target, cst.Name):
                return small.target.value
    for other in module.raw.calls:
        for arg in other.node.args:
            if arg.value is record.node and arg.keyword is not None:
                return arg.keyword.value
    return None


def infer_params(inf: Evidence, context) -> Optional[ContextValue]:
    arch = context.get("arch")
    if arch is None or arch.value != "transformer":
        inf.note("params", "estimated only for a Transformer (arch must be known)")
        return None
    for group in _size_groups(inf, getattr(arch, "module", None)):
        result = _estimate(group)
        if result is not None:
            value, embedding, detail, confidence, origin = result
            return ContextValue(value, "inferred", None, confidence, detail, locate=origin.location if origin else None,
                                non_embedding=value - embedding)
    inf.note("params", "no layers/width found in the model's config (num_layers, emb_dim/d_model/hidden_size, vocab_size)")
    return None


def _size_groups(inf: Evidence, model_module=None):
    """Candidate {name: Found} groups that describe one Transformer's size (`model_module`:
    the project module the model's class was found in, read beside the file's imports)."""
    facts = inf.facts
    # 1. arguments of a call that sets both layers and width: by keyword, or passed by
    # position as a variable named for what it holds (`NanoGPT(key, vocab_size, n_emb,
    # block_size, n_head, n_layer)`)
    for record in facts.raw.calls:
        named = [(_arg_name(a), a) for a in record.node.args]
        keys = {key for key, _ in named if key is not None}
        if _sizes_a_model(keys):
            yield _group(named, lambda value, scope=record.scope: inf.ev.eval(value, scope))
    # 2. class defaults (a TransformerConfig dataclass, a flax Module's attributes)
    project = facts.project
    modules = [facts] + (project.imported_modules(_DEPTH_NAMES) if project.file else [])
    if model_module is not None and all(model_module is not m for m in modules):
        # the model's own module, reached through a package's re-export or a factory:
        # only what this file passes its classes by position (their defaults may not be
        # what the factory builds)
        for info in config_of(model_module, project).classes.values():
            if _sizes_a_model(info.fields):
                yield from _built_by_position(inf, info)
    for module in modules:
        mc = config_of(module, project)
        for info in mc.classes.values():
            if _sizes_a_model(info.fields):
                yield from _built_by_position(inf, info)
                evaluator = ConfigEvaluator(module, project)
                group = {}
                for name in info.fields:
                    if _size_key(name):
                        found = evaluator.class_field(info, [name], "medium", 0)
                        if isinstance(found, Found):
                            group[name] = found
                yield group
            elif _sizes_a_model(info.init_defaults):
                # a config class whose __init__ keeps its keyword defaults (a T5Config subclass)
                evaluator = ConfigEvaluator(module, project)
                group = {}
                for name, (default, param) in info.init_defaults.items():
                    if _size_key(name):
                        found = evaluator.eval(default, info.scope, 0)
                        if isinstance(found, Found):
                            group[name] = Found(found.value, weaker(found.confidence, "medium"), Origin(module, param),
                                                f"{info.name}.__init__ default of {name}")
                yield group
    # 3. ml_collections configs: one (sub)dict that has both
    if project.file:
        for module in project.config_modules(_DEPTH_NAMES):
            entries = config_of(module, project).ml
            prefixes: dict[tuple, dict] = {}
            for key, found in entries.items():
                if key and _size_key(key[-1]):
                    prefixes.setdefault(key[:-1], {})[key[-1]] = found.capped("medium")
            for group in prefixes.values():
                yield group
    # 4. the constructor a project factory calls (`model = get_model(args)`), its keywords
    # read where the caller passes `args`
    for module, record, branch in factory_constructions(facts):
        named = [(_arg_name(a), a) for a in record.node.args]
        if _sizes_a_model({key for key, _ in named if key is not None}):
            evaluator = ConfigEvaluator(module, project)
            yield _group(named, lambda value, scope=record.scope: branch.argument(value) or evaluator.eval(value, scope))


def _built_by_position(inf: Evidence, info):
    """Groups from the file's constructions of a model or config class that pass its
    fields by position, in their declared order (`ViT(7, 10, 48, 3, 6, 192)` for a flax
    Module or dataclass with fields patch_size, out_features, width, depth, ...)."""
    if info.kind not in ("module", "dataclass"):
        return
    # The constructor's fields are the annotated attributes; a plain class attribute
    # (`dtype = jnp.float32`) is none of them.
    order = [name for name, (_, stmt) in info.fields.items()
             if any(isinstance(small, cst.AnnAssign) for small in getattr(stmt, "body", ()))]
    for record in inf.facts.calls_by_bare_name.get(info.name, ()):
        args = record.node.args
        if any(a.star for a in args) or not any(a.keyword is None for a in args):
            continue
        named = [(order[i] if i < len(order) else None, a) for i, a in enumerate(args) if a.keyword is None]
        named += [(a.keyword.value, a) for a in args if a.keyword is not None]
        if _sizes_a_model({key for key, _ in named if key is not None}):
            yield _group(named, lambda value, scope=record.scope: inf.ev.eval(value, scope))


def _group(named, evaluate) -> dict:
    """{size name: Found} from a call's (name, argument) pairs, the first of each name."""
    group = {}
    for key, arg in named:
        if _size_key(key) and key not in group:
            found = evaluate(arg.value)
            if isinstance(found, Found):
                group[key] = found
    return group


def _arg_name(arg: cst.Arg) -> Optional[str]:
    if arg.keyword is not None:
        return arg.keyword.value
    if arg.star == "" and isinstance(arg.value, cst.Name):
        return arg.value.value
    return None


def _positive_number(value) -> bool:
    """A positive int or float (an MLP ratio may be 2.5)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _estimate(group: dict) -> Optional[tuple[int, int, str, str, Optional[Origin]]]:
    """(params, of which the token embedding, detail, confidence, origin)."""
    def pick(names, test=positive_int):
        for name in names:
            found = group.get(name)
            if found is not None and test(found.value):
                return name, found
        return None

    plain, enc, dec = pick(_L_NAMES), pick(_ENC_NAMES), pick(_DEC_NAMES)
    width, vocab, ff = pick(_D_NAMES), pick(_V_NAMES), pick(_FF_NAMES)
    if width is not None and width[0] == "hidden_dim":
        # beside another width name (`embedding_dim=768, hidden_dim=768 * 4`, equinox's ViT
        # ports), hidden_dim is the MLP's width
        other = pick(_D_NAMES[_D_NAMES.index("hidden_dim") + 1:])
        if other is not None:
            width, ff = other, ff or width
    heads, head_size = pick(_HEADS_NAMES), pick(_HEAD_SIZE_NAMES)
    # the encoder's depth: its own name, else T5's num_layers beside num_decoder_layers
    encoder = enc or (plain if dec else None)
    if not (plain or enc or dec) and _paper_notation(set(group)):
        paper = pick((_PAPER_DEPTH,))
        if paper is not None:
            encoder, dec = paper, paper  # N encoder layers and N decoder layers
    if not (plain or enc or dec or encoder):
        parts = [(name, found) for name, found in group.items() if _BLOCK_PART.match(name) and positive_int(found.value)]
        if parts:
            confidence = "medium"
            for _, found in parts:
                confidence = weaker(confidence, found.confidence)
            total_depth = sum(int(found.value) for _, found in parts)
            plain = (" + ".join(name for name, _ in parts), Found(total_depth, confidence, parts[0][1].origin, "sum of block counts"))
    if encoder and dec:
        stacks = [(encoder, 4), (dec, 8)]  # a decoder layer adds cross-attention: 4 d^2 more
    elif enc or dec or plain:
        stacks = [(plain or enc or dec, 4)]
    else:
        return None
    used = [found for (_, found), _ in stacks]
    if width is not None:
        d, width_terms = int(width[1].value), f"d={int(width[1].value)} ({width[0]})"
        used.append(width[1])
    elif heads is not None and head_size is not None:
        d = int(heads[1].value) * int(head_size[1].value)
        width_terms = f"d={d} ({heads[0]} x {head_size[0]})"
        used += [heads[1], head_size[1]]
    else:
        return None
    factor = pick(_FF_FACTOR_NAMES, _positive_number)
    if ff:
        d_ff, ff_terms = int(ff[1].value), f"d_ff={int(ff[1].value)} ({ff[0]})"
        used.append(ff[1])
    elif factor:
        d_ff = int(round(float(factor[1].value) * d))
        ff_terms = f"d_ff={d_ff} ({factor[0]} x d)"
        used.append(factor[1])
    else:
        d_ff, ff_terms = 4 * d, f"d_ff={4 * d} (4d)"
    V = int(vocab[1].value) if vocab else 0
    embedding = V * d
    total = sum(int(found.value) * (attention * d * d + 2 * d * d_ff) for (_, found), attention in stacks) + embedding
    used += [vocab[1]] if vocab else []
    confidence = "medium"
    for found in used:
        confidence = weaker(confidence, found.confidence)
    if len(stacks) == 2:
        (enc_name, enc_found), (dec_name, dec_found) = stacks[0][0], stacks[1][0]
        depth_terms = f"L={int(enc_found.value)}+{int(dec_found.value)} ({enc_name}, {dec_name}; decoder layers with cross-attention)"
        formula = "L_enc*(4d^2 + 2*d*d_ff) + L_dec*(8d^2 + 2*d*d_ff) + V*d"
    else:
        (name, found), _ = stacks[0]
        depth_terms = f"L={int(found.value)} ({name})"
        formula = "L*(4d^2 + 2*d*d_ff) + V*d"
    terms = f"{depth_terms}, {width_terms}, {ff_terms}" + (f", V={V} ({vocab[0]})" if vocab else ", no vocabulary")
    detail = f"estimated {formula} with {terms}"
    if embedding:
        detail += f" ({_count(total - embedding)} outside the {V} x {d} embedding)"
    origin = (width[1] if width is not None else heads[1]).origin or used[0].origin
    return total, embedding, detail, confidence, origin


def _count(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.0f}K"
