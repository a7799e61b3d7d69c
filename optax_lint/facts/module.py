"""`ModuleFacts`: everything the rules know about one module, computed lazily.

The walker runs once per file; pipelines, schedules and update sites are derived
from its records on first use, so a file that builds no optimizer pays for none.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Optional

import libcst as cst

from optax_lint.core.optax_api import OptaxApi, load_api
from optax_lint.facts.pipelines.build import Pipeline, PipelineBuilder, TxNode
from optax_lint.facts.pipelines.updates import (
    NNX_OPTIMIZER,
    TRAIN_STATE_CREATE,
    Consumer,
    UpdateSite,
    is_progress_bar,
)
from optax_lint.facts.schedules.calls import Schedule, ScheduleExtractor
from optax_lint.syntax.arguments import named_arg
from optax_lint.syntax.names import NameResolver, qualified_name
from optax_lint.syntax.positions import Positions
from optax_lint.syntax.walker import CallRecord, RawFacts, Scope, collect

if TYPE_CHECKING:  # the topic modules load on first use of their fact
    from optax_lint.facts.api_currency import CurrencyFacts
    from optax_lint.facts.checkpoints.sites import CheckpointFacts
    from optax_lint.facts.context.models import ModelIndex
    from optax_lint.facts.masks.extract import MaskSite
    from optax_lint.facts.masks.param_tree import ParamTree, StackSite
    from optax_lint.facts.parallel.steps import ParallelFacts
    from optax_lint.facts.project.files import Project
    from optax_lint.facts.schedules.analysis import ScheduleFacts
    from optax_lint.facts.state.access import StateFacts


# Attributes the run shares between files (the optax API table, the run's project
# files): never cleared by release().
_SHARED = frozenset({"api", "project_files"})
# Modules whose objects a ModuleFacts creates for its own file (its helpers).
_PER_FILE = ("optax_lint.facts.", "optax_lint.syntax.")


class ModuleFacts:
    def __init__(
        self,
        module: cst.Module,
        path: str = "<string>",
        api: Optional[OptaxApi] = None,
        *,
        declared_context: Optional[dict] = None,
        root: Optional[str] = None,
        text: Optional[str] = None,
        project_files=None,
    ) -> None:
        self.module = module
        self.path = path
        self.api = api or load_api()
        # Run context declared on the command line or in config: {field: (value, source)}.
        self.declared_context = declared_context or {}
        self.root = root  # the project root (config directory), for cross-file reads
        self.text = text  # the source text, for comment pragmas
        # The run's facts/project/files.ProjectFiles: project files read for the run
        # context, kept across the run's files (None: this module's own).
        self.project_files = project_files
        self.positions = None  # set by the engine: source positions, resolved only on demand
        # Notebooks: lines that end a cell's last statement, whose value the cell shows.
        self.displayed: frozenset = frozenset()
        # A project module's ModuleConfig (facts/project/evaluate.py), built on first read.
        self.module_config = None
        self.raw: RawFacts = collect(module)
        self.names = NameResolver(self.api)
        self.builder = PipelineBuilder(self.raw, self.api, self.names)
        self.schedule_extractor = ScheduleExtractor(self.raw, self.api, self.names, self.builder.lists)

    @functools.cached_property
    def display_path(self) -> str:
        """The path as messages show it: relative to the project root, never absolute."""
        from optax_lint.facts.file_role import display_path

        return display_path(self.path, self.root)

    @functools.cached_property
    def used_as_optimizer(self) -> set[int]:
        """ids of the `Pipeline.call` of every pipeline used as the optimizer."""
        from optax_lint.facts.pipelines.use import used_as_optimizer

        return used_as_optimizer(self)

    @functools.cached_property
    def possible_calls_cache(self) -> dict:
        """pipelines.use.possible_calls, memoized per (expression, scope)."""
        return {}

    @functools.cached_property
    def name_counts_cache(self) -> dict:
        """state.walks.name_counts, memoized per root node (keyed by id)."""
        return {}

    @functools.cached_property
    def sequences_cache(self) -> dict:
        """pipelines.sequences.expanded_sequences, memoized per pipeline."""
        return {}

    @functools.cached_property
    def state(self) -> StateFacts:
        """Where opt_state comes from, its layouts, hyperparams and tree_get reads."""
        from optax_lint.facts.state.access import StateFacts

        return StateFacts(self)

    @functools.cached_property
    def parallel(self) -> ParallelFacts:
        """pmap/shard_map/jit steps, collectives, gradient flow, replication."""
        from optax_lint.facts.parallel.steps import ParallelFacts

        return ParallelFacts(self)

    @functools.cached_property
    def checkpoints(self) -> CheckpointFacts:
        """Checkpoint saves and restores and what they hold."""
        from optax_lint.facts.checkpoints.sites import CheckpointFacts

        return CheckpointFacts(self)

    @functools.cached_property
    def currency(self) -> CurrencyFacts:
        """References to removed, deprecated or private library paths."""
        from optax_lint.facts.api_currency import currency_references

        return currency_references(self)

    @functools.cached_property
    def mask_sites(self) -> list[MaskSite]:
        """Weight-decay masks and partition labels passed to the optimizers."""
        from optax_lint.facts.masks.extract import collect_mask_sites

        return collect_mask_sites(self)

    def release(self) -> None:
        """Break the reference cycles through which these facts hold the file's tree
        (scopes and their bindings, returns and parents), and drop every fact, so that
        the tree is freed by reference counting when the lint is done instead of being
        traversed by the cyclic collector. Only for a lint whose findings are final:
        a fix or a text edit computed later may still read the facts."""
        # The cycles that reach the tree, broken where they are made: scopes with their
        # bindings and returns, the pipelines' node trees, and these facts' helpers,
        # each of which points back here. (A walk of everything reachable would find
        # them all but costs a tenth of the lint; tests/test_release.py checks that no
        # tree is left in a cycle.)
        attrs = self.__dict__
        raw = attrs.get("raw")
        if raw is not None:
            for scope in raw.scopes:
                scope.bindings, scope.returns, scope.params, scope.parent = {}, [], {}, None
        for pipeline in attrs.get("pipelines") or ():
            for node in list(pipeline.nodes()):
                node.__dict__.clear()
        for name, value in attrs.items():
            if name not in _SHARED and type(value).__module__.startswith(_PER_FILE) and hasattr(value, "__dict__"):
                value.__dict__.clear()
        self.__dict__.clear()

    @functools.cached_property
    def side_pipelines(self) -> frozenset[int]:
        """ids of the pipelines that do not train the model the architecture names: a value
        head's optimizer beside it, or an inner optimizer restarted each pass on values
        made in that pass (predictive coding's activities, an adversarial input)."""
        from optax_lint.facts.context.heads import trains_a_head

        return frozenset(id(p) for p in self.pipelines if trains_a_head(self, p)) | self.inner_pipelines

    @functools.cached_property
    def inner_pipelines(self) -> frozenset[int]:
        """ids of the inner optimizers: restarted each pass on values made in that pass,
        inside the loop that trains the model with another (facts/context/inner_optimizers.py)."""
        from optax_lint.facts.context.inner_optimizers import inner_pipelines

        return inner_pipelines(self)

    @functools.cached_property
    def adapters_only(self) -> Optional[cst.Call]:
        """The call (LoRA wrapping, `wrt=nnx.LoRAParam`) after which only adapters train."""
        from optax_lint.facts.context.adapters import adapters_only

        return adapters_only(self)

    @functools.cached_property
    def clipped_policy_gradient_learner(self) -> Optional[cst.Call]:
        """An imported PPO-family learner (`GRPOLearner(...)`): a clipped policy-gradient objective."""
        from optax_lint.facts.context.objectives import clipped_policy_gradient_learner

        return clipped_policy_gradient_learner(self)

    @functools.cached_property
    def clipped_surrogate(self) -> Optional[cst.Call]:
        """The file's own PPO objective: `rlax.clipped_surrogate_pg_loss(...)` or the ratio
        clipped to [1 - eps, 1 + eps]."""
        from optax_lint.facts.context.objectives import clipped_surrogate

        return clipped_surrogate(self)

    @functools.cached_property
    def imported_zero_centred_model(self) -> Optional[cst.Call]:
        """A Gemma-family model built from a package: bias-free, zero-centred norm scales."""
        from optax_lint.facts.masks.model_families import imported_zero_centred_model

        return imported_zero_centred_model(self)

    @functools.cached_property
    def model_tree(self) -> Optional[ParamTree]:
        """The parameter names the file's flax/haiku model produces, when known."""
        from optax_lint.facts.masks.param_tree import build_model_tree

        return build_model_tree(self)

    @functools.cached_property
    def stacked_layers(self) -> list[StackSite]:
        """Layers stacked by nn.scan/nnx.scan (their params gain a leading axis)."""
        from optax_lint.facts.masks.param_tree import find_stacked_layers

        return find_stacked_layers(self)

    @functools.cached_property
    def declares_pytorch_names(self) -> bool:
        """Whether this file, or a project module it imports, names a parameter PyTorch-style."""
        from optax_lint.facts.masks.model_sources import declares_pytorch_names

        return declares_pytorch_names(self)

    @functools.cached_property
    def schedule_analysis(self) -> ScheduleFacts:
        """What the schedules do over the run: LR uses, horizons, drive sites."""
        from optax_lint.facts.schedules.analysis import build_schedule_analysis

        return build_schedule_analysis(self)

    @functools.cached_property
    def project(self) -> Project:
        """The user's project as this file sees it: the modules it imports, read once per run."""
        from optax_lint.facts.project.files import Project

        return Project(self)

    @functools.cached_property
    def training_calls(self):
        """The training loops and the functions that run one, for `trains_after`."""
        from optax_lint.facts.checkpoints.continues import TrainingCalls

        return TrainingCalls(self)

    @functools.cached_property
    def declared_pins(self) -> dict:
        """library -> the upper bound the project's own dependencies put on it."""
        from optax_lint.facts.project.pins import read_declared_pins

        return read_declared_pins(self)

    @functools.cached_property
    def model_index(self) -> ModelIndex:
        """The model classes this file defines or imports, for the architecture."""
        from optax_lint.facts.context.models import ModelIndex

        return ModelIndex(self)

    @functools.cached_property
    def training_region(self):
        """A predicate on scopes: inside the code that trains (see context/region.py)."""
        from optax_lint.facts.context.region import find_training_region

        return find_training_region(self)

    @functools.cached_property
    def purpose(self):
        """What the code is for: a training run, a test, a benchmark, ... (context/purpose.py)."""
        from optax_lint.facts.context.purpose import find_purpose

        return find_purpose(self)

    @functools.cached_property
    def unstepped_tests(self) -> tuple[tuple[int, int], ...]:
        """Line ranges of test functions that never step an optimizer (context/purpose.py)."""
        from optax_lint.facts.context.purpose import unstepped_tests

        return unstepped_tests(self)

    @functools.cached_property
    def test_code(self) -> tuple[tuple[int, int], ...]:
        """Line ranges of test functions and the helpers only they call (context/purpose.py)."""
        from optax_lint.facts.context.purpose import test_code

        return test_code(self)

    @functools.cached_property
    def placeholder_defaults(self) -> tuple[tuple[int, int], ...]:
        """Line ranges of optimizers that are only a parameter's default, never run by
        the module (context/default_arguments.py)."""
        from optax_lint.facts.context.default_arguments import placeholder_defaults

        return placeholder_defaults(self)

    @functools.cached_property
    def made_up_demos(self) -> tuple[tuple[int, int], ...]:
        """Line ranges of `__main__` blocks that hand the module's training function
        made-up data (context/demo_blocks.py)."""
        from optax_lint.facts.context.demo_blocks import made_up_demos

        return made_up_demos(self)

    @functools.cached_property
    def declares_context(self) -> bool:
        """Whether the user declared any of the run context (command line, pragma, config)."""
        from optax_lint.facts.file_role import declares_context

        return declares_context(self)

    @functools.cached_property
    def source_positions(self) -> Positions:
        """Positions of this file's nodes: the engine's when it set them, else built here
        (a project module read for the context)."""
        return self.positions if self.positions is not None else Positions(self.module, self.text, raw=self.raw)

    @functools.cached_property
    def intended_blocks(self) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """(line ranges written to raise, line ranges guarded against a version)."""
        from optax_lint.facts.intended import intended_blocks

        return intended_blocks(self)

    @functools.cached_property
    def run_context(self):
        """What is being trained (arch, steps, batch, ...), with provenance."""
        from optax_lint.facts.context.run_context import build_run_context

        return build_run_context(self, self.inference.infer)

    @functools.cached_property
    def inference(self):
        """The run context's readers and the indexes they share (training loops, step
        functions), also read for the file's purpose."""
        from optax_lint.facts.context.infer import Inference

        return Inference(self)

    # -- names ------------------------------------------------------------
    def canonical(self, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
        return self.names.canonical(expr, scope)

    def callee(self, record: CallRecord) -> Optional[str]:
        return self.names.canonical(record.node.func, record.scope)

    @functools.cached_property
    def call_order(self) -> dict[cst.Call, int]:
        """Each call's index in source order."""
        return {record.node: i for i, record in enumerate(self.raw.calls)}

    @functools.cached_property
    def calls_by_name(self) -> dict[str, list[CallRecord]]:
        """Calls grouped by the canonical name of their callee (imports resolved)."""
        out: dict[str, list[CallRecord]] = {}
        for record in self.raw.calls:
            name = self.callee(record)
            if name is not None:
                out.setdefault(name, []).append(record)
        return out

    @functools.cached_property
    def calls_by_bare_name(self) -> dict[str, list[CallRecord]]:
        """Calls written as a bare name, `train(...)`, grouped by it (a parameter's value
        is read from the calls of its function)."""
        out: dict[str, list[CallRecord]] = {}
        for record in self.raw.calls:
            if isinstance(record.node.func, cst.Name):
                out.setdefault(record.node.func.value, []).append(record)
        return out

    @functools.cached_property
    def record_of(self) -> dict[cst.Call, CallRecord]:
        return {r.node: r for r in self.raw.calls}

    # -- pipelines --------------------------------------------------------
    @functools.cached_property
    def pipelines(self) -> list[Pipeline]:
        candidates: list[tuple[CallRecord, TxNode]] = []
        for record in self.raw.calls:
            if not self.builder.is_transform_call(record.node, record.scope):
                continue
            # inject_hyperparams(f) alone (the inner call of inject(f)(...)) is not a pipeline.
            parent = record.parent_call
            if parent is not None and parent.func is record.node:
                continue
            candidates.append((record, self.builder.build(record.node, record.scope)))
        contained: set[cst.Call] = set()
        for _, tree in candidates:
            inner = tree.calls()
            inner.discard(tree.call)
            contained |= inner
        # A transform assigned to a name and used inside another pipeline is a component.
        out = []
        for record, tree in candidates:
            if record.node in contained:
                continue
            name = record.assigned_to.value if isinstance(record.assigned_to, cst.Name) else None
            function = record.scope if record.scope.kind == "function" and self._returned(record) else None
            if function is not None:
                tree = self.builder.injected_by(function, tree, record.node, record.scope)
            out.append(Pipeline(tree, record.node, record, name, function, self.schedule_extractor.resolve))
        return out

    def _returned(self, record: CallRecord) -> bool:
        for ret in record.scope.returns:
            value = ret.node.value
            if value is record.node:
                return True
            if isinstance(value, cst.Name) and isinstance(record.assigned_to, cst.Name) and value.value == record.assigned_to.value:
                return True
        return False

    @functools.cached_property
    def pipeline_by_call(self) -> dict[cst.Call, Pipeline]:
        return {p.call: p for p in self.pipelines}

    def pipeline_for(self, expr: cst.BaseExpression, scope: Scope) -> Optional[Pipeline]:
        """The pipeline an expression (e.g. the `tx` of `tx.update`) evaluates to."""
        tree = self.builder.build(expr, scope)
        if tree.kind == "unknown" or tree.call is None:
            return None
        for call in (tree.call,):
            pipeline = self.pipeline_by_call.get(call)
            if pipeline is not None:
                return pipeline
        return None

    # -- schedules --------------------------------------------------------
    @functools.cached_property
    def schedules(self) -> list[Schedule]:
        return self.schedule_extractor.all()

    def schedule_of(self, expr: Optional[cst.BaseExpression], scope: Scope) -> Optional[Schedule]:
        return self.schedule_extractor.resolve(expr, scope)

    # -- update sites -----------------------------------------------------
    @functools.cached_property
    def update_sites(self) -> list[UpdateSite]:
        sites = []
        for record in self.raw.calls:
            func = record.node.func
            name = self.callee(record)
            if name == "optax.apply_updates":
                sites.append(UpdateSite("apply_updates", record, None))
                continue
            if not isinstance(func, cst.Attribute):
                continue
            method = func.attr.value
            if method == "apply_gradients":
                sites.append(UpdateSite("apply_gradients", record, func.value))
            elif method == "update" and len(record.node.args) >= 2:
                if qualified_name(func.value, record.scope) is not None:
                    continue  # nnx.update(model, state), jax.config.update(...): a module's function
                if is_progress_bar(self, func.value, record.scope):
                    continue  # rich's progress.update(task, advance=1)
                pipeline = self.pipeline_for(func.value, record.scope)
                site = UpdateSite("update", record, func.value, pipeline)
                sites.append(site)
        return sites

    @functools.cached_property
    def update_calls(self) -> set[cst.Call]:
        """The calls of every update site, for membership tests."""
        return {site.call for site in self.update_sites}

    @functools.cached_property
    def consumers(self) -> list[Consumer]:
        out = []
        for record in self.raw.calls:
            name = self.callee(record)
            if name is None:
                continue
            if name in TRAIN_STATE_CREATE or name.endswith("TrainState.create"):
                arg = named_arg(record.node, "tx")
                kind = "train_state"
            elif name in NNX_OPTIMIZER:
                positional = [a for a in record.node.args if a.keyword is None]
                arg = named_arg(record.node, "tx")
                arg = arg or (positional[1] if len(positional) > 1 else None)
                kind = "nnx_optimizer"
            else:
                continue
            pipeline = self.pipeline_for(arg.value, record.scope) if arg is not None else None
            out.append(Consumer(kind, record, arg, pipeline))
        return out
