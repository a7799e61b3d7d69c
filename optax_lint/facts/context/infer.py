"""Inferring the run context from the code (see context.py for the interface).

One method per field, each called at most once per file and only when a rule (or
`--show-context`) asks for a field nobody declared. What is read, per field:

- arch: the model classes in the file (flax.linen / nnx / haiku / equinox layers:
  attention -> transformer, Conv -> cnn, LSTM/GRU cells -> rnn, only Dense -> mlp),
  following classes used by classes, and the project modules the file imports its
  model from; class names (Transformer, GPT, BERT, ViT, ResNet, ...) when no layer
  settles it.
- steps: the training loop (`for step in range(N)` around the train step, times an
  enclosing `for epoch in range(E)`, or E x steps_per_epoch around a data loop;
  `while step < N`), then names (`num_train_steps`, `total_steps`, `max_steps`, ...),
  then `epochs * steps_per_epoch`. Values may come from config objects resolved
  across files (project_config.py). Loop iterations are micro-batches under
  MultiSteps(k): steps = iterations // k.
- devices: `--xla_force_host_platform_device_count=N`, literal mesh shapes; a file
  with pmap/shard_map/mesh code whose device count is known only at run time stays
  unknown; a training loop with no multi-device code at all runs on 1 device.
- batch: `global_batch_size` / `per_device_batch_size` names; a plain `batch_size`
  is global when the code divides it by the device count, per-device when it
  multiplies it, and both on one device.
- grad_accum: `optax.MultiSteps(opt, every_k_schedule=k)`; 1 when the file builds its
  optimizer without MultiSteps.
- fine_tune: a checkpoint restored from a pretrained source (`from_pretrained`, a
  restore whose arguments say pretrained / init_checkpoint); False when the params
  come from `model.init` and nothing is restored or loaded.
- params: estimated for a Transformer from its config (layers L, width d, vocab V,
  MLP width d_ff, default 4d): params ~ L * (4 d^2 + 2 d d_ff) + V d.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from optax_lint.facts.context.run_context import ContextValue
from optax_lint.facts.project.evaluate import ConfigEvaluator, config_of
from optax_lint.facts.project.files import project_of
from optax_lint.facts.project.found import Found, Origin, weaker
from optax_lint.syntax.names import lookup, qualified_name
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import Scope

# ---------------------------------------------------------------------------
# Architecture

_LIBRARIES = ("flax.linen.", "flax.nnx.", "flax.experimental.nnx.", "haiku.", "equinox.", "jax.nn.", "flaxformer.", "praxis.")
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
_DENSE = frozenset({"Dense", "DenseGeneral", "Linear", "MLP", "Einsum", "LinearGeneral"})
_WRAPPERS = frozenset({"partial", "remat", "checkpoint", "scan", "vmap", "jit", "Remat", "Scan", "Vmap", "transform", "without_apply_rng", "transform_with_state", "Sequential"})
_NAME_ARCH = (
    ("transformer", re.compile(r"Transformer|GPT|Bert|BERT|ViT|VisionTransformer|T5|Llama|LLaMA|Gemma|Mistral|Decoder(Only)?LM|Seq2Seq|Perceiver|Mixtral|Qwen|Attention")),
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
    if last in _DENSE:
        return "mlp"
    return None


def _name_arch(name: str) -> Optional[str]:
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


class ModelIndex:
    """Which layers each class of a module builds, and which classes the module code uses."""

    def __init__(self, facts) -> None:
        self.facts = facts
        self.classes: dict[str, ClassModel] = {}
        self.direct: list[Signal] = []  # layers built outside any class
        self.used: list[tuple[str, cst.CSTNode, Scope]] = []  # module classes built outside classes
        self.used_imports: list[tuple[str, cst.CSTNode, Scope]] = []
        for scope in facts.raw.scopes:
            if scope.kind == "class" and isinstance(scope.node, cst.ClassDef) and not _test_class(scope.node):
                self.classes.setdefault(scope.name, ClassModel(scope.name, scope))
        for record in facts.raw.calls:
            owner = _enclosing_class(record.scope)
            model = self.classes.get(owner.name) if owner is not None else None
            if model is not None and model.scope is not owner:
                model = None  # a test class, or a nested class of the same name
            self._note(record.node.func, record.scope, model, record.node)
            func = record.node.func
            last = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else "")
            if last in _WRAPPERS and record.node.args:
                self._note(record.node.args[0].value, record.scope, model, record.node)

    def _note(self, expr: cst.BaseExpression, scope: Scope, model: Optional[ClassModel], node: cst.CSTNode) -> None:
        if not isinstance(expr, (cst.Name, cst.Attribute)):
            return
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
                else:
                    self.used.append((expr.value, node, scope))
                return
        qual = qualified_name(expr, scope)
        if qual and not qual.startswith(_LIBRARIES) and qual.rsplit(".", 1)[-1][:1].isupper():
            if model is not None:
                model.imports.append((qual, node))
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

    def roots(self) -> list[str]:
        """Classes that build layers and are not built by another class of the module."""
        inner = {u for m in self.classes.values() for u in m.uses}
        out = []
        for name, model in self.classes.items():
            if name in inner:
                continue
            signals, _, _ = self.closure(name)
            if signals or _name_arch(name):
                out.append(name)
        return out


_NOT_MODELS = re.compile(r"(Test|Tests|TestCase)$|^(Test|Mock|Fake|Dummy|Stub)")


def _test_class(node: cst.ClassDef) -> bool:
    """A TestCase (or a mock standing in for a model): its name says nothing about
    what the file trains."""
    if _NOT_MODELS.search(node.name.value):
        return True
    for base in node.bases:
        text = cst.Module([]).code_for_node(base.value)
        if text.endswith("TestCase"):
            return True
    return False


def _enclosing_class(scope: Optional[Scope]) -> Optional[Scope]:
    while scope is not None:
        if scope.kind == "class":
            return scope
        scope = scope.parent
    return None


def model_index(facts) -> ModelIndex:
    return facts.memo("context_models", ModelIndex)


def _decide(signals: list[Signal], names: list[str]) -> Optional[tuple[str, Signal, str]]:
    """(arch, deciding signal, confidence) from layer signals, then class names."""
    kinds = {s.arch for s in signals if not s.by_name}
    pick = None
    if "transformer" in kinds:
        if "cnn" in kinds and any(_name_arch(n) == "cnn" for n in names):
            return None  # a convolutional net with attention blocks (a diffusion UNet): not clear
        pick = "transformer"
    elif "rnn" in kinds:
        pick = "rnn"
    elif "cnn" in kinds:
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


# ---------------------------------------------------------------------------
# Steps, batch and friends

STEP_NAMES = frozenset(
    {
        "num_train_steps", "total_steps", "max_steps", "train_steps", "num_steps", "total_train_steps",
        "n_steps", "num_updates", "total_updates", "max_iters", "num_iterations", "training_steps",
        "total_training_steps", "max_train_steps", "num_training_steps", "n_iters", "num_iters",
    }
)
EPOCH_NAMES = frozenset({"num_epochs", "epochs", "n_epochs", "total_epochs", "max_epochs", "num_train_epochs", "train_epochs"})
STEPS_PER_EPOCH_NAMES = frozenset({"steps_per_epoch", "num_steps_per_epoch", "iters_per_epoch", "batches_per_epoch", "updates_per_epoch"})
GLOBAL_BATCH_NAMES = frozenset({"global_batch_size", "total_batch_size", "effective_batch_size", "global_batch"})
PER_DEVICE_BATCH_NAMES = frozenset(
    {"per_device_batch_size", "batch_size_per_device", "per_device_train_batch_size", "device_batch_size", "per_core_batch_size", "batch_per_device", "per_device_batch"}
)
PLAIN_BATCH_NAMES = frozenset({"batch_size", "train_batch_size", "batch"})
_STEP_CALL = re.compile(r"train_step|update_step|train_fn|step_fn|train_batch|train_iter|^update$|^step$|^apply_gradients$|update_model|do_step")
_MULTI_DEVICE_CALLS = frozenset(
    {
        "jax.pmap", "jax.pjit", "jax.experimental.pjit.pjit", "jax.shard_map", "jax.experimental.shard_map.shard_map",
        "jax.device_count", "jax.local_device_count", "jax.make_mesh", "jax.sharding.Mesh", "jax.sharding.NamedSharding",
        "jax.sharding.PositionalSharding", "jax.experimental.mesh_utils.create_device_mesh", "flax.jax_utils.replicate",
        "jax.lax.pmean", "jax.lax.psum", "jax.experimental.maps.Mesh", "jax.smap",
    }
)
_DEVICES = r"(?:jax\.)?(?:local_)?device_count\(\)|n_devices|num_devices|n_dev|ndev|device_count|num_local_devices"
_BATCH_WORD = re.compile(r"batch_size", re.IGNORECASE)
_DIVIDED = re.compile(rf"\s*(?://|/|%)\s*\(?\s*(?:{_DEVICES})", re.IGNORECASE)
_MULTIPLIED_AFTER = re.compile(rf"\s*\*\s*(?:{_DEVICES})", re.IGNORECASE)
_MULTIPLIED_BEFORE = re.compile(rf"(?:{_DEVICES})\s*\*\s*[\w.]*$", re.IGNORECASE)
_XLA_DEVICES = re.compile(r"xla_force_host_platform_device_count\s*=\s*(\d+)")
_RESTORE = frozenset(
    {
        "restore_checkpoint", "restore", "load", "from_bytes", "from_pretrained", "load_checkpoint", "restore_params",
        "load_params", "load_pretrained", "from_state_dict", "msgpack_restore", "load_variables", "restore_state",
    }
)
_PRETRAINED = re.compile(
    r"pre_?train|fine_?tun|init_checkpoint|init_ckpt|init_from|warm_?start|base_model|backbone_ckpt|imagenet21k|hf_hub|from_pretrained",
    re.IGNORECASE,
)
_L_NAMES = ("num_layers", "n_layer", "n_layers", "num_hidden_layers", "depth", "num_decoder_layers", "layers", "num_blocks")
_D_NAMES = ("emb_dim", "d_model", "hidden_size", "n_embd", "embed_dim", "model_dim", "width", "hidden_dim", "embedding_dim", "dim", "qkv_dim")
_V_NAMES = ("vocab_size", "n_vocab", "num_embeddings", "output_vocab_size", "vocab")
_FF_NAMES = ("mlp_dim", "d_ff", "ff_dim", "intermediate_size", "mlp_hidden_dim", "ffn_dim", "hidden_mlp_dim", "n_inner")


def _last_name(func: cst.BaseExpression) -> str:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return ""


def _text(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fmt(value) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        return repr(value) if not isinstance(value, float) else f"{value:g}"
    return f"{value:_}" if abs(value) >= 10_000 else str(value)


class Inference:
    def __init__(self, facts) -> None:
        self.facts = facts
        self.context = None
        self._evaluator: Optional[ConfigEvaluator] = None

    @property
    def ev(self) -> ConfigEvaluator:
        if self._evaluator is None:
            self._evaluator = ConfigEvaluator(self.facts, project_of(self.facts))
        return self._evaluator

    def infer(self, name: str, context) -> Optional[ContextValue]:
        method = getattr(self, f"_infer_{name}", None)
        if method is None:
            return None
        self.context = context
        return method(context)

    # -- helpers ----------------------------------------------------------
    def here(self, node: cst.CSTNode) -> Origin:
        return Origin(self.facts, node)

    @staticmethod
    def value(found: Found, value=None, detail: Optional[str] = None, confidence: Optional[str] = None) -> ContextValue:
        origin = found.origin
        return ContextValue(
            found.value if value is None else value,
            "inferred",
            None,
            confidence or found.confidence,
            detail if detail is not None else found.detail,
            locate=origin.location if origin is not None else None,
        )

    def note(self, field_name: str, text: str) -> None:
        if self.context is not None and field_name not in self.context.notes:
            self.context.notes[field_name] = text

    # -- arch ---------------------------------------------------------------
    def _infer_arch(self, context) -> Optional[ContextValue]:
        facts = self.facts
        index = model_index(facts)
        # Only the model the training code builds counts: a `*Transformer*` mock or
        # class elsewhere in the file says nothing about this optimizer.
        keep = training_region(facts)
        signals: list[Signal] = [s for s in index.direct if keep(s.scope)]
        imports: list[tuple[str, cst.CSTNode]] = [(q, n) for q, n, scope in index.used_imports if keep(scope)]
        names: list[str] = []
        used = [
            name for name, _, scope in index.used
            if keep(scope) and (index.closure(name)[0] or index.closure(name)[1] or _name_arch(name))
        ]
        # Model classes defined here but built elsewhere: only when nothing in this file
        # builds a class at all (else the training code's own model would have shown).
        top = used or ([] if index.used else index.roots())
        for name in dict.fromkeys(top):
            found, imported, reached = index.closure(name)
            signals.extend(found)
            imports.extend(imported)
            names.append(name)
            for reached_name in reached:
                arch = _name_arch(reached_name)
                if arch is not None:
                    model = index.classes[reached_name]
                    signals.append(Signal(arch, Origin(facts, model.scope.node), f"class {reached_name}", by_name=True))
        confidence_cap = "high" if used or index.direct else "medium"
        decided = _decide(signals, names)
        if decided is None or decided[2] != "high":
            # Model code in the project modules the file imports it from.
            for qual, node in dict.fromkeys(imports):
                more = self._imported_model(qual, node)
                signals.extend(more)
                names.append(qual.rsplit(".", 1)[-1])
            decided = _decide(signals, names)
        if decided is None:
            kinds = sorted({s.arch for s in signals})
            if kinds:
                self.note("arch", "conflicting model evidence: " + ", ".join(f"{s.label} ({s.arch})" for s in signals[:4]))
            else:
                self.note("arch", "no model code (flax/nnx/haiku/equinox layers) in this file or the project modules it imports")
            return None
        arch, signal, confidence = decided
        confidence = weaker(confidence, confidence_cap if signal.origin.facts is facts else "high")
        detail = signal.label
        if names and not signal.by_name and names[0] not in signal.label and signal.origin.facts is facts:
            detail += f", used by {names[0]}"
        return ContextValue(arch, "inferred", None, confidence, detail, locate=signal.origin.location)

    def _imported_model(self, qual: str, node: cst.CSTNode) -> list[Signal]:
        facts = self.facts
        short = qual.rsplit(".", 1)[-1]
        project = project_of(facts)
        found = project.module_of(qual, facts, [short])
        if found is not None and len(found[1]) == 1:
            module, rest = found
            index = model_index(module)
            if rest[0] in index.classes:
                signals, _, reached = index.closure(rest[0])
                out = [s for s in signals]
                for name in reached:
                    arch = _name_arch(name)
                    if arch is not None:
                        out.append(Signal(arch, Origin(module, index.classes[name].scope.node), f"class {name} in {module.display_path}", by_name=True))
                return [Signal(s.arch, s.origin, f"{s.label} ({module.display_path}, used as {short})", s.by_name) for s in out]
        arch = _name_arch(short)
        if arch is not None:
            return [Signal(arch, Origin(facts, node), f"{short} (imported model)", by_name=True)]
        return []

    # -- grad_accum ---------------------------------------------------------
    def _multisteps(self) -> list:
        return [r for name, records in self.facts.calls_by_name.items() if name.rsplit(".", 1)[-1] == "MultiSteps" and name.startswith("optax") for r in records]

    def _infer_grad_accum(self, context) -> Optional[ContextValue]:
        records = self._multisteps()
        if not records:
            facts = self.facts
            if facts.pipelines and (facts.update_sites or facts.consumers) and not not_analysable(facts):
                return ContextValue(1, "inferred", None, "medium", "no optax.MultiSteps in this file", locate=lambda: facts.display_path)
            self.note("grad_accum", "no MultiSteps here, but the optimizer is not built and used in this file")
            return None
        values = []
        for record in records:
            expr = None
            for arg in record.node.args:
                if arg.keyword is not None and arg.keyword.value == "every_k_schedule":
                    expr = arg.value
            positional = [a for a in record.node.args if a.keyword is None and not a.star]
            if expr is None and len(positional) > 1:
                expr = positional[1].value
            found = self.ev.eval(expr, record.scope) if expr is not None else Unknown("no every_k_schedule")
            if not isinstance(found, Found) or not isinstance(found.value, int) or isinstance(found.value, bool) or found.value < 1:
                self.note("grad_accum", f"MultiSteps every_k_schedule is not a known integer ({_short(_text(record.node))})")
                return None
            values.append((found, record))
        distinct = {f.value for f, _ in values}
        if len(distinct) != 1:
            self.note("grad_accum", "several MultiSteps with different k: " + ", ".join(map(str, sorted(distinct))))
            return None
        found, record = values[0]
        detail = f"optax.MultiSteps(every_k_schedule={found.value})"
        if found.detail:
            detail += f" from {found.detail}"
        return ContextValue(found.value, "inferred", None, found.confidence, detail, locate=self.here(record.node).location)

    # -- steps --------------------------------------------------------------
    def _step_functions(self) -> set:
        facts = self.facts

        def compute(_):
            scopes = set()
            for site in facts.update_sites:
                scope = site.record.scope
                while scope is not None and scope.kind not in ("function",):
                    scope = scope.parent
                if scope is not None:
                    scopes.add(scope.node)
            # One level up: a helper that calls the function that updates.
            callers = set()
            for record in facts.raw.calls:
                if isinstance(record.node.func, cst.Name):
                    _, bindings = lookup(record.node.func.value, record.scope)
                    if len(bindings) == 1 and bindings[0].kind == "def" and bindings[0].node in scopes:
                        scope = record.scope
                        while scope is not None and scope.kind != "function":
                            scope = scope.parent
                        if scope is not None:
                            callers.add(scope.node)
            return scopes | callers

        return facts.memo("context_step_functions", compute)

    def _is_step_call(self, call: cst.Call, scope: Scope, depth: int = 0) -> bool:
        facts = self.facts
        sites = facts.memo("context_update_calls", lambda f: {site.call for site in f.update_sites})
        if call in sites:
            return True
        func = call.func
        if _STEP_CALL.search(_last_name(func)):
            return True
        if isinstance(func, cst.Name) and depth < 3:
            _, bindings = lookup(func.value, scope)
            if len(bindings) == 1:
                binding = bindings[0]
                if binding.kind == "def":
                    return binding.node in self._step_functions()
                if binding.kind in ("assign", "annassign") and isinstance(binding.value, cst.Call) and binding.value.args:
                    inner = binding.value.args[0].value  # jax.pmap(train_step), jax.jit(step), partial(step, ...)
                    if isinstance(inner, cst.Name):
                        _, inner_bindings = lookup(inner.value, binding.scope)
                        if len(inner_bindings) == 1 and inner_bindings[0].kind == "def":
                            return inner_bindings[0].node in self._step_functions() or bool(_STEP_CALL.search(inner.value))
        return False

    def _training_loops(self):
        facts = self.facts

        def compute(_):
            # From each train-step call, climb the statement tree to the loops around it
            # (no subtree walks): parent_stmt maps every statement to its block's owner.
            if not facts.raw.loops:
                return []
            by_node = {loop.node: loop for loop in facts.raw.loops}
            found: dict = {}
            parents = facts.raw.parent_stmt
            for record in facts.raw.calls:
                if record.loop_depth == 0 or not self._is_step_call(record.node, record.scope):
                    continue
                stmt = record.statement
                while stmt in parents:
                    stmt = parents[stmt]
                    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                        break
                    loop = by_node.get(stmt)
                    if loop is not None and loop.node not in found:
                        found[loop.node] = (loop, record.node)
            return [found[loop.node] for loop in facts.raw.loops if loop.node in found]

        return facts.memo("context_training_loops", compute)

    def _loop_count(self, loop) -> tuple[object, str]:
        node = loop.node
        if isinstance(node, cst.For):
            call = _find_range(node.iter)
            if call is None:
                return Unknown("iterates over data"), ""
            callee = _last_name(call.func)
            args = [a for a in call.args if a.keyword is None and not a.star]
            if callee == "islice":
                stop = args[-1].value if len(args) >= 2 else None
                start = None
            elif len(args) == 1:
                start, stop = None, args[0].value
            elif len(args) == 2:
                start, stop = args[0].value, args[1].value
            else:
                return Unknown("range with a step"), ""
            found = self.ev.eval(stop, loop.scope)
            if not isinstance(found, Found) or not isinstance(found.value, (int, float)) or isinstance(found.value, bool):
                return (found if isinstance(found, Unknown) else Unknown("loop bound not a number")), ""
            count = int(found.value)
            text = f"{callee}({_text(stop)})"
            if start is not None:
                first = value_of(start, loop.scope)
                if isinstance(first, int) and not isinstance(first, bool):
                    count -= first
                    text = f"{callee}({_text(start)}, {_text(stop)})"
                else:
                    text = f"{callee}(..., {_text(stop)})"
            return Found(count, found.confidence, found.origin, found.detail), text
        if isinstance(node, cst.While):
            test = node.test
            if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
                target = test.comparisons[0]
                if isinstance(target.operator, (cst.LessThan, cst.LessThanEqual)):
                    found = self.ev.eval(target.comparator, loop.scope)
                    if isinstance(found, Found) and isinstance(found.value, (int, float)) and not isinstance(found.value, bool):
                        count = int(found.value) + (1 if isinstance(target.operator, cst.LessThanEqual) else 0)
                        return Found(count, found.confidence, found.origin, found.detail), f"while ... < {_text(target.comparator)}"
            return Unknown("while loop with an unknown bound"), ""
        return Unknown("loop"), ""

    def _steps_from_loops(self):
        loops = self._training_loops()
        if not loops:
            return None
        innermost = []
        for scope in dict.fromkeys(loop.scope for loop, _ in loops):
            mine = [(loop, call) for loop, call in loops if loop.scope is scope]
            deepest = max(loop.depth for loop, _ in mine)
            innermost.extend((loop, call) for loop, call in mine if loop.depth == deepest)
        results = []
        for inner, call in innermost:
            count, text = self._loop_count(inner)
            outer = [loop for loop, _ in loops if loop.scope is inner.scope and loop.depth < inner.depth and self._encloses(loop.node, inner.node)]
            factors = []
            for loop in sorted(outer, key=lambda l: l.depth):
                c, t = self._loop_count(loop)
                if not isinstance(c, Found):
                    return c if isinstance(c, Unknown) else None
                factors.append((c, t))
            if not isinstance(count, Found):
                if factors and isinstance(count, Unknown) and count.reason == "iterates over data":
                    per_epoch = self._named(STEPS_PER_EPOCH_NAMES, inner.scope)
                    if isinstance(per_epoch, Found):
                        count, text = per_epoch, f"{per_epoch.detail or 'steps_per_epoch'} per epoch"
                if not isinstance(count, Found):
                    results.append(count)
                    continue
            total = count.value
            confidence = count.confidence
            parts = [text]
            for c, t in factors:
                total *= c.value
                confidence = weaker(confidence, c.confidence)
                parts.insert(0, t)
            origin = count.origin if count.origin is not None else self.here(inner.node)
            detail = "training loop " + " x ".join(p for p in parts if p)
            if count.detail and count.detail not in detail and (
                (count.origin is not None and count.origin.facts is not self.facts)
                or any(word in count.detail for word in ("default", "config", "flag", "--"))
            ):
                detail += f" ({count.detail})"
            results.append(Found(total, confidence, Origin(self.facts, inner.node) if origin.facts is self.facts else origin, detail))
        known = [r for r in results if isinstance(r, Found)]
        if not known:
            return results[0] if results else None
        values = {r.value for r in known}
        if len(values) != 1 or len(known) != len(results):
            return Unknown("several training loops with different lengths")
        return known[0]

    def _encloses(self, outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
        parents = self.facts.raw.parent_stmt
        node = inner
        while node in parents:
            node = parents[node]
            if node is outer:
                return True
        return False

    def _named(self, names: frozenset, scope: Optional[Scope] = None):
        """A value bound to (or read as a config attribute named) one of `names`."""
        facts = self.facts
        candidates: list[Found] = []
        index = facts.memo("context_binding_names", _binding_names)
        for name in names:
            for s, written in index.get(name, ()):
                found = self.ev.name(written, s)
                if isinstance(found, Found) and _positive_int(found.value):
                    candidates.append(Found(found.value, found.confidence, found.origin, found.detail or written))
        if not candidates:
            for expr, s in self._attribute_reads(names):
                found = self.ev.eval(expr, s)
                if isinstance(found, Found) and _positive_int(found.value):
                    candidates.append(Found(found.value, found.confidence, found.origin, found.detail or _text(expr)))
        if not candidates:
            # Flags and command-line options the file defines, read or not through an attribute.
            mc = config_of(facts, project_of(facts))
            for table in (mc.flags, mc.argparse):
                for name, found in table.items():
                    if name.lower() in names and _positive_int(found.value):
                        candidates.append(found)
        if not candidates:
            return Unknown("no such name")
        values = {int(c.value) for c in candidates}
        if len(values) == 1:
            best = max(candidates, key=lambda c: {"high": 3, "medium": 2, "low": 1}.get(c.confidence, 0))
            return Found(int(best.value), best.confidence, best.origin, best.detail)
        return Found(int(candidates[0].value), "low", candidates[0].origin, f"{candidates[0].detail}; other values: {sorted(values)}")

    def _attribute_reads(self, names: frozenset):
        """`config.num_train_steps`-style reads in call arguments and assigned values."""
        facts = self.facts

        def compute(_):
            out: dict[str, list] = {}
            for record in facts.raw.calls:
                for arg in record.node.args:
                    _collect_attrs(arg.value, record.scope, out)
            for scope in facts.raw.scopes:
                for bindings in scope.bindings.values():
                    for binding in bindings:
                        if binding.value is not None and binding.kind in ("assign", "annassign"):
                            _collect_attrs(binding.value, binding.scope, out)
            return out

        table = facts.memo("context_attribute_reads", compute)
        seen = set()
        for name in names:
            for expr, scope in table.get(name, ()):
                if id(expr) not in seen:
                    seen.add(id(expr))
                    yield expr, scope

    def _infer_steps(self, context) -> Optional[ContextValue]:
        found = self._steps_from_loops()
        source = "loop"
        if not isinstance(found, Found):
            loop_reason = found.reason if isinstance(found, Unknown) else "no training loop found"
            found = self._named(STEP_NAMES)
            source = "name"
            if not isinstance(found, Found):
                epochs = self._named(EPOCH_NAMES)
                per_epoch = self._named(STEPS_PER_EPOCH_NAMES)
                if isinstance(epochs, Found) and isinstance(per_epoch, Found):
                    found = Found(
                        epochs.value * per_epoch.value, weaker(epochs.confidence, per_epoch.confidence),
                        per_epoch.origin or epochs.origin, f"{epochs.detail} x {per_epoch.detail}",
                    )
                    source = "epochs"
            if not isinstance(found, Found):
                self.note("steps", f"training loop: {loop_reason}; no num_train_steps/total_steps/max_steps value")
                return None
        value = int(found.value)
        detail = found.detail
        accum = self.context.get("grad_accum") if self.context is not None else None
        if source == "loop" and accum is not None and accum.value > 1:
            value //= accum.value
            detail += f" // {accum.value} micro-batches per update (MultiSteps)"
        if value < 1:
            return None
        return self.value(found, value=value, detail=detail)

    # -- devices ------------------------------------------------------------
    def _infer_devices(self, context) -> Optional[ContextValue]:
        facts = self.facts
        text = facts.text or ""
        match = _XLA_DEVICES.search(text)
        if match:
            line = text.count("\n", 0, match.start()) + 1
            return ContextValue(int(match.group(1)), "inferred", f"{facts.display_path}:{line}", "high", "--xla_force_host_platform_device_count")
        for name in ("jax.make_mesh", "jax.experimental.mesh_utils.create_device_mesh", "jax.sharding.Mesh", "jax.experimental.maps.Mesh"):
            for record in facts.calls_by_name.get(name, ()):
                shape = _arg_expr(record.node, 0, "axis_shapes" if name == "jax.make_mesh" else ("mesh_shape" if "create" in name else "devices"))
                if name.endswith("Mesh") and isinstance(shape, cst.Call) and _last_name(shape.func) == "create_device_mesh" and shape.args:
                    shape = shape.args[0].value
                elif name.endswith("Mesh") and isinstance(shape, cst.Call) and _last_name(shape.func) == "reshape":
                    shape = cst.Tuple([cst.Element(a.value) for a in shape.args]) if len(shape.args) > 1 else shape.args[0].value if shape.args else None
                if shape is None:
                    continue
                found = self.ev.eval(shape, record.scope)
                if isinstance(found, Found) and isinstance(found.value, (tuple, list)) and found.value and all(
                    _positive_int(v) for v in found.value
                ):
                    product = 1
                    for v in found.value:
                        product *= int(v)
                    return ContextValue(product, "inferred", None, found.confidence, f"mesh shape {tuple(found.value)}", locate=self.here(record.node).location)
        marker = self._multi_device_marker()
        if marker is not None:
            name, node = marker
            origin = self.here(node)
            self.note("devices", lambda: f"multi-device code ({name} at {origin.location()}); the device count is known only at run time")
            return None
        loops = self._training_loops()
        if loops and facts.update_sites:
            loop, _ = loops[0]
            return ContextValue(1, "inferred", None, "medium", "training loop with no pmap/shard_map/mesh code", locate=self.here(loop.node).location)
        self.note("devices", "no training loop in this file")
        return None

    def _multi_device_marker(self) -> Optional[tuple[str, cst.CSTNode]]:
        facts = self.facts
        for record in facts.raw.calls:
            name = facts.callee(record)
            if name in _MULTI_DEVICE_CALLS:
                return name, record.node
            if name == "functools.partial" and record.node.args:
                inner = facts.canonical(record.node.args[0].value, record.scope)
                if inner in _MULTI_DEVICE_CALLS:
                    return inner, record.node
        for fn, scope in facts.raw.functions.items():
            for decorator in fn.decorators:
                name = facts.canonical(decorator.decorator, scope.parent or scope)
                if name in _MULTI_DEVICE_CALLS:
                    return name, decorator
        return None

    # -- batch --------------------------------------------------------------
    def _plain_batch_role(self) -> Optional[str]:
        """'global' when the code divides `batch_size` by the device count, 'per_device'
        when it multiplies it; read from the text around each mention (cheap)."""
        text = self.facts.text or ""
        for match in _BATCH_WORD.finditer(text):
            after = text[match.end() : match.end() + 48]
            before = text[max(0, match.start() - 48) : match.start()]
            if _DIVIDED.match(after):
                return "global"
            if _MULTIPLIED_AFTER.match(after) or _MULTIPLIED_BEFORE.search(before):
                return "per_device"
        return None

    def _infer_batch_per_device(self, context) -> Optional[ContextValue]:
        found = self._named(PER_DEVICE_BATCH_NAMES)
        if isinstance(found, Found):
            return self.value(found, value=int(found.value))
        plain = self._named(PLAIN_BATCH_NAMES)
        role = self._plain_batch_role()
        devices = context.get("devices")
        if isinstance(plain, Found):
            if role == "per_device":
                return self.value(plain, value=int(plain.value), detail=f"{plain.detail} (multiplied by the device count)")
            if devices is not None and devices.value == 1:
                confidence = weaker(plain.confidence, devices.confidence if devices.source == "inferred" else "high")
                return self.value(plain, value=int(plain.value), detail=f"{plain.detail} (one device)", confidence=confidence)
        glob = context.get("batch_global")
        if glob is not None and devices is not None and glob.value % devices.value == 0:
            conf = weaker(glob.confidence if glob.source == "inferred" else "high", devices.confidence if devices.source == "inferred" else "high")
            return ContextValue(glob.value // devices.value, "inferred", None, conf, f"batch_global {glob.value} / devices {devices.value}", locate=lambda: glob.location)
        if isinstance(plain, Found) and role is None:
            self.note("batch_per_device", f"{plain.detail} = {plain.value}: per-device or global is unclear without a known device count")
        elif glob is not None:
            self.note("batch_per_device", f"batch_global is {glob.value}, but the device count is unknown")
        else:
            self.note("batch_per_device", "no batch size found")
        return None

    def _infer_batch_global(self, context) -> Optional[ContextValue]:
        found = self._named(GLOBAL_BATCH_NAMES)
        if isinstance(found, Found):
            return self.value(found, value=int(found.value))
        plain = self._named(PLAIN_BATCH_NAMES)
        role = self._plain_batch_role()
        devices = context.get("devices")
        if isinstance(plain, Found) and role == "global":
            return self.value(plain, value=int(plain.value), detail=f"{plain.detail} (divided by the device count)")
        if isinstance(plain, Found) and devices is not None and devices.value == 1:
            confidence = weaker(plain.confidence, devices.confidence if devices.source == "inferred" else "high")
            return self.value(plain, value=int(plain.value), detail=f"{plain.detail} (one device)", confidence=confidence)
        per_device = context.get("batch_per_device")
        if per_device is not None and devices is not None:
            conf = weaker(per_device.confidence if per_device.source == "inferred" else "high", devices.confidence if devices.source == "inferred" else "high")
            return ContextValue(
                per_device.value * devices.value, "inferred", None, conf,
                f"batch_per_device {per_device.value} x devices {devices.value}", locate=lambda: per_device.location,
            )
        if isinstance(plain, Found) and role is None:
            self.note("batch_global", f"{plain.detail} = {plain.value}: per-device or global is unclear without a known device count")
        elif per_device is not None:
            self.note("batch_global", f"batch_per_device is {per_device.value}, but the device count is unknown")
        else:
            self.note("batch_global", "no batch size found")
        return None

    # -- fine_tune ----------------------------------------------------------
    def _infer_fine_tune(self, context) -> Optional[ContextValue]:
        facts = self.facts
        restores = []
        keep = training_region(facts)
        for record in facts.raw.calls:
            last = _last_name(record.node.func)
            if last not in _RESTORE or not keep(record.scope):
                continue
            callee = _text(record.node.func)
            if last == "from_pretrained" and re.search(r"Tokenizer|Processor|FeatureExtractor|Config|tokenizer", callee):
                continue  # a pretrained tokenizer or config, not weights
            restores.append(record)
            target = record.assigned_to
            pieces = [_text(a.value) for a in record.node.args]
            if target is not None:
                pieces.append(_text(target))
            hint = next((p for p in pieces if _PRETRAINED.search(p)), None)
            if last == "from_pretrained" or hint is not None:
                label = _short(_text(record.node), 70)
                confidence = "high" if last == "from_pretrained" else "medium"
                return ContextValue(True, "inferred", None, confidence, f"pretrained weights restored: {label}", locate=self.here(record.node).location)
        if restores:
            self.note("fine_tune", f"a checkpoint is restored ({_short(_text(restores[0].node))}) but nothing says it is pretrained")
            return None
        for record in facts.raw.calls:
            func = record.node.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == "init"
                and not re.search(r"tx|opt", _text(func.value), re.IGNORECASE)
                and facts.pipeline_for(func.value, record.scope) is None
            ):
                if facts.pipelines and (facts.update_sites or facts.consumers):
                    return ContextValue(False, "inferred", None, "medium", f"params from {_text(func)}(...); nothing restored or loaded", locate=self.here(record.node).location)
                self.note("fine_tune", f"params from {_text(func)}(...), but no optimizer this file builds consumes them")
                return None
        self.note("fine_tune", "no model.init and no restore in this file")
        return None

    # -- params -------------------------------------------------------------
    def _infer_params(self, context) -> Optional[ContextValue]:
        arch = context.get("arch")
        if arch is None or arch.value != "transformer":
            self.note("params", "estimated only for a Transformer (arch must be known)")
            return None
        for group in self._size_groups():
            result = _estimate(group)
            if result is not None:
                value, detail, confidence, origin = result
                return ContextValue(value, "inferred", None, confidence, detail, locate=origin.location if origin else None)
        self.note("params", "no layers/width found in the model's config (num_layers, emb_dim/d_model/hidden_size, vocab_size)")
        return None

    def _size_groups(self):
        """Candidate {name: Found} groups that describe one Transformer's size."""
        facts = self.facts
        wanted = set(_L_NAMES + _D_NAMES + _V_NAMES + _FF_NAMES)
        # 1. keyword arguments of a call that sets both layers and width
        for record in facts.raw.calls:
            keys = {a.keyword.value for a in record.node.args if a.keyword is not None}
            if keys & set(_L_NAMES) and keys & set(_D_NAMES):
                group = {}
                for arg in record.node.args:
                    if arg.keyword is not None and arg.keyword.value in wanted:
                        found = self.ev.eval(arg.value, record.scope)
                        if isinstance(found, Found):
                            group[arg.keyword.value] = found
                yield group
        # 2. class defaults (a TransformerConfig dataclass, a flax Module's attributes)
        project = project_of(facts)
        modules = [facts]
        for module in modules + (project.imported_modules(_L_NAMES) if project.file else []):
            mc = config_of(module, project)
            for info in mc.classes.values():
                if set(info.fields) & set(_L_NAMES) and set(info.fields) & set(_D_NAMES):
                    evaluator = ConfigEvaluator(module, project)
                    group = {}
                    for name in info.fields:
                        if name in wanted:
                            found = evaluator.class_field(info, [name], "medium", 0)
                            if isinstance(found, Found):
                                group[name] = found
                    yield group
        # 3. ml_collections configs: one (sub)dict that has both
        if project.file:
            for module in project.config_modules(_L_NAMES):
                entries = config_of(module, project).ml
                prefixes: dict[tuple, dict] = {}
                for key, found in entries.items():
                    if key and key[-1] in wanted:
                        prefixes.setdefault(key[:-1], {})[key[-1]] = found.capped("medium")
                for group in prefixes.values():
                    yield group


