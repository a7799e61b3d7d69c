"""The architecture a file trains (the `arch` field): the layers its model classes
build (flax.linen / nnx / haiku / equinox: attention -> transformer, Conv -> cnn,
LSTM/GRU cells -> rnn, only Dense -> mlp), following classes used by classes, the
project modules the file imports its model from, and the project function that builds
it (`state, model = load_train_state(...)`, one hop); class names (Transformer, GPT,
BERT, ViT, ResNet, `...ForCausalLM`, ...) when no layer settles it, never the name of a
tokenizer, config, collator or data loader."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from optax_lint.facts.context.evidence import Evidence, last_name
from optax_lint.facts.context.run_context import ContextValue
from optax_lint.facts.project.files import defines_function
from optax_lint.facts.project.evaluate import ConfigEvaluator
from optax_lint.facts.project.found import Found, Origin, weaker
from optax_lint.syntax.arguments import param_arg
from optax_lint.syntax.names import lookup, module_function, qualified_name
from optax_lint.syntax.nodes import spells_test_case
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import Scope, inside_scope

_LIBRARIES = ("flax.linen.", "flax.nnx.", "flax.experimental.nnx.", "haiku.", "equinox.", "jax.nn.", "flaxformer.", "praxis.", "jraph.")
_ATTENTION = frozenset(
    {
        "MultiHeadDotProductAttention", "SelfAttention", "MultiHeadAttention", "MultiheadAttention",
        "dot_product_attention", "DotProductAttention", "MultiQueryDotProductAttention",
    }
)
_CONV = frozenset(
    {
        "Conv", "ConvTranspose", "ConvLocal", "Conv1D", "Conv2D", "Conv3D", "ConvND", "Conv1d", "Conv2d",
        "Conv3d", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose", "ConvNDTranspose",
        "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    }
)
_RNN = frozenset(
    {"LSTMCell", "OptimizedLSTMCell", "GRUCell", "RNN", "Bidirectional", "MGUCell", "SimpleCell", "LSTM", "GRU", "VanillaRNN", "ConvLSTMCell", "DeepRNN"}
)
# jraph's message-passing networks: a graph network, whatever attention it reads out with.
_GRAPH = frozenset({"GraphNetwork", "GraphConvolution", "GAT", "InteractionNetwork", "RelationNetwork", "GraphNetGAT", "DeepSets"})
_DENSE = frozenset({"Dense", "DenseGeneral", "Linear", "MLP", "Einsum", "LinearGeneral"})
_WRAPPERS = frozenset({"partial", "remat", "checkpoint", "scan", "vmap", "jit", "Remat", "Scan", "Vmap", "transform", "without_apply_rng", "transform_with_state", "Sequential"})
_NAME_ARCH = (
    (
        "transformer",
        re.compile(
            # "Seq2Seq" alone names a task (classic seq2seq models are LSTMs), not an
            # architecture; Hugging Face's *ForSeq2SeqLM heads are Transformers.
            # "Attentional" describes attention pooling inside another model (an attentional
            # factorization machine), not a Transformer.
            r"Transformer|GPT|Bert|BERT|ViT|VisionTransformer|T5|Llama|LLaMA|Gemma|Mistral|Decoder(Only)?LM|Perceiver|Mixtral|Qwen|Attention(?!al)"
            # Hugging Face's language-model heads and families: every one is a Transformer.
            r"|ForCausalLM|ForMaskedLM|ForSeq2SeqLM|LMHeadModel|ForConditionalGeneration|Whisper|Wav2Vec2|Bart|Roberta|Electra|Bloom|Marian|Pegasus|Longformer"
            # Its text-task heads too: every Flax model behind them is a Transformer encoder.
            r"|ForSequenceClassification|ForTokenClassification|ForQuestionAnswering|ForMultipleChoice|ForNextSentencePrediction|ForPreTraining"
        ),
    ),
    ("cnn", re.compile(r"ResNet|Resnet|CNN|ConvNet|Convnet|VGG|UNet|Unet|LeNet|AlexNet|Inception|MobileNet|EfficientNet|DenseNet|WideResNet|ConvNeXt")),
    ("rnn", re.compile(r"LSTM|GRU|RNN|Recurrent")),
)


def _layer_arch(name: Optional[str]) -> Optional[str]:
    if not name or not name.startswith(_LIBRARIES):
        return None
    last = name.rsplit(".", 1)[-1]
    if last in _ATTENTION:
        return "transformer"
    if last in _CONV:
        return "cnn"
    if last in _RNN:
        return "rnn"
    if last in _GRAPH and name.startswith("jraph."):
        return "gnn"
    if last in _DENSE:
        return "mlp"
    return None


# Helpers named like a model family that are not models: a Seq2Seq data collator, a GPT
# tokenizer, a BERT config or dataset, a GPT3Optimizer says nothing about the layers trained.
_NOT_A_MODEL = re.compile(r"Collator|Tokenizer|Config|Dataset|DataLoader|Processor|FeatureExtractor|Scheduler|Optimizer")


# Names of Transformer models, not of an attention block inside another network.
_TRANSFORMER_MODEL = re.compile(r"\b(class )?\w*(Transformer|ViT|GPT|Bert|BERT|Llama|LLaMA|Gemma|Mistral|Qwen|DecoderLM)\w*")


# State-space and linear-recurrence model families: no attention, whatever head their
# class is named for (`FlaxMambaLMHeadModel`).
_NOT_ATTENTION_FAMILY = re.compile(r"Mamba|SSM|Ssm|RWKV|Rwkv|Hyena|RetNet|GateLoop|LinearRNN")


def name_arch(name: str) -> Optional[str]:
    if _NOT_A_MODEL.search(name) or _NOT_ATTENTION_FAMILY.search(name):
        return None
    for arch, pattern in _NAME_ARCH:
        if pattern.search(name):
            return arch
    return None


@dataclass
class Signal:
    arch: str
    origin: Origin
    label: str  # "nn.MultiHeadDotProductAttention in EncoderBlock"
    by_name: bool = False
    scope: Optional[Scope] = None  # where it is built (layers built outside any class)


@dataclass
class ClassModel:
    name: str
    scope: Scope
    signals: list[Signal] = field(default_factory=list)
    uses: list[str] = field(default_factory=list)  # classes of the same module it builds
    imports: list[tuple[str, cst.CSTNode]] = field(default_factory=list)  # imported callables it builds


# Class methods that construct the class they are called on.
_CLASS_CONSTRUCTORS = frozenset({"from_pretrained", "from_config", "load_pretrained"})
_MODEL_NAME = re.compile(r"(^|_)(model|net|network|module)s?($|_)", re.IGNORECASE)


# Wrappers that turn a function into a model (haiku).
_TRANSFORMS = frozenset({"transform", "transform_with_state", "without_apply_rng", "multi_transform"})
# A model family in a function's name: `forward_llama`, `init_gpt2`, `bert_encoder`.
_FUNCTION_ARCH = re.compile(r"(^|_)(transformer|llama|gpt2?|gptj|bert|t5|vit|gemma|mistral|qwen|whisper)(_|$)")


_FORWARD = re.compile(r"^(forward|apply|call)_")


def _function_arch(name: str) -> Optional[str]:
    if _NOT_A_MODEL.search(name) or re.search(r"(^|_)(tokeni[sz]e|collate|load|data|config)", name):
        return None
    return "transformer" if _FUNCTION_ARCH.search(name) else None


def _inside_transform(record) -> bool:
    parent = record.parent_call
    if parent is None:
        return False
    func = parent.func
    last = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else "")
    return last in _TRANSFORMS


def _binds_a_model(target) -> bool:
    """`model = f(...)`, `state, model = f(...)`, `lm_model = ...`."""
    if isinstance(target, cst.Name):
        return bool(_MODEL_NAME.search(target.value))
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds_a_model(element.value) for element in target.elements)
    return False


class ModelIndex:
    """Which layers each class of a module builds, and which classes the module code uses."""

    def __init__(self, facts) -> None:
        self.facts = facts
        self.classes: dict[str, ClassModel] = {}
        self.direct: list[Signal] = []  # layers built outside any class
        self.used: list[tuple[str, cst.CSTNode, Scope]] = []  # module classes built outside classes
        self.used_imports: list[tuple[str, cst.CSTNode, Scope]] = []
        # Classes built inside a class, with where: ("use", local class name | "import",
        # qualified name, node, scope, owner). A class that builds no layer of its own (a
        # trainer) is no model: what it constructs is (see infer_arch).
        self.built_in_classes: list[tuple[str, str, cst.CSTNode, Scope, str]] = []
        # Imported functions whose result the code outside classes binds to a model name
        # (`state, model = load_train_state(...)`): the model is built in their module.
        self.model_helpers: list[tuple[str, cst.CSTNode, Scope, str]] = []
        for scope in facts.raw.scopes:
            if scope.kind == "class" and isinstance(scope.node, cst.ClassDef) and not _test_class(scope.node):
                self.classes.setdefault(scope.name, ClassModel(scope.name, scope))
        for record in facts.raw.calls:
            owner = record.scope.enclosing_class()
            model = self.classes.get(owner.name) if owner is not None else None
            if model is not None and model.scope is not owner:
                model = None  # a test class, or a nested class of the same name
            self._note(record.node.func, record.scope, model, record.node)
            func = record.node.func
            if model is None:
                self._note_helper(func, record, "bound" if _binds_a_model(record.assigned_to) else None)
            last = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else "")
            if last in _WRAPPERS and record.node.args:
                self._note(record.node.args[0].value, record.scope, model, record.node)
                if model is None and (last in _TRANSFORMS or _inside_transform(record)):
                    # `hk.transform(partial(transformer.decoder, config=c))`: a model function
                    self._note_helper(record.node.args[0].value, record, "wrapped")

    def _note_helper(self, expr: cst.BaseExpression, record, how: Optional[str]) -> None:
        """An imported function (lower-case name) that builds the model: its result is
        bound to a model name (`how` "bound"), it is the function a transform wraps
        ("wrapped"), or its name says it is a model's forward pass (`forward_llama`)."""
        if not isinstance(expr, (cst.Name, cst.Attribute)):
            return
        qual = qualified_name(expr, record.scope)
        if not qual or qual.startswith(_LIBRARIES):
            return
        short = qual.rsplit(".", 1)[-1]
        if not short[:1].islower():
            return
        if how is None and _function_arch(short) is not None and _FORWARD.match(short):
            how = "forward"
        if how is not None:
            self.model_helpers.append((qual, record.node, record.scope, how))

    def _note(self, expr: cst.BaseExpression, scope: Scope, model: Optional[ClassModel], node: cst.CSTNode) -> None:
        if not isinstance(expr, (cst.Name, cst.Attribute)):
            return
        if isinstance(expr, cst.Attribute) and expr.attr.value in _CLASS_CONSTRUCTORS:
            expr = expr.value  # `FlaxGPT2LMHeadModel.from_pretrained(...)` builds the class
        facts = self.facts
        name = facts.canonical(expr, scope)
        arch = _layer_arch(name)
        if arch is not None:
            where = f" in {model.name}" if model is not None else ""
            signal = Signal(arch, Origin(facts, node), f"{cst.Module([]).code_for_node(expr)}{where}", scope=scope)
            (model.signals if model is not None else self.direct).append(signal)
            return
        if isinstance(expr, cst.Name):
            _, bindings = lookup(expr.value, scope)
            if len(bindings) == 1 and bindings[0].kind == "class" and expr.value in self.classes:
                if model is not None:
                    if expr.value != model.name:
                        model.uses.append(expr.value)
                        self.built_in_classes.append(("use", expr.value, node, scope, model.name))
                else:
                    self.used.append((expr.value, node, scope))
                return
        qual = qualified_name(expr, scope)
        if qual and not qual.startswith(_LIBRARIES) and qual.rsplit(".", 1)[-1][:1].isupper():
            if model is not None:
                model.imports.append((qual, node))
                self.built_in_classes.append(("import", qual, node, scope, model.name))
            else:
                self.used_imports.append((qual, node, scope))

    def closure(self, name: str) -> tuple[list[Signal], list[tuple[str, cst.CSTNode]], list[str]]:
        """Signals, imported callables and class names reachable from class `name`."""
        signals: list[Signal] = []
        imports: list[tuple[str, cst.CSTNode]] = []
        seen: list[str] = []
        stack = [name]
        while stack:
            current = stack.pop()
            if current in seen or current not in self.classes:
                continue
            seen.append(current)
            model = self.classes[current]
            signals.extend(model.signals)
            imports.extend(model.imports)
            stack.extend(reversed(model.uses))
        return signals, imports, seen

    def attention_signals(self) -> dict[str, list[Signal]]:
        """Per class, the attention layers its own code builds (read from the layers, not
        from a name), for the classes that build any."""
        out: dict[str, list[Signal]] = {}
        for name, model in self.classes.items():
            found = [s for s in model.signals if s.arch == "transformer" and not s.by_name]
            if found:
                out[name] = found
        return out

    def roots(self) -> list[str]:
        """Classes that build layers and are not built by another class of the module."""
        inner = {u for m in self.classes.values() for u in m.uses}
        out = []
        for name, model in self.classes.items():
            if name in inner:
                continue
            signals, _, _ = self.closure(name)
            if signals or name_arch(name):
                out.append(name)
        return out


