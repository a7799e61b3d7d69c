"""OPX108 decay-without-mask: A Transformer's decoupled weight decay has no mask, so
biases and norm scales are decayed too."""

from __future__ import annotations

import math
from typing import Optional

import libcst as cst

from optax_lint.facts.masks.extract import decay_in_project, decay_mask_param, decay_value
from optax_lint.facts.masks.param_tree import frameworks
from optax_lint.facts.pipelines.build import Pipeline, TxNode
from optax_lint.facts.project.evaluate import project_value
from optax_lint.facts.schedules.analysis import context_number, context_value, is_number
from optax_lint.rules.protocol.fine_tune_learning_rate import schedule_peak
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.names import lookup

_MASK_FN_NAME = "decay_mask"


class DecayWithoutMask(Rule):
    code = "OPX108"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        negligible = float(ctx.option("min_weight_decay"))
        candidates = []
        selected = _selected_elsewhere(facts.pipelines)
        for pipeline in facts.pipelines:
            for node in pipeline.nodes():
                if id(node.call) in selected:
                    continue  # `opt = multi_transform({..., "lora": opt})`: the rebound branch trains
                if self._unmasked_decay(node) and decay_in_project(facts, node) is not False:
                    value = decay_value(facts, node)
                    if value is not None and value < negligible:
                        continue  # adamw's default 1e-4 and the like: no regularization to aim
                    shrink = _run_shrink(facts, node, value, float(ctx.option("negligible_step_decay")))
                    if shrink is not None and shrink < float(ctx.option("negligible_shrink")):
                        continue  # the whole run's decay moves a scale or bias by a few percent at most
                    candidates.append((pipeline, node))
        if not candidates:
            return
        arch = facts.run_context.get("arch")
        if arch is None or arch.value != "transformer":
            return
        if facts.adapters_only is not None:
            return  # only LoRA adapters train: no bias or norm scale is decayed
        tree = facts.model_tree
        if tree is not None and tree.decay_pulls_to_zero_output() is False:
            return  # bias-free layers and zero-centred scales: decay pulls towards the identity
        if (tree is None or not tree.leaves) and facts.imported_zero_centred_model is not None:
            return  # an imported Gemma: the same layout, known by its family
        for pipeline, node in candidates:
            fix = _mask_fix(facts, pipeline, node)
            ctx.report(
                node.call,
                optimizer=describe(node.call),
                evidence=arch.cite(),
                fix=fix,
                changes_state=True,
            )

    @staticmethod
    def _unmasked_decay(node: TxNode) -> bool:
        param = decay_mask_param(node)
        if param is None or node.args is None or node.call is None or node.args.has_star:
            return False
        mask = node.args.expr(param)
        if mask is not None and not (isinstance(mask, cst.Name) and mask.value == "None"):
            return False
        return not _under_selection(node)


# Wrappers that apply what they wrap to some leaves only.
_SELECTING = ("masked", "multi_transform", "partition", "selective_transform")


def _under_selection(node: TxNode) -> bool:
    """A masked(...) or a partition branch already selects the leaves `node` sees."""
    return node.enclosing(_SELECTING) is not None


def _selected_elsewhere(pipelines: list[Pipeline]) -> set[int]:
    """Constructor calls that another pipeline holds under a mask or partition: an
    optimizer built first, then rebound as one branch of a multi_transform."""
    return {id(node.call) for pipeline in pipelines for node in pipeline.nodes() if node.call is not None and _under_selection(node)}


def _run_shrink(facts, node: TxNode, decay: Optional[float], step_floor: float) -> Optional[float]:
    """The most the decay can shrink a parameter over the whole run, 1 - exp(-lr x wd x
    steps) with the peak rate (decoupled decay multiplies each weight by 1 - lr x wd per
    step; a gradient that pushes back only makes it less), when the optimizer's own rate,
    its decay and a run length read with high confidence (or declared) are all known.
    With the length not known that firmly, 0.0 when one step's decay at the peak rate is
    at most `step_floor` (fine-tuning rates: a 5% shrink would take 50,000 steps or more
    at the peak); None otherwise."""
    if decay is None or node.args is None or node.kind != "alias":
        return None
    peak = _peak_rate(facts, node)
    if peak is None:
        return None
    steps = context_number(facts, "steps")
    entry = context_value(facts, "steps")
    if steps is None or entry is None or not entry.firm:
        # a hair of slack: 1e-4 x 0.01 is 1.0000000000000002e-06 in floating point
        return 0.0 if peak * float(decay) <= step_floor * (1 + 1e-9) else None
    return 1.0 - math.exp(-peak * float(decay) * float(steps))


def _peak_rate(facts, node: TxNode) -> Optional[float]:
    """The optimizer's learning rate at its peak, as the project holds it, or None. A
    name bound in several branches (`if warmup: lr = join_schedules(...) else: lr =
    constant_schedule(PEAK_LR)`) peaks at the highest of its branches' peaks."""
    expr = node.args.expr("learning_rate")
    if expr is None:
        return None
    peaks = [_expr_peak(facts, value, scope) for value, scope in _branches(expr, node.scope)]
    if not peaks or any(peak is None for peak in peaks):
        return None
    return max(peaks)


def _branches(expr: cst.BaseExpression, scope) -> list[tuple[cst.BaseExpression, object]]:
    """The values a name assigned more than once may hold, or the expression itself."""
    if isinstance(expr, cst.Name):
        _, bindings = lookup(expr.value, scope)
        if len(bindings) > 1 and all(b.kind == "assign" and b.value is not None and not b.index for b in bindings):
            return [(b.value, b.scope) for b in bindings]
    return [(expr, scope)]


def _expr_peak(facts, expr: cst.BaseExpression, scope) -> Optional[float]:
    schedule = facts.schedule_of(expr, scope)
    if schedule is not None:
        # the schedule's arguments as the project holds them (`config['learning_rate']`)
        peak = schedule_peak(schedule, read=lambda s, param: _arg_value(facts, s, param))
    else:
        peak = project_value(facts, expr, scope)
    if not is_number(peak) or peak <= 0:
        return None
    return float(peak)


def _arg_value(facts, schedule, param: str):
    """A schedule argument followed across the project; an absent one as written (None
    or the default the file's reading gives)."""
    expr = schedule.args.expr(param)
    return schedule.value(param) if expr is None else project_value(facts, expr, schedule.scope)


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
        if at < len(body):
            following = body[at]
            lines = list(following.leading_lines)
            if len([ln for ln in lines if ln.comment is None]) < 2:
                body[at] = following.with_changes(leading_lines=[blank, blank] + [ln for ln in lines if ln.comment is not None])
        body[at:at] = [new_function]
        if needs_import:
            body = fixes.insert_import(body, cst.parse_statement("from flax import traverse_util\n"))
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
