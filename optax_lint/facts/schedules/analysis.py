"""Facts for the schedule rules (OPX301-308): what each learning-rate schedule does
over time, which optimizer consumes it, and which loops drive the updates.

Everything here follows optax 0.2.8's real semantics (optax/schedules/_schedule.py,
_join.py), re-measured by tests/test_schedule_rules_runtime.py:

- `warmup_cosine_decay_schedule`'s `decay_steps` is the TOTAL length, warmup included:
  the schedule reaches `end_value` exactly at step `decay_steps`.
- `cosine_decay_schedule` reaches `init_value * alpha` at `decay_steps`.
- `linear_schedule` / `polynomial_schedule` reach `end_value` at
  `transition_begin + transition_steps` (a negative `transition_begin` becomes 0).
- `join_schedules` calls later pieces with `step - boundary`, so a joined schedule
  ends at `boundaries[-1] + <last piece's own end>`.
- exponential decay never reaches an end value of its own (asymptotic), constant and
  warmup-constant schedules have none, step schedules end on their last boundary:
  none of them gets a horizon here, and the horizon rules stay silent on them.

Nothing is guessed: a value that cannot be known statically is `Unknown`, and a
schedule shape that cannot be followed has kind "unknown".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline, TxNode
from optax_lint.facts.schedules.calls import Schedule
from optax_lint.syntax.arguments import param_arg
from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import (
    LOCAL_NAMES,
    ClassFields,
    Evaluator,
    Unknown,
    sign_of,
    single_binding,
    value_of,
)
from optax_lint.syntax.walker import CallRecord, LoopRecord, Scope

# Aliases whose LR scales an adaptive (per-coordinate normalised) direction.
ADAPTIVE_ALIASES = frozenset(
    {
        "adam", "adamw", "adabelief", "adafactor", "adagrad", "adamax", "adamaxw", "amsgrad", "adan",
        "lamb", "lion", "nadam", "nadamw", "novograd", "rmsprop", "yogi", "sm3",
        "optimistic_adam", "optimistic_adam_v2",
        "contrib.ademamix", "contrib.simplified_ademamix", "contrib.adopt", "contrib.muon",
        "contrib.sophia", "contrib.acprop", "contrib.galore",
    }
)
# Hand-built chains: a learning-rate step after one of these is an adaptive optimizer.
ADAPTIVE_PRIMITIVES = frozenset(
    {
        "scale_by_adam", "scale_by_adamax", "scale_by_belief", "scale_by_rms", "scale_by_factored_rms",
        "scale_by_lion", "scale_by_amsgrad", "scale_by_yogi", "scale_by_novograd", "scale_by_adan",
        "scale_by_rss", "scale_by_sm3",
    }
)
# Optimizers that set their own step size or warm up by themselves: the schedule
# rules have nothing to say about their `learning_rate`.
SELF_SCHEDULING = frozenset(
    {
        "radam", "lbfgs", "polyak_sgd",
        "contrib.dadapt_adamw", "contrib.prodigy", "contrib.cocob", "contrib.dog", "contrib.dowg",
        "contrib.momo", "contrib.momo_adam", "contrib.mechanize",
        "contrib.schedule_free", "contrib.schedule_free_adamw", "contrib.schedule_free_sgd",
    }
)
# A config attribute or variable with one of these names holds a float learning rate.
_LR_FIELD = re.compile(r"^(lr|learning_rate|base_lr|base_learning_rate|peak_lr|init_lr|max_lr|initial_lr|initial_learning_rate)$", re.I)
_JIT_WRAPPERS = frozenset({"jax.jit", "jax.pmap", "functools.partial", "flax.nnx.jit", "equinox.filter_jit", "jax.named_call"})


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def code(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


def schedule_values(facts) -> Evaluator:
    """Static values of schedule arguments and loop bounds: `value_of`, plus `cfg.field`
    of a local config class instance (`cfg = Config(...)`)."""
    return Evaluator([LOCAL_NAMES, ClassFields(facts.raw, facts.text)])


# ---------------------------------------------------------------------------
# What a schedule does over time


@dataclass(eq=False)
class Shape:
    schedule: Schedule
    kind: str  # constant | warmup_constant | warmup_cosine | warmup_exponential | cosine | linear | polynomial | exponential | ramp | step | onecycle | join | unknown
    warmup: Any = field(default_factory=lambda: Unknown("unknown shape"))  # warmup length in steps (0: none)
    warmup_expr: Optional[cst.BaseExpression] = None  # where the warmup length is written
    decay: str = "unknown"  # after the warmup: constant | cosine | linear | polynomial | exponential | step | onecycle | other | unknown
    end_step: Any = field(default_factory=lambda: Unknown("unknown shape"))  # where it reaches its end value; None: never has one
    horizon_expr: Optional[cst.BaseExpression] = None  # the argument that sets end_step
    horizon_param: str = ""
    peak: Any = field(default_factory=lambda: Unknown(""))
    end_value: Any = field(default_factory=lambda: Unknown(""))
    pieces: list["Shape"] = field(default_factory=list)

    @property
    def decays(self) -> bool:
        return self.decay in ("cosine", "linear", "polynomial")


def _direction(init: Any, end: Any, init_expr, end_expr, scope: Scope) -> Optional[str]:
    """'down' (a decay), 'up' (a ramp), 'flat', or None when it cannot be told."""
    if is_number(init) and is_number(end):
        return "down" if end < init else "up" if end > init else "flat"
    if is_number(end) and end == 0 and init_expr is not None and sign_of(init_expr, scope) == 1:
        return "down"
    if is_number(init) and init == 0 and end_expr is not None and sign_of(end_expr, scope) == 1:
        return "up"
    return None


class ScheduleShapes:
    def __init__(self, facts) -> None:
        self.facts = facts
        self.read = schedule_values(facts).eval
        self._shapes: dict[int, Shape] = {}

    def value(self, schedule: Schedule, param: str) -> Any:
        expr = schedule.args.expr(param)
        if expr is None:
            return schedule.args.value(param)
        return self.read(expr, schedule.scope)

    def shape(self, schedule: Schedule) -> Shape:
        key = id(schedule)
        if key not in self._shapes:
            self._shapes[key] = Shape(schedule, "unknown")  # recursion guard
            self._shapes[key] = self._compute(schedule)
        return self._shapes[key]

    def _compute(self, s: Schedule) -> Shape:
        k = s.key
        v = lambda p: self.value(s, p)  # noqa: E731
        e = s.args.expr
        if k == "constant_schedule":
            return Shape(s, "constant", 0, None, "constant", None, peak=v("value"), end_value=v("value"))
        if k == "warmup_constant_schedule":
            return Shape(s, "warmup_constant", v("warmup_steps"), e("warmup_steps"), "constant", None, peak=v("peak_value"), end_value=v("peak_value"))
        if k == "warmup_cosine_decay_schedule":
            return Shape(s, "warmup_cosine", v("warmup_steps"), e("warmup_steps"), "cosine", v("decay_steps"), e("decay_steps"), "decay_steps", v("peak_value"), v("end_value"))
        if k == "warmup_exponential_decay_schedule":
            return Shape(s, "warmup_exponential", v("warmup_steps"), e("warmup_steps"), "exponential", None, peak=v("peak_value"), end_value=v("end_value"))
        if k == "cosine_decay_schedule":
            init, alpha = v("init_value"), v("alpha")
            end = init * alpha if is_number(init) and is_number(alpha) else Unknown("end")
            return Shape(s, "cosine", 0, None, "cosine", v("decay_steps"), e("decay_steps"), "decay_steps", init, end)
        if k in ("linear_schedule", "polynomial_schedule"):
            init, end = v("init_value"), v("end_value")
            direction = _direction(init, end, e("init_value"), e("end_value"), s.scope)
            steps, begin = v("transition_steps"), v("transition_begin")
            if is_number(begin) and begin < 0:
                begin = 0
            if direction == "down":
                power = v("power") if k == "polynomial_schedule" else 1
                kind = "linear" if is_number(power) and power == 1 else "polynomial"
                end_step = begin + steps if is_number(steps) and is_number(begin) else Unknown("length")
                horizon = e("transition_steps") if is_number(begin) and begin == 0 else None
                return Shape(s, kind, 0, None, kind, end_step, horizon, "transition_steps", init, end)
            if direction == "up":
                warmup = steps if is_number(begin) and begin == 0 else Unknown("ramp begins late")
                return Shape(s, "ramp", warmup, e("transition_steps"), "constant", None, peak=end, end_value=end)
            if direction == "flat":
                return Shape(s, "constant", 0, None, "constant", None, peak=init, end_value=init)
            return Shape(s, "unknown")
        if k == "exponential_decay":
            return Shape(s, "exponential", 0, None, "exponential", None, peak=v("init_value"), end_value=v("end_value"))
        if k in ("piecewise_constant_schedule",):
            return Shape(s, "step", 0, None, "step", None, peak=v("init_value"))
        if k in ("cosine_onecycle_schedule", "linear_onecycle_schedule"):
            return Shape(s, "onecycle", Unknown("onecycle ramp"), None, "onecycle", v("transition_steps"), e("transition_steps"), "transition_steps", v("peak_value"))
        if k == "join_schedules":
            return self._join(s)
        return Shape(s, "unknown")

    # -- join_schedules ---------------------------------------------------
    def join_parts(self, s: Schedule):
        """(piece expressions, boundary expressions), each None unless the list's exact
        contents are known (the shared list model: literals, appends, `+=`)."""
        lists = self.facts.builder.lists
        pieces = lists.elements(s.args.expr("schedules"), s.scope, s.call)
        bounds = lists.elements(s.args.expr("boundaries"), s.scope, s.call)
        return (pieces.exact() if pieces is not None else None), (bounds.exact() if bounds is not None else None)

    def _join(self, s: Schedule) -> Shape:
        piece_exprs, bound_exprs = self.join_parts(s)
        if piece_exprs is None or bound_exprs is None or len(s.pieces) != len(piece_exprs) or not s.pieces:
            return Shape(s, "unknown")
        if len(bound_exprs) != len(piece_exprs) - 1:
            return Shape(s, "unknown")
        bounds = [self.read(b, s.scope) for b in bound_exprs]
        shapes = [self.shape(p) for p in s.pieces]
        first, last = shapes[0], shapes[-1]
        if len(shapes) == 1:
            return Shape(s, "join", first.warmup, first.warmup_expr, first.decay, first.end_step, None, "", first.peak, first.end_value, shapes)
        if first.kind in ("ramp", "warmup_constant"):
            warmup, warmup_expr = bounds[0], bound_exprs[0]
        elif first.kind == "constant":
            warmup, warmup_expr = 0, None
        else:
            warmup, warmup_expr = Unknown("first piece is not a warmup"), None
        middle_flat = all(m.kind == "constant" for m in shapes[1:-1])
        if last.warmup == 0 and middle_flat and first.kind in ("ramp", "warmup_constant", "constant"):
            decay = last.decay
        else:
            decay = "other"
        if last.end_step is None:
            end_step = None
        elif is_number(last.end_step) and is_number(bounds[-1]):
            end_step = bounds[-1] + last.end_step
        else:
            end_step = Unknown("join length")
        return Shape(s, "join", warmup, warmup_expr, decay, end_step, None, "", last.peak, last.end_value, shapes)

    # -- values over time (for messages) ----------------------------------
    def value_at(self, s: Schedule, t: float) -> Optional[float]:
        """The schedule's value at step t, by optax's formulas; None when unknown."""
        k = s.key
        v = lambda p: self.value(s, p)  # noqa: E731
        try:
            if k == "constant_schedule":
                return _num(v("value"))
            if k in ("linear_schedule", "polynomial_schedule"):
                init, end, steps, begin = (_num(v(p)) for p in ("init_value", "end_value", "transition_steps", "transition_begin"))
                power = _num(v("power")) if k == "polynomial_schedule" else 1.0
                if None in (init, end, steps, begin, power):
                    return None
                return _poly(init, end, power, steps, begin, t)
            if k == "warmup_constant_schedule":
                init, peak, w = (_num(v(p)) for p in ("init_value", "peak_value", "warmup_steps"))
                return None if None in (init, peak, w) else _poly(init, peak, 1.0, w, 0, t)
            if k == "cosine_decay_schedule":
                init, steps, alpha, exponent = (_num(v(p)) for p in ("init_value", "decay_steps", "alpha", "exponent"))
                return None if None in (init, steps, alpha, exponent) else _cosine(init, steps, alpha, exponent, t)
            if k == "warmup_cosine_decay_schedule":
                init, peak, w, d, end, exponent = (_num(v(p)) for p in ("init_value", "peak_value", "warmup_steps", "decay_steps", "end_value", "exponent"))
                if None in (init, peak, w, d, end, exponent) or d - w <= 0:
                    return None
                if t < w:
                    return _poly(init, peak, 1.0, w, 0, t)
                alpha = 0.0 if peak == 0 else end / peak
                return _cosine(peak, d - w, alpha, exponent, t - w)
            if k == "join_schedules":
                piece_exprs, bound_exprs = self.join_parts(s)
                if piece_exprs is None or bound_exprs is None or len(s.pieces) != len(piece_exprs):
                    return None
                bounds = [_num(self.read(b, s.scope)) for b in bound_exprs]
                if None in bounds:
                    return None
                out = self.value_at(s.pieces[0], t)
                for boundary, piece in zip(bounds, s.pieces[1:]):
                    if t >= boundary:
                        out = self.value_at(piece, t - boundary)
                return out
        except (OverflowError, ZeroDivisionError, ValueError):
            return None
        return None


def _num(value: Any) -> Optional[float]:
    return float(value) if is_number(value) else None


def _poly(init: float, end: float, power: float, steps: float, begin: float, t: float) -> float:
    if steps <= 0:
        return init
    begin = max(begin, 0)
    count = min(max(t - begin, 0), steps)
    return (init - end) * (1 - count / steps) ** power + end


def _cosine(init: float, steps: float, alpha: float, exponent: float, t: float) -> float:
    count = min(t, steps)
    decay = 0.5 * (1 + math.cos(math.pi * count / steps))
    return init * ((1 - alpha) * decay**exponent + alpha)


# ---------------------------------------------------------------------------
# Which optimizer consumes which learning rate


@dataclass(eq=False)
class LrUse:
    pipeline: Pipeline
    node: TxNode  # the alias / scale_by_learning_rate / scale_by_schedule node
    param: str  # learning_rate | step_size_fn
    expr: Optional[cst.BaseExpression]  # None: the signature default
    arg: Optional[cst.Arg]
    schedule: Optional[Schedule]
    constant: bool  # a constant learning rate (a number, a constant_schedule, a config float)
    constant_text: str
    lr_field: bool  # a config attribute named like a learning rate (`config.learning_rate`)
    multisteps: Optional[TxNode]  # the MultiSteps wrapper above the optimizer
    injected: bool  # inside inject_hyperparams (the LR may be set by hand)
    adaptive: bool
    self_scheduling: bool
    opaque: bool  # the pipeline has steps we cannot see (unknown nodes, scale_by_schedule elsewhere)
    adaptive_name: str = ""  # `adamw`, or the scale_by_* block of a hand-built chain
    update_clipped: bool = False  # Adafactor's guard: a factored second moment, then an update clip, before the LR

    @property
    def optimizer_call(self) -> Optional[cst.Call]:
        return self.node.call


@dataclass
class ScheduleFacts:
    shapes: ScheduleShapes
    lr_uses: list[LrUse]
    read: Callable[[Optional[cst.BaseExpression], Scope], Any]  # schedule_values(facts).eval
    drive_sites: Optional[list["DriveSite"]] = None

    def lr_schedules(self) -> list[tuple[LrUse, Schedule]]:
        """(use, schedule) for every schedule that is an optimizer's learning rate, once each."""
        out, seen = [], set()
        for use in self.lr_uses:
            if use.schedule is not None and id(use.schedule) not in seen and not use.self_scheduling:
                seen.add(id(use.schedule))
                out.append((use, use.schedule))
        return out