_NOT_MODELS = re.compile(r"(Test|Tests|TestCase)$|^(Test|Mock|Fake|Dummy|Stub)")


def _test_class(node: cst.ClassDef) -> bool:
    """A TestCase (or a mock standing in for a model): its name says nothing about
    what the file trains."""
    if _NOT_MODELS.search(node.name.value):
        return True
    return any(spells_test_case(base.value) for base in node.bases)



def _decide(signals: list[Signal], names: list[str]) -> Optional[tuple[str, Signal, str]]:
    """(arch, deciding signal, confidence) from layer signals, then class names."""
    kinds = {s.arch for s in signals if not s.by_name}
    pick = None
    if "transformer" in kinds:
        if "cnn" in kinds and any(name_arch(n) == "cnn" for n in names):
            return None  # a convolutional net with attention blocks (a diffusion UNet): not clear
        if "rnn" in kinds or "gnn" in kinds:
            # a recurrent net with an attention layer (a Bahdanau seq2seq), a graph network
            # with an attention readout: not a Transformer stack
            return None
        pick = "transformer"
    elif "rnn" in kinds:
        pick = "rnn"
    elif "cnn" in kinds:
        # A ViT whose attention is written by hand: its only library layers are the patch
        # embedding's Conv and Dense, and its classes are named for a Transformer model
        # (`class ViT`, `class Transformer`; a class named only for an attention block,
        # as CNNs have, does not count).
        named = [s for s in signals if s.by_name and s.arch == "transformer" and _TRANSFORMER_MODEL.search(s.label)]
        if named and not any(name_arch(n) == "cnn" for n in names):
            return "transformer", named[0], "medium"
        pick = "cnn"
    if pick is not None:
        signal = next(s for s in signals if s.arch == pick and not s.by_name)
        return pick, signal, "high"
    named = [s for s in signals if s.by_name]
    named_kinds = {s.arch for s in named}
    if len(named_kinds) == 1:
        return named[0].arch, named[0], "medium"
    if "mlp" in kinds and not named_kinds:
        return "mlp", next(s for s in signals if s.arch == "mlp"), "medium"
    return None