def _estimate(group: dict) -> Optional[tuple[int, str, str, Optional[Origin]]]:
    def pick(names):
        for name in names:
            found = group.get(name)
            if found is not None and _positive_int(found.value):
                return name, found
        return None

    layers, width, vocab, ff = pick(_L_NAMES), pick(_D_NAMES), pick(_V_NAMES), pick(_FF_NAMES)
    if layers is None or width is None:
        return None
    L, d = int(layers[1].value), int(width[1].value)
    d_ff = int(ff[1].value) if ff else 4 * d
    V = int(vocab[1].value) if vocab else 0
    total = L * (4 * d * d + 2 * d * d_ff) + V * d
    used = [layers[1], width[1]] + ([ff[1]] if ff else []) + ([vocab[1]] if vocab else [])
    confidence = "medium"
    for found in used:
        confidence = weaker(confidence, found.confidence)
    terms = f"L={L} ({layers[0]}), d={d} ({width[0]}), d_ff={d_ff} ({ff[0] if ff else '4d'})" + (f", V={V} ({vocab[0]})" if vocab else ", no vocabulary")
    detail = f"estimated L*(4d^2 + 2*d*d_ff) + V*d with {terms}"
    return total, detail, confidence, width[1].origin or layers[1].origin


def training_region(facts):
    """A predicate on scopes: inside the functions that train (use an optimizer:
    update sites, TrainState/nnx.Optimizer consumers), the local functions they call
    and the functions that call them, or at module level. Everything passes when the
    file shows no training code (its context comes from elsewhere)."""
    return facts.memo("context_training_region", _training_region)