def build_schedule_analysis(facts) -> ScheduleFacts:
    shapes = ScheduleShapes(facts)
    uses = []
    for pipeline in facts.pipelines:
        opaque = _opaque(pipeline)
        sequences = None
        for node in pipeline.nodes():
            if node.kind not in ("alias", "transform") or node.args is None or node.entry is None:
                continue
            if node.kind == "alias" and "learning_rate" in node.entry.params:
                param = "learning_rate"
            elif node.key == "scale_by_learning_rate":
                param = "learning_rate"
            elif node.key == "scale_by_schedule":
                param = "step_size_fn"
            else:
                continue
            expr = node.args.expr(param)
            arg = node.args.by_name.get(param)
            schedule = resolve_schedule(facts, expr, node.scope) if expr is not None else None
            constant, text = _constant_lr(facts, node, param, expr, schedule)
            lr_field = not constant and schedule is None and _lr_field(expr)
            if lr_field:
                text = code(expr)
            if node.kind == "alias":
                adaptive_name = node.short if node.key in ADAPTIVE_ALIASES else ""
            else:
                if sequences is None:
                    sequences = pipeline.sequences()
                adaptive_name = _hand_built_adaptive(sequences, node)
            update_clipped = False
            if "factored" in adaptive_name or node.key == "adafactor":
                if sequences is None:
                    sequences = pipeline.sequences()
                update_clipped = _update_clipped(sequences, node)
            uses.append(
                LrUse(
                    pipeline, node, param, expr, arg, schedule, constant, text, lr_field,
                    multisteps=node.enclosing(("MultiSteps",)),
                    injected=node.enclosing(("inject_hyperparams", "inject_stateful_hyperparams")) is not None,
                    adaptive=bool(adaptive_name),
                    self_scheduling=node.key in SELF_SCHEDULING,
                    opaque=opaque,
                    adaptive_name=adaptive_name,
                    update_clipped=update_clipped,
                )
            )
    return ScheduleFacts(shapes, uses, shapes.read)