def infer_arch(inf: Evidence, context) -> Optional[ContextValue]:
    facts = inf.facts
    index = facts.model_index
    # Only the model the training code builds counts: a `*Transformer*` mock or
    # class elsewhere in the file says nothing about this optimizer.
    keep = facts.training_region
    signals: list[Signal] = [s for s in index.direct if keep(s.scope)]
    imports: list[tuple[str, cst.CSTNode]] = [(q, n) for q, n, scope in index.used_imports if keep(scope)]
    names: list[str] = []
    used = [
        name for name, _, scope in index.used
        if keep(scope) and not _NOT_A_MODEL.search(name) and (index.closure(name)[0] or index.closure(name)[1] or name_arch(name))
    ]
    # Model classes defined here but built elsewhere: only when nothing in this file
    # builds a class at all (else the training code's own model would have shown).
    top = used or ([] if index.used else index.roots())
    for name in dict.fromkeys(top):
        found, imported, reached = index.closure(name)
        signals.extend(found)
        imports.extend(imported)
        names.append(name)
        signals.extend(_named_like_models(facts, reached))
    confidence_cap = "high" if used or index.direct else "medium"
    decided = _decide(signals, names)
    if decided is None or decided[2] != "high":
        # Model code in the project modules the file imports it from.
        for qual, node in dict.fromkeys(imports):
            more = _imported_model(facts, qual, node)
            signals.extend(more)
            names.append(qual.rsplit(".", 1)[-1])
        decided = _decide(signals, names)
    if decided is None and not signals:
        # The model is built by a project function the training code calls.
        for qual, node, scope, how in index.model_helpers:
            if keep(scope):
                found, built = _helper_model(facts, qual, node, how, inf.note, scope)
                signals.extend(found)
                names.extend(built)  # a `UNet` the helper builds marks its attention as a block
        decided = _decide(signals, names)
    if decided is None and not signals:
        # The model a class that builds no layer of its own constructs in a method (a
        # trainer's `model = Forecaster(...)`): that class is no model, what it builds is.
        for kind, value, node, scope, owner in index.built_in_classes:
            holder = index.classes.get(owner)
            if holder is None or holder.signals or name_arch(owner) or not keep(scope):
                continue
            if kind == "use":
                found, imported, reached = index.closure(value)
                signals.extend(found)
                for qual, imported_node in imported:
                    signals.extend(_imported_model(facts, qual, imported_node))
                signals.extend(_named_like_models(facts, reached))
            else:
                signals.extend(_imported_model(facts, value, node))
            names.append(value.rsplit(".", 1)[-1])
        decided = _decide(signals, names)
    if decided is None and not signals:
        picked = _picked_by_name(inf)
        if picked is not None:
            return picked
    if decided is None:
        kinds = sorted({s.arch for s in signals})
        if kinds:
            inf.note("arch", "conflicting model evidence: " + ", ".join(f"{s.label} ({s.arch})" for s in signals[:4]))
        else:
            inf.note("arch", "no model code (flax/nnx/haiku/equinox layers) in this file or the project modules it imports")
        return None
    several = _several_models_trained(facts)
    if several is not None:
        inf.note("arch", f"{decided[1].label} is one model, but {several}: which one each optimizer trains is not known")
        return None
    arch, signal, confidence = decided
    confidence = weaker(confidence, confidence_cap if signal.origin.facts is facts else "high")
    detail = signal.label
    if names and not signal.by_name and names[0] not in signal.label and signal.origin.facts is facts:
        detail += f", used by {names[0]}"
    return ContextValue(arch, "inferred", None, confidence, detail, locate=signal.origin.location, by_name=signal.by_name,
                        module=signal.origin.facts)