def _outermost_function(scope: Optional[Scope]) -> Optional[Scope]:
    found = None
    while scope is not None:
        if scope.kind in ("function", "lambda"):
            found = scope
        elif scope.kind == "class" and found is not None:
            break  # a method: the method is the unit
        scope = scope.parent
    return found


def _training_region(facts):
    sites = [site.record.scope for site in facts.update_sites] + [c.record.scope for c in facts.consumers]
    if not sites:
        return lambda scope: True
    if any(_outermost_function(scope) is None for scope in sites):
        return lambda scope: True  # training at module level: the file is the unit
    region = {id(_outermost_function(scope)) for scope in sites}
    # One level of local calls each way: create_train_state() called by train(), and
    # main() that builds the model and calls train(model).
    callees, callers = set(), set()
    for record in facts.raw.calls:
        func = record.node.func
        if not isinstance(func, cst.Name):
            continue
        _, bindings = lookup(func.value, record.scope)
        if len(bindings) != 1 or bindings[0].kind != "def":
            continue
        target = facts.raw.functions.get(bindings[0].node)
        here = _outermost_function(record.scope)
        if target is None:
            continue
        if here is not None and id(here) in region:
            callees.add(id(_outermost_function(target)))
        if id(_outermost_function(target)) in region and here is not None:
            callers.add(id(here))
    region |= callees | callers
    # Functions handed over by name from the training code or module level:
    # hk.transform(forward), jax.jit(step), nn.scan(body).
    for record in facts.raw.calls:
        here = _outermost_function(record.scope)
        if here is not None and id(here) not in region:
            continue
        for arg in record.node.args:
            if isinstance(arg.value, cst.Name):
                _, bindings = lookup(arg.value.value, record.scope)
                if len(bindings) == 1 and bindings[0].kind == "def":
                    target = facts.raw.functions.get(bindings[0].node)
                    if target is not None:
                        region.add(id(_outermost_function(target)))

    def keep(scope: Optional[Scope]) -> bool:
        function = _outermost_function(scope)
        return function is None or id(function) in region

    return keep