def _opaque(pipeline: Pipeline) -> bool:
    lr_steps = 0
    for node in pipeline.nodes():
        if node.kind == "unknown" or node.key == "scale_by_schedule":
            return True
        if node.kind == "alias" or node.key == "scale_by_learning_rate":
            lr_steps += 1
    return lr_steps != 1  # several optimizers (multi_transform): judged per use, not as one run


def _hand_built_adaptive(sequences, node: TxNode) -> str:
    """The adaptive scale_by_* block before a hand-built learning-rate step, or ''."""
    for sequence in sequences:
        for i, step in enumerate(sequence):
            if step.origin is node:
                return next((s.primitive for s in sequence[:i] if s.primitive in ADAPTIVE_PRIMITIVES), "")
    return ""


def _update_clipped(sequences, node: TxNode) -> bool:
    """Whether the learning-rate step of `node` follows Adafactor's two guards in every
    expansion: a factored second moment (its decay rate rises from 0, so the estimate is
    never stale) and then a clip of the update's RMS (`clip_by_block_rms`)."""
    found = False
    for sequence in sequences:
        for i, step in enumerate(sequence):
            if step.origin is node and step.primitive == "scale_by_learning_rate":
                before = [s.primitive for s in sequence[:i]]
                if "scale_by_factored_rms" not in before:
                    return False
                if "clip_by_block_rms" not in before[before.index("scale_by_factored_rms"):]:
                    return False
                found = True
                break
    return found