# Keywords by which a trainer takes the model it trains with the optimizer.
_MODEL_KEYWORDS = frozenset({"model", "module", "net", "network", "apply_fn", "policy"})


def _several_models_trained(facts) -> Optional[str]:
    """"optimizers are handed with different models (trainer(model=mlp, optimizer=adam),
    trainer(model=gemma, optimizer=adamw))" when a file (a notebook, say) trains two
    models with two optimizers; None otherwise. The file-wide architecture then belongs
    to one of them, not to each."""
    pipelines = facts.pipelines
    if len(pipelines) < 2:
        return None
    by_call = {p.call: p for p in pipelines}
    by_name = {p.name: p for p in pipelines if p.name}
    pairs: dict[str, object] = {}
    for record in facts.raw.calls:
        call = record.node
        pipeline, model = None, None
        for index, arg in enumerate(call.args):
            value = arg.value
            if pipeline is None and (value in by_call or isinstance(value, cst.Name) and value.value in by_name):
                pipeline = by_call.get(value) or by_name.get(getattr(value, "value", None))
            elif arg.keyword is not None and arg.keyword.value in _MODEL_KEYWORDS or (
                index == 0 and arg.keyword is None and last_name(call.func) == "Optimizer"
            ):
                root = value
                while isinstance(root, cst.Attribute):  # `model.apply` -> model
                    root = root.value
                model = root.value if isinstance(root, cst.Name) else None
        if pipeline is not None and model is not None:
            known = pairs.get(model)
            if known is not None and known is not pipeline:
                continue  # one model, several optimizers (a sweep): not several models
            pairs[model] = pipeline
    if len(pairs) >= 2 and len({id(p) for p in pairs.values()}) >= 2:
        names = sorted(pairs)[:3]
        return "optimizers are handed with different models (" + ", ".join(f"`{n}`" for n in names) + ")"
    return None