def _binding_names(facts) -> dict[str, list[tuple[Scope, str]]]:
    """lower-cased name -> (scope, name) for names assigned once in a module or function
    scope (class fields are read through instances, overrides included)."""
    out: dict[str, list] = {}
    for scope in facts.raw.scopes:
        if scope.kind == "class":
            continue
        for name, bindings in scope.bindings.items():
            if len(bindings) == 1 and bindings[0].kind in ("assign", "annassign"):
                out.setdefault(name.lower(), []).append((scope, name))
    return out


def _positive_int(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 1 and float(value).is_integer()


def _collect_attrs(expr: cst.BaseExpression, scope: Scope, out: dict, depth: int = 0) -> None:
    if depth > 4:
        return
    if isinstance(expr, cst.Attribute):
        out.setdefault(expr.attr.value.lower(), []).append((expr, scope))
    elif isinstance(expr, cst.BinaryOperation):
        _collect_attrs(expr.left, scope, out, depth + 1)
        _collect_attrs(expr.right, scope, out, depth + 1)
    elif isinstance(expr, (cst.Tuple, cst.List)):
        for element in expr.elements:
            _collect_attrs(element.value, scope, out, depth + 1)
    elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("int", "float", "round", "max", "min"):
        for arg in expr.args:
            _collect_attrs(arg.value, scope, out, depth + 1)


def _find_range(expr: cst.BaseExpression, depth: int = 0) -> Optional[cst.Call]:
    if depth > 3 or not isinstance(expr, cst.Call):
        return None
    name = _last_name(expr.func)
    if name in ("range", "trange"):
        return expr
    if name == "islice" and len(expr.args) >= 2:
        return expr
    if name in ("tqdm", "enumerate", "zip", "iter", "list", "progress_bar", "track"):
        for arg in expr.args:
            found = _find_range(arg.value, depth + 1)
            if found is not None:
                return found
    return None


def _arg_expr(call: cst.Call, position: int, keyword: str) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[position].value if position < len(positional) else None


# ---------------------------------------------------------------------------
# Chains that cannot be analysed


def not_analysable(facts) -> list[tuple[cst.CSTNode, str]]:
    """Optimizers chosen from a config string: getattr(optax, config.optimizer), ..."""
    out = []
    for record in facts.raw.calls:
        func = record.node.func
        args = [a for a in record.node.args if a.keyword is None]
        if isinstance(func, cst.Name) and func.value == "getattr" and len(args) >= 2:
            if qualified_name(args[0].value, record.scope) in ("optax", "optax.contrib", "optax.transforms"):
                if not isinstance(value_of(args[1].value, record.scope), str):
                    out.append((record.node, f"optimizer chosen from a config string: {_text(record.node)}"))
        elif isinstance(func, cst.Call) and _last_name(func.func) == "attrgetter" and args:
            if qualified_name(args[0].value, record.scope) in ("optax", "optax.contrib"):
                out.append((record.node, f"optimizer chosen from a config string: {_text(record.node)}"))
    return out