def resolve_schedule(facts, expr: Optional[cst.BaseExpression], scope: Scope, depth: int = 0) -> Optional[Schedule]:
    """The optax schedule an expression evaluates to: through names assigned once and
    local helper functions with a single `return` (`create_learning_rate_fn(...)`)."""
    if expr is None or depth > 6:
        return None
    schedule = facts.schedule_of(expr, scope)
    if schedule is not None:
        return schedule
    if isinstance(expr, cst.Name):
        binding, _ = single_binding(expr.value, scope)
        if binding is not None and not binding.index:
            return resolve_schedule(facts, binding.value, binding.scope, depth + 1)
        return None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name):
        _, bindings = lookup(expr.func.value, scope)
        if len(bindings) == 1 and bindings[0].kind == "def":
            fn = facts.raw.functions.get(bindings[0].node)
            if fn is not None:
                values = [r.node.value for r in fn.returns if r.node.value is not None]
                if len(values) == 1:
                    return resolve_schedule(facts, values[0], fn, depth + 1)
    return None


def _constant_lr(facts, node: TxNode, param: str, expr, schedule: Optional[Schedule]) -> tuple[bool, str]:
    if schedule is not None:
        if schedule.key == "constant_schedule":
            return True, code(schedule.call)
        return False, ""
    if param != "learning_rate":
        return False, ""
    if expr is None:
        if node.args is not None and node.args.has_star:
            return False, ""
        try:
            default = node.entry.default(param) if node.entry is not None else None
        except KeyError:
            return False, ""
        return (is_number(default), repr(default))
    return _constant_expr(facts, expr, node.scope, 0)