def _named_like_models(module, class_names: list[str]) -> list[Signal]:
    """Weak signals (by name alone) for the classes of `module` named like a model
    (`class GPT`), among the classes a model reaches."""
    index = module.model_index
    out = []
    for name in class_names:
        arch = name_arch(name)
        if arch is not None and not _plain_class(index.classes[name].scope.node):
            out.append(Signal(arch, Origin(module, index.classes[name].scope.node), f"class {name}", by_name=True))
    return out


# Bases that make no network module: a class of these (or of none) builds no layer, so
# its name (`AttentionSplit`, a soft-tree split function) says nothing of a model,
# unless it is a factory (`AutoModelForCausalLM.from_pretrained`) whose product it names.
_PLAIN_BASES = frozenset({"object", "NamedTuple", "Enum", "ABC", "Protocol"})


def _plain_class(node: cst.CSTNode) -> bool:
    if not isinstance(node, cst.ClassDef):
        return False
    if not all(isinstance(b.value, cst.Name) and b.value.value in _PLAIN_BASES for b in node.bases):
        return False
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    return not any(isinstance(s, cst.FunctionDef) and s.name.value in _CLASS_CONSTRUCTORS for s in body)


def _torch_or_keras_model(qual: str) -> bool:
    """A `transformers` model class without the `Flax` prefix (`EsmForMaskedLM`,
    `TFBertModel`): PyTorch or Keras weights, which optax never updates."""
    return qual.startswith("transformers.") and not qual.rsplit(".", 1)[-1].startswith("Flax")


def _imported_model(facts, qual: str, node: cst.CSTNode) -> list[Signal]:
    short = qual.rsplit(".", 1)[-1]
    if _NOT_A_MODEL.search(short):
        return []  # a config or data class names the model's family but builds no layer
    if _torch_or_keras_model(qual):
        return []  # a PyTorch model beside the flax one (embeddings, a later section)
    project = facts.project
    found = project.module_of(qual, facts, [short], accept=_may_build_layers)
    if found is not None and len(found[1]) == 1:
        module, rest = found
        index = module.model_index
        if rest[0] in index.classes:
            signals, _, reached = index.closure(rest[0])
            out = signals + _named_like_models(module, reached)
            return [Signal(s.arch, s.origin, f"{s.label} ({module.display_path}, used as {short})", s.by_name) for s in out]
    arch = name_arch(short)
    if arch is not None:
        return [Signal(arch, Origin(facts, node), f"{short} (imported model)", by_name=True)]
    return []


_LAYER_WORDS = re.compile(r"\b(" + "|".join(sorted(_ATTENTION | _CONV | _RNN | _DENSE)) + r")\b")
_CLASS_NAMES = re.compile(r"^[ \t]*class[ \t]+(\w+)", re.M)


def _may_build_layers(text: str, rest: list[str]) -> bool:
    """Whether parsing the module could change what `_imported_model` finds for class
    `rest[0]`: it must be defined there, and some layer's name or some class named like a
    model must appear in the text; otherwise both the parse and the name fallback give
    the same answer. Most imported callables are data types and helpers: this saves
    their parse."""
    if len(rest) != 1 or not re.search(rf"^[ \t]*class[ \t]+{re.escape(rest[0])}\b", text, re.M):
        return False
    return bool(_LAYER_WORDS.search(text)) or any(name_arch(name) for name in _CLASS_NAMES.findall(text))