def _lr_field(expr) -> bool:
    if isinstance(expr, cst.Attribute):
        return bool(_LR_FIELD.match(expr.attr.value))
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
        index = expr.slice[0].slice
        return isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString) and bool(_LR_FIELD.match(index.value.raw_value))
    return False


def _constant_expr(facts, expr, scope: Scope, depth: int) -> tuple[bool, str]:
    if depth > 6:
        return False, ""
    value = value_of(expr, scope)
    if is_number(value):
        return True, code(expr)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "float" and not lookup("float", scope)[1]:
        return True, code(expr)
    if isinstance(expr, cst.Name):
        binding, _ = single_binding(expr.value, scope)
        if binding is None or binding.index:
            return False, ""
        ok, _ = _constant_expr(facts, binding.value, binding.scope, depth + 1)
        return ok, code(expr)
    if isinstance(expr, cst.Attribute) and _LR_FIELD.match(expr.attr.value):
        # `config.learning_rate`: a float in every real script, unless the file builds
        # schedules at all (then it might hold one).
        return (not facts.schedules), code(expr)
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
        index = expr.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString) and _LR_FIELD.match(index.value.raw_value):
            entries = _dict_entries(facts, expr.value, index.value.raw_value, scope)
            if entries:
                # `args = dict(lr=lr_schedule)` in this file: judge what the entries hold.
                return all(_constant_expr(facts, e, s, depth + 1)[0] for e, s in entries), code(expr)
            return (not facts.schedules), code(expr)
    return False, ""