def _helper_model(facts, qual: str, node: cst.CSTNode, how: str, note=None,
                  scope: Optional[Scope] = None) -> tuple[list[Signal], list[str]]:
    """The layers of the models a project function builds (`load_train_state` in
    `lm/load.py` building `FlaxGPT2LMHeadModel` of `lm/model.py`), and the names of the
    model classes it builds: one hop, the function's own body. A function whose body is
    not read says what it is by its name only when it is the model itself: the function
    a transform wraps, or its forward pass (`forward_llama`); a constructor from a
    library (`gemma_from_checkpoint`) may build one of several models a notebook trains."""
    short = qual.rsplit(".", 1)[-1]
    defined = _project_function(facts, qual)
    if defined is None:
        arch = _function_arch(short) if how in ("wrapped", "forward") else None
        return ([Signal(arch, Origin(facts, node), f"{short}() (imported model function)", by_name=True)] if arch else []), []
    module, name, inside = defined
    index = module.model_index

    out: list[Signal] = [s for s in index.direct if inside_scope(s.scope, inside)]
    models: list[tuple[str, list[Signal]]] = []  # each model class the function builds
    branch = _Branches(facts, node, scope, module, inside)
    for class_name, built, where in index.used:
        if inside_scope(where, inside) and branch.may_run(built):
            found_signals, _, reached = index.closure(class_name)
            models.append((class_name, found_signals + _named_like_models(module, reached)))
    for imported, built, where in index.used_imports:
        if inside_scope(where, inside) and branch.may_run(built):
            models.append((imported.rsplit(".", 1)[-1], _imported_model(module, imported, built)))
    decisions = [_decide(signals, [model]) for model, signals in models if signals]
    if len({d[0] if d else None for d in decisions}) > 1:
        # `if args.model_name == "egnn": ... elif ... == "transformer": ...`: one of
        # several models, picked by a setting: which one trains is not known here
        if note is not None:
            shown = ", ".join(dict.fromkeys(model for model, signals in models if signals))
            note("arch", f"{short}() builds one of several models ({shown}), picked at run time")
        return [], []
    for _, signals in models:
        out.extend(signals)
    if not out and _function_arch(name) is not None:
        out.append(Signal(_function_arch(name), Origin(module, inside.node), f"function {name}", by_name=True))
    built = [model for model, signals in models if signals]
    return [Signal(s.arch, s.origin, f"{s.label}, built by {short}()", s.by_name) for s in out], built


class _Branches:
    """Which models a factory builds for the call that reaches it: `get_model(args)`
    with `if args.model_name == "egnn": ... elif args.model_name == "transformer": ...`,
    where the caller's `args.model_name` is known (an argparse default, a config
    field), takes one branch. A condition it cannot read keeps the branch."""

    def __init__(self, facts, call: cst.CSTNode, scope: Optional[Scope], module, function: Scope) -> None:
        self.facts, self.call, self.scope, self.module, self.function = facts, call, scope, module, function
        self.reads = isinstance(call, cst.Call) and bool(call.args) and isinstance(function.node, cst.FunctionDef) and scope is not None

    def may_run(self, built: cst.CSTNode) -> bool:
        record = self.module.record_of.get(built) if self.reads else None
        if record is None:
            return True
        for branch, in_body in self.module.raw.enclosing_ifs(record.statement, self.function.node):
            holds = self._truth(branch.test)
            if holds is not None and holds != in_body:
                return False
        return True

    def _truth(self, test: cst.BaseExpression) -> Optional[bool]:
        if isinstance(test, cst.BooleanOperation):
            left, right = self._truth(test.left), self._truth(test.right)
            if isinstance(test.operator, cst.And):
                return False if False in (left, right) else (True if left and right else None)
            return True if True in (left, right) else (False if left is False and right is False else None)
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return None
        target = test.comparisons[0]
        value = self._argument_value(test.left)
        wanted = value_of(target.comparator, self.function)
        if value is None or isinstance(wanted, Unknown):
            return None
        if isinstance(target.operator, cst.Equal):
            return value == wanted
        if isinstance(target.operator, cst.NotEqual):
            return value != wanted
        if isinstance(target.operator, cst.In) and isinstance(wanted, (tuple, list)):
            return value in wanted
        return None

    def _argument_value(self, expr: cst.BaseExpression):
        """`args.model_name` in the factory, as the caller's argument holds it."""
        found = self.argument(expr)
        value = found.value if found is not None else None
        return value if isinstance(value, (str, int, float, bool)) else None

    def argument(self, expr: cst.BaseExpression) -> Optional[Found]:
        """`args.dim` in the factory, read where the caller passes `args` (an argparse
        default, a config field), with that reading's confidence and provenance."""
        passed = self._passed(expr)
        if passed is None:
            return None
        found = ConfigEvaluator(self.facts).eval(passed, self.scope)
        return found if isinstance(found, Found) else None

    def _passed(self, expr: cst.BaseExpression) -> Optional[cst.Attribute]:
        if not (self.reads and isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)):
            return None
        passed = param_arg(self.call, self.function.node, expr.value.value)
        return None if passed is None else cst.Attribute(value=passed, attr=expr.attr)


def factory_constructions(facts) -> list[tuple[object, object, _Branches]]:
    """The calls inside each project function whose result the training code binds to its
    model (`model = get_model(args)`), in the branches the caller's arguments take:
    (the function's module, the call's record, the reader of the caller's arguments)."""
    if facts.project is None or not facts.project.file:
        return []
    out = []
    for qual, node, scope, how in facts.model_index.model_helpers:
        defined = _project_function(facts, qual) if how == "bound" else None
        if defined is None:
            continue
        module, _, inside = defined
        branch = _Branches(facts, node, scope, module, inside)
        for record in module.raw.calls:
            if inside_scope(record.scope, inside) and branch.may_run(record.node):
                out.append((module, record, branch))
    return out


def _project_function(facts, qual: str) -> Optional[tuple[object, str, Scope]]:
    """(module, name, scope) of the module-level project function `qual` names."""
    short = qual.rsplit(".", 1)[-1]
    found = facts.project.module_of(qual, facts, [short], accept=defines_function)
    if found is None or len(found[1]) != 1:
        return None
    module, (name,) = found
    inside = module_function(module.raw, name)
    return None if inside is None else (module, name, inside)


def _picked_by_name(inf: Evidence) -> Optional[ContextValue]:
    """`getattr(models, config.model)` in the training code: the model class is picked
    by name from a project module. When every model class there builds the same kind of
    layers (all convolutional, say), that is the architecture, at medium confidence."""
    facts = inf.facts
    keep = facts.training_region
    for record in facts.raw.calls:
        func = record.node.func
        if not (isinstance(func, cst.Name) and func.value == "getattr" and len(record.node.args) >= 2 and keep(record.scope)):
            continue
        holder = record.node.args[0].value
        if not isinstance(holder, cst.Name):
            continue
        _, bindings = lookup(holder.value, record.scope)
        if len(bindings) != 1 or bindings[0].kind != "import" or not bindings[0].qualname:
            continue
        found = facts.project.module_of(bindings[0].qualname, facts)
        if found is None or found[1]:
            continue
        module = found[0]
        index = module.model_index
        roots = index.roots()
        archs, first = set(), None
        for name in roots:
            decided = _decide(index.closure(name)[0], [name])
            if decided is None or decided[2] != "high":
                archs.add(None)
                continue
            archs.add(decided[0])
            first = first or (name, decided[1])
        if len(archs) != 1 or None in archs or first is None:
            continue
        arch = archs.pop()
        name, signal = first
        picked = cst.Module([]).code_for_node(record.node)
        detail = f"{picked} picks a model class by name; every one in {module.display_path} ({', '.join(roots)}) builds {arch} layers ({signal.label})"
        return ContextValue(arch, "inferred", None, "medium", detail, locate=signal.origin.location)
    return None