def _dict_entries(facts, container, key: str, scope: Scope, depth: int = 0) -> list:
    """The values written for `key` in the dict a name holds (`{"lr": ...}` or
    `dict(lr=...)` bound once in this file, or passed for a parameter by every local
    call of its function), with their scopes; empty when any of them is not visible."""
    if not isinstance(container, cst.Name) or depth > 2:
        return []
    owner, bindings = lookup(container.value, scope)
    if len(bindings) == 1 and bindings[0].kind == "param" and owner is not None and isinstance(owner.node, cst.FunctionDef):
        from optax_lint.facts.api_currency import call_sites

        out = []
        sites = call_sites(facts, owner)
        for site in sites:
            arg = param_arg(site.node, owner.node, container.value)
            found = _dict_entries(facts, arg, key, site.scope, depth + 1) if arg is not None else []
            if not found:
                return []
            out.extend(found)
        return out
    entry = _dict_entry(container, key, scope)
    return [entry] if entry is not None else []


def _dict_entry(container: cst.Name, key: str, scope: Scope):
    binding, _ = single_binding(container.value, scope)
    if binding is None or binding.index or binding.value is None:
        return None
    value = binding.value
    if isinstance(value, cst.Dict):
        for element in value.elements:
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) and element.key.raw_value == key:
                return element.value, binding.scope
        return None
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict" and not lookup("dict", binding.scope)[1]:
        for arg in value.args:
            if arg.keyword is not None and arg.keyword.value == key:
                return arg.value, binding.scope
    return None


# ---------------------------------------------------------------------------
# Loops that drive the updates


@dataclass(eq=False)
class LoopBound:
    loop: LoopRecord
    expr: Optional[cst.BaseExpression]  # the iteration count as written (range(N) -> N)
    value: Any  # its value, or Unknown


@dataclass(eq=False)
class DriveSite:
    """A call inside Python loops that performs one optimizer update per call: an
    update site, or a call of a local (possibly jitted) function that contains one."""

    call: CallRecord
    loops: list[LoopBound]  # enclosing loops of the call, outermost first


def drive_sites(facts) -> list[DriveSite]:
    sf = facts.schedule_analysis
    if sf.drive_sites is None:
        sf.drive_sites = _drive_sites(facts, sf.read)
    return sf.drive_sites


def _drive_sites(facts, read) -> list[DriveSite]:
    loop_of = {id(l.node): l for l in facts.raw.loops}
    if not loop_of:
        return []
    updating_functions: set[int] = set()
    direct: list[CallRecord] = []
    for site in facts.update_sites:
        record = site.record
        if record.loop_depth > 0:
            direct.append(record)
        elif record.scope.kind == "function":
            updating_functions.add(id(record.scope.node))
    candidates = list(direct)
    if updating_functions:
        for record in facts.raw.calls:
            if record.loop_depth > 0 and _calls_updating_function(facts, record, updating_functions):
                candidates.append(record)
    out = []
    for record in candidates:
        loops = []
        node = record.statement
        while node is not None:
            loop = loop_of.get(id(node))
            if loop is not None and loop.scope is record.scope:
                loops.append(_bound(facts, loop, read))
            node = facts.raw.parent_stmt.get(node)
            if isinstance(node, cst.Module):
                break
        if loops:
            loops.reverse()
            out.append(DriveSite(record, loops))
    return out


def _calls_updating_function(facts, record: CallRecord, functions: set[int], depth: int = 0) -> bool:
    func = record.node.func
    target = func
    scope = record.scope
    for _ in range(4):
        if not isinstance(target, cst.Name):
            return False
        _, bindings = lookup(target.value, scope)
        defs = [b for b in bindings if b.kind == "def"]
        if defs:
            return any(id(b.node) in functions for b in defs)
        if len(bindings) != 1 or bindings[0].kind != "assign" or not isinstance(bindings[0].value, cst.Call):
            return False
        wrapper = bindings[0].value
        if facts.names.canonical(wrapper.func, bindings[0].scope) not in _JIT_WRAPPERS or not wrapper.args:
            return False
        target, scope = wrapper.args[0].value, bindings[0].scope
    return False


def _bound(facts, loop: LoopRecord, read) -> LoopBound:
    node = loop.node
    if not isinstance(node, cst.For):
        return LoopBound(loop, None, Unknown("while loop"))
    it = node.iter
    for _ in range(2):
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("tqdm", "trange", "range") and not lookup(it.func.value, loop.scope)[1]:
            name = it.func.value
            positional = [a.value for a in it.args if a.keyword is None and not a.star]
            if name == "tqdm":
                if not positional:
                    break
                it = positional[0]
                continue
            if len(positional) == 1:
                return LoopBound(loop, positional[0], read(positional[0], loop.scope))
            if len(positional) == 2:
                start, stop = read(positional[0], loop.scope), read(positional[1], loop.scope)
                value = stop - start if is_number(start) and is_number(stop) else Unknown("range bounds")
                expr = positional[1] if is_number(start) and start == 0 else None
                return LoopBound(loop, expr, value)
        break
    return LoopBound(loop, None, Unknown("not a range loop"))


# ---------------------------------------------------------------------------
# Run context


def context_value(facts, name: str):
    """The ContextValue of a run-context field, or None when unknown."""
    try:
        run_context = facts.run_context
    except Exception:  # the context layer failing must not take the rules down with it
        return None
    entry = run_context.get(name) if run_context is not None else None
    if entry is None or entry.value is None:
        return None
    return entry


def context_number(facts, name: str) -> Optional[int]:
    entry = context_value(facts, name)
    if entry is None:
        return None
    value = entry.value
    if isinstance(value, str):
        try:
            value = float(value.replace("_", ""))
        except ValueError:
            return None
    if not is_number(value) or value <= 0:
        return None
    return int(value) if float(value).is_integer() else None


def provenance(entry) -> str:
    """'declared in a pragma', 'inferred at train.py:12', ..."""
    if entry is None:
        return ""
    cite = getattr(entry, "cite", None)
    if callable(cite):
        try:
            return cite()
        except Exception:
            pass
    source = getattr(entry, "source", "")
    location = getattr(entry, "location", None)
    words = {"cli": "declared on the command line", "pragma": "declared in the file", "config": "declared in config", "inferred": "inferred"}
    text = words.get(source, source or "known")
    if location and source != "cli":
        text += f" at {location}" if source != "config" else f" in {location}"
    return text


def same_code(a: Optional[cst.CSTNode], b: Optional[cst.CSTNode]) -> bool:
    return a is not None and b is not None and code(a) == code(b)


def factors(expr: Optional[cst.BaseExpression], scope: Scope, depth: int = 0) -> list[str]:
    """The multiplicands of a product, as code (`a * b * c` -> ['a', 'b', 'c']), looking
    through names assigned once to a product."""
    if expr is None or depth > 4:
        return []
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return factors(expr.left, scope, depth + 1) + factors(expr.right, scope, depth + 1)
    if isinstance(expr, cst.Name) and depth < 3:
        binding, _ = single_binding(expr.value, scope)
        if binding is not None and not binding.index and isinstance(binding.value, cst.BinaryOperation) and isinstance(binding.value.operator, cst.Multiply):
            return factors(binding.value, binding.scope, depth + 1)
    return [code(expr)]
