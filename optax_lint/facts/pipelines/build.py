"""Optimizer pipelines: the trees of optax transformations a module builds, and their
canonical expansion into primitive steps.

A pipeline is followed through everything real code does: nested chains, transforms
bound to names and chained later, `chain(*transforms)` over a list built with
`.append`, helper functions that build and return a chain, `inject_hyperparams(f)(...)`,
and the wrappers (MultiSteps, masked, multi_transform, apply_if_finite, named_chain).
Whatever cannot be followed becomes an `unknown` node with the reason, never a guess.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import libcst as cst

from optax_lint.core.optax_api import (
    CLIP_PRIMITIVES,
    SINGLE_INNER_WRAPPERS,
    ApiEntry,
    ExpansionStep,
    OptaxApi,
)
from optax_lint.syntax.arguments import BoundArgs, bind
from optax_lint.syntax.lists import ListModel, alternatives
from optax_lint.syntax.names import NameResolver, lookup
from optax_lint.syntax.nodes import holds, node_code
from optax_lint.syntax.values import Unknown, sign_of, single_binding, value_of
from optax_lint.syntax.walker import CallRecord, RawFacts, Scope, walk

_MAX_DEPTH = 16
_MAX_CHOICE_DEPTH = 6


@dataclass(eq=False)
class TxNode:
    key: str  # optax api key ("adamw", "chain", "contrib.muon") or "<unknown>"
    kind: str  # alias | transform | wrapper | unknown
    call: Optional[cst.Call]
    scope: Scope
    args: Optional[BoundArgs] = None
    entry: Optional[ApiEntry] = None
    children: list["TxNode"] = field(default_factory=list)
    labels: list[Any] = field(default_factory=list)  # multi_transform labels / named_chain names
    conditional: bool = False  # only present under some branch (append under `if`)
    reason: str = ""  # why an unknown node is unknown
    # How the element is spelled inside its parent chain: the Arg (or list element)
    # that holds it, so fixes can move it. None when it came through .append().
    slot: Optional[cst.CSTNode] = None
    slot_owner: Optional[cst.Call] = None  # the chain call whose args hold `slot`
    via: list[cst.CSTNode] = field(default_factory=list)  # names followed to reach it
    parent: Optional["TxNode"] = None  # the wrapper holding this node

    def chain_element(self) -> Optional["TxNode"]:
        """This node, or the wrapper around it (e.g. masked(...)), as written in a chain."""
        node: Optional[TxNode] = self
        while node is not None:
            if node.slot is not None:
                return node
            if node.parent is None or node.parent.short not in ("masked", "apply_if_finite"):
                return None
            node = node.parent
        return None

    def enclosing(self, shorts: tuple[str, ...]) -> Optional["TxNode"]:
        """The nearest wrapper around this node whose short name is one of `shorts`."""
        parent = self.parent
        while parent is not None:
            if parent.short in shorts:
                return parent
            parent = parent.parent
        return None

    @property
    def short(self) -> str:
        return self.key.rsplit(".", 1)[-1]

    def walk(self) -> Iterator["TxNode"]:
        yield self
        for child in self.children:
            yield from child.walk()

    def calls(self) -> set[cst.Call]:
        return {n.call for n in self.walk() if n.call is not None}


@dataclass(eq=False)
class Step:
    """One primitive transformation in an expanded pipeline."""

    primitive: str  # canonical primitive key, or "<unknown>"
    origin: TxNode  # the node the user wrote (alias, transform, or unknown)
    const: dict[str, Any] = field(default_factory=dict)
    passed: dict[str, str] = field(default_factory=dict)
    masked: bool = False
    maybe: bool = False  # presence depends on an unknown value or a branch
    # The optax.masked wrappers the step sits under (outermost first): steps under
    # different wrappers may act on disjoint parameter subsets (param groups).
    mask_group: tuple["TxNode", ...] = ()
    negated: dict[str, str] = field(default_factory=dict)  # primitive param -> -alias param
    derived: tuple[str, ...] = ()
    schedules: Optional[Callable] = None  # expr, scope -> Schedule | None

    def arg_value(self, name: str) -> Any:
        """The value this primitive receives for `name`."""
        if name in self.const:
            return self.const[name]
        origin = self.origin
        if origin.args is None or name in self.derived:
            return Unknown("no arguments" if origin.args is None else f"{name} is computed by {origin.short}")
        if name in self.negated:
            value = origin.args.value(self.negated[name])
            return -value if isinstance(value, (int, float)) and not isinstance(value, bool) else Unknown("negated")
        if self.passed:
            if name not in self.passed:
                return Unknown(f"'{name}' not passed by {origin.short}")
            return origin.args.value(self.passed[name])
        return origin.args.value(name)

    @property
    def is_clip(self) -> bool:
        return self.primitive in CLIP_PRIMITIVES

    def negates(self) -> Optional[bool]:
        """Whether this step flips the update's sign: True, False, or None (unknown)."""
        p = self.primitive
        if p == "<unknown>":
            return None
        if p == "scale_by_learning_rate":
            flip = self.arg_value("flip_sign")
            if isinstance(flip, Unknown):
                flip = True if "flip_sign" not in self.const and not _given(self, "flip_sign") else None
            if flip is None:
                return None
            lr_sign = self.arg_sign("learning_rate")
            if lr_sign is None:
                return bool(flip)  # an unknown LR is a positive LR in every real script
            return bool(flip) != (lr_sign < 0)
        if p == "scale":
            sign = self.arg_sign("step_size")
            return None if sign is None else sign < 0
        if p == "scale_by_schedule":
            sign = _sign_of_schedule_expr(self)
            return None if sign is None else sign < 0
        return False

    def arg_sign(self, name: str) -> Optional[int]:
        """Sign of the value this primitive receives for `name` (see values.sign_of)."""
        if name in self.const:
            value = self.const[name]
            return None if not isinstance(value, (int, float)) else (value > 0) - (value < 0)
        origin = self.origin
        if origin.args is None or name in self.derived:
            return None
        if name in self.negated:
            inner = Step(self.primitive, origin, passed={name: self.negated[name]}, schedules=self.schedules).arg_sign(name)
            return None if inner is None else -inner
        alias_name = self.passed.get(name) if self.passed else name
        if alias_name is None:
            return None
        expr = origin.args.expr(alias_name)
        if expr is None:
            return _sign(origin.args.value(alias_name), self)
        schedule = self.schedules(expr, origin.scope) if self.schedules is not None else None
        if schedule is not None:
            return schedule.sign()
        return sign_of(expr, origin.scope)

    @property
    def is_lr_step(self) -> bool:
        """The learning-rate step: after it, updates are in parameter units."""
        return self.primitive == "scale_by_learning_rate" or (self.primitive in ("scale", "scale_by_schedule") and self.negates() is True)


def _given(step: Step, name: str) -> bool:
    alias_name = step.passed.get(name, name) if step.passed else name
    return step.origin.args is not None and step.origin.args.given(alias_name)


def _sign(value: Any, step: Step) -> Optional[int]:
    if isinstance(value, bool) or isinstance(value, Unknown):
        return None
    if isinstance(value, (int, float)):
        return -1 if value < 0 else 1
    return None


def _sign_of_schedule_expr(step: Step) -> Optional[int]:
    origin = step.origin
    if origin.args is None:
        return None
    expr = origin.args.expr("step_size_fn")
    if expr is None:
        return None
    schedule = step.schedules(expr, origin.scope) if step.schedules is not None else None
    if schedule is None:
        return None
    return schedule.sign()


@dataclass(eq=False)
class Pipeline:
    root: TxNode
    call: cst.Call  # the outermost constructor call
    record: CallRecord
    name: Optional[str]  # the variable it is assigned to, if any
    function: Optional[Scope]  # the helper function returning it, if any
    schedules: Optional[Callable] = None  # resolves schedule expressions (see ScheduleExtractor)

    def sequences(self) -> list[list[Step]]:
        sequences = expand(self.root)
        for sequence in sequences:
            for step in sequence:
                step.schedules = self.schedules
        return sequences

    def nodes(self) -> Iterator[TxNode]:
        return self.root.walk()


# ---------------------------------------------------------------------------
# Building trees


class PipelineBuilder:
    def __init__(self, raw: RawFacts, api: OptaxApi, names: NameResolver) -> None:
        self.raw = raw
        self.api = api
        self.names = names
        self.lists = ListModel(raw)  # shared with the schedule extractor

    # -- entry points -----------------------------------------------------
    def transform_entry(self, call: cst.Call, scope: Scope) -> Optional[ApiEntry]:
        """The api entry when `call` constructs an optax transformation."""
        entry = self.api.entry(self.names.canonical(call.func, scope))
        if entry is not None and entry.kind in ("alias", "transform", "wrapper"):
            return entry
        return None

    def is_transform_call(self, call: cst.Call, scope: Scope) -> bool:
        if self.transform_entry(call, scope) is not None:
            return True
        return self.inject_inner(call, scope) is not None

    def build(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> TxNode:
        if depth > _MAX_DEPTH:
            return TxNode("<unknown>", "unknown", None, scope, reason="pipeline too deep")
        if isinstance(expr, cst.Call):
            return self._build_call(expr, scope, depth)
        if isinstance(expr, cst.IfExp):
            return self._choice([(expr.body, scope), (expr.orelse, scope)], scope, depth)
        if isinstance(expr, cst.Name):
            binding, reason = single_binding(expr.value, scope)
            alternatives = self._alternatives(expr.value, scope) if binding is None else None
            if alternatives is not None:
                node = self._choice(alternatives, scope, depth)
                node.via.append(expr)
                return node
            if binding is None:
                binding = _rebound_from(expr, scope) or _last_before(self.raw, expr, scope)
            if binding is None:
                fn = self._local_function(expr.value, scope)
                reason = reason if fn is None else f"'{expr.value}' is a function"
                return TxNode("<unknown>", "unknown", None, scope, reason=reason)
            if binding.index:
                return TxNode("<unknown>", "unknown", None, scope, reason=f"'{expr.value}' is unpacked")
            node = self.build(binding.value, binding.scope, depth + 1)
            node.via.append(expr)
            return node
        return TxNode("<unknown>", "unknown", None, scope, reason=f"{type(expr).__name__} expression")

    def _alternatives(self, name: str, scope: Scope) -> Optional[list[tuple[Optional[cst.BaseExpression], Scope]]]:
        """The values a name may hold when it is bound on several branches
        (`if adam: d = scale_by_adam() else: d = scale_by_rms()`), or a parameter's
        default (callers may pass something else: that alternative is unknown)."""
        owner, bindings = lookup(name, scope)
        if owner is None or not bindings:
            return None
        if len(bindings) == 1 and bindings[0].kind == "param":
            default = bindings[0].node.default if isinstance(bindings[0].node, cst.Param) else None
            if default is None or not isinstance(default, cst.Call):
                return None
            return [(default, owner.parent or owner), (None, owner)]
        if len(bindings) < 2 or not any(b.conditional for b in bindings):
            return None
        out = []
        for binding in bindings:
            if binding.kind not in ("assign", "annassign") or binding.index or binding.value is None:
                return None
            if any(isinstance(n, cst.Name) and n.value == name for n in _names_in(binding.value)):
                return None  # `tx = chain(clip, tx)`: a rebinding, not a branch
            out.append((binding.value, binding.scope))
        return out

    def _choice(self, alternatives, scope: Scope, depth: int) -> TxNode:
        """One of several values, picked at run time: each child is a whole alternative."""
        if depth > _MAX_CHOICE_DEPTH:  # alternatives multiply: keep the work bounded
            return TxNode("<unknown>", "unknown", None, scope, reason="too many alternatives to follow")
        node = TxNode("<choice>", "wrapper", None, scope)
        for expr, where in alternatives:
            if expr is None:
                child = TxNode("<unknown>", "unknown", None, where, reason="a value passed by the caller")
            else:
                child = self.build(expr, where, depth + 1)
            child.conditional = True
            child.parent = node
            node.children.append(child)
        return node

    # -- calls ------------------------------------------------------------
    def inject_inner(self, call: cst.Call, scope: Scope) -> Optional[ApiEntry]:
        """`inject_hyperparams(optax.adamw)(...)` -> the entry of adamw."""
        if not isinstance(call.func, cst.Call):
            return None
        outer = self.api.entry(self.names.canonical(call.func.func, scope))
        if outer is None or outer.short not in ("inject_hyperparams", "inject_stateful_hyperparams"):
            return None
        if not call.func.args:
            return None
        inner_expr = call.func.args[0].value
        inner = self.api.entry(self.names.canonical(inner_expr, scope))
        if inner is None:
            inner = ApiEntry("<unknown>", "unknown", (), (), "", {}, (), False, False, ())
        return inner

    def _build_call(self, call: cst.Call, scope: Scope, depth: int) -> TxNode:
        inner_entry = self.inject_inner(call, scope)
        if inner_entry is not None:
            outer_entry = self.api.entry(self.names.canonical(call.func.func, scope))
            if inner_entry.kind == "unknown":
                child = TxNode("<unknown>", "unknown", call, scope, reason="inject_hyperparams of an unknown optimizer")
            else:
                child = TxNode(inner_entry.key, inner_entry.kind, call, scope, bind(call, scope, inner_entry), inner_entry)
                if inner_entry.kind == "wrapper":
                    self._fill_wrapper(child, depth)
            # The wrapper node stands for the whole `inject_hyperparams(f)(...)` expression
            # (so it is one pipeline root); its own arguments come from the inner call.
            wrapper = TxNode(outer_entry.key, "wrapper", call, scope, bind(call.func, scope, outer_entry), outer_entry, children=[child])
            child.parent = wrapper
            return wrapper
        # MultiSteps(...).gradient_transformation()
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "gradient_transformation" and isinstance(call.func.value, cst.Call):
            return self.build(call.func.value, scope, depth + 1)
        entry = self.transform_entry(call, scope)
        if entry is None:
            fn = self._callee_function(call, scope)
            if fn is not None:
                return self._build_from_function(fn, call, scope, depth)
            callee = node_code(call.func)
            return TxNode("<unknown>", "unknown", call, scope, reason=f"call to {callee[:60]}")
        node = TxNode(entry.key, entry.kind, call, scope, bind(call, scope, entry), entry)
        if entry.kind == "wrapper":
            self._fill_wrapper(node, depth)
        return node

    def _fill_wrapper(self, node: TxNode, depth: int) -> None:
        self._fill_children(node, depth)
        for child in node.children:
            child.parent = node

    def _fill_children(self, node: TxNode, depth: int) -> None:
        short = node.short
        args = node.args
        assert args is not None
        if short in ("chain",):
            node.children = self._elements(node.call, args, node.scope, depth)
        elif short == "named_chain":
            for arg in node.call.args:
                if arg.star and arg.keyword is None:
                    self._named_dict(node, arg, depth)
            for arg in list(args.varargs):
                if arg.star:
                    continue
                value = arg.value
                if isinstance(value, cst.Tuple) and len(value.elements) == 2:
                    child = self.build(value.elements[1].value, node.scope, depth + 1)
                    node.labels.append(value_of(value.elements[0].value, node.scope))
                    node.children.append(child)
                else:
                    node.children.append(TxNode("<unknown>", "unknown", None, node.scope, reason="named_chain element"))
        elif short in ("multi_transform", "partition"):
            transforms = args.expr("transforms")
            if isinstance(transforms, cst.Name):
                binding, _ = single_binding(transforms.value, node.scope)
                transforms = binding.value if binding is not None else transforms
            if isinstance(transforms, cst.Dict):
                for element in transforms.elements:
                    if isinstance(element, cst.DictElement):
                        node.labels.append(value_of(element.key, node.scope))
                        node.children.append(self.build(element.value, node.scope, depth + 1))
                    else:
                        node.children.append(TxNode("<unknown>", "unknown", None, node.scope, reason="dict unpacking"))
            else:
                node.children.append(TxNode("<unknown>", "unknown", None, node.scope, reason="transforms not a dict literal"))
        elif short in SINGLE_INNER_WRAPPERS:
            param = SINGLE_INNER_WRAPPERS[short]
            expr = args.expr(param) if param else None
            if expr is None and node.entry is not None and node.entry.params:
                expr = args.expr(node.entry.params[0])
            if expr is not None:
                node.children.append(self.build(expr, node.scope, depth + 1))
            else:
                node.children.append(TxNode("<unknown>", "unknown", None, node.scope, reason=f"{short} without an inner transformation"))
        else:
            # Any other wrapper: treat its transformation-valued arguments as children.
            for name, arg in args.by_name.items():
                if isinstance(arg.value, cst.Call) and self.is_transform_call(arg.value, node.scope):
                    node.children.append(self.build(arg.value, node.scope, depth + 1))
            if not node.children:
                node.children.append(TxNode("<unknown>", "unknown", None, node.scope, reason=f"{short}'s inner transformation"))

    def _named_dict(self, node: TxNode, arg: cst.Arg, depth: int) -> None:
        """named_chain(*parts.items()) and named_chain(**{"name": transform})."""
        value = arg.value
        if arg.star == "*" and isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "items":
            value = value.func.value
        elif arg.star != "**":
            node.children.append(TxNode("<unknown>", "unknown", None, node.scope, reason="named_chain *arguments"))
            return
        changed = False
        if isinstance(value, cst.Name):
            owner, _ = lookup(value.value, node.scope)
            changed = owner is not None and (
                (id(owner), value.value) in self.raw.item_stores or bool(self.lists.mutations(owner, value.value))
            )
            binding, _ = single_binding(value.value, node.scope)
            value = binding.value if binding is not None and not binding.index else None
        if not isinstance(value, cst.Dict) or changed:
            node.children.append(TxNode("<unknown>", "unknown", None, node.scope, reason="named_chain over a dict this file does not show"))
            return
        for element in value.elements:
            if not isinstance(element, cst.DictElement):
                node.children.append(TxNode("<unknown>", "unknown", None, node.scope, reason="dict unpacking"))
                continue
            node.labels.append(value_of(element.key, node.scope))
            node.children.append(self.build(element.value, node.scope, depth + 1))

    def _elements(self, call: cst.Call, args: BoundArgs, scope: Scope, depth: int) -> list[TxNode]:
        """The ordered elements of chain(...), following *lists built with append."""
        out: list[TxNode] = []
        for arg in call.args:
            if arg.keyword is not None:
                continue
            if arg.star == "*":
                out.extend(self._star_elements(arg.value, scope, depth, call))
            elif arg.star == "**":
                out.append(TxNode("<unknown>", "unknown", None, scope, reason="** arguments"))
            else:
                child = self.build(arg.value, scope, depth + 1)
                child.slot, child.slot_owner = arg, call
                out.append(child)
        return out

    def _star_elements(self, expr: cst.BaseExpression, scope: Scope, depth: int, consumer: Optional[cst.Call] = None) -> list[TxNode]:
        value = self.lists.elements(expr, scope, consumer)
        if value is None:
            name = expr.value if isinstance(expr, cst.Name) else None
            reason = f"'{name}' is not a list built in this function" if name else "*arguments not a list"
            return [TxNode("<unknown>", "unknown", None, scope, reason=reason)]
        out = []
        paired = dict(alternatives(value.items))
        skip = False
        for i, item in enumerate(value.items):
            if skip:
                skip = False
                continue
            child = self.build(item.expr, item.scope, depth + 1)
            child.conditional = child.conditional or item.conditional
            if i in paired:
                # appended in the two arms of one `if`: one or the other, never both
                other = self.build(value.items[i + 1].expr, value.items[i + 1].scope, depth + 1)
                choice = TxNode("<choice>", "wrapper", None, scope)
                for alternative in (child, other):
                    alternative.conditional, alternative.parent = True, choice
                    choice.children.append(alternative)
                choice.conditional = not paired[i]
                child, skip = choice, True
            out.append(child)
        if not value.complete:
            out.append(TxNode("<unknown>", "unknown", None, scope, reason=value.reason))
        return out

    # -- helper functions -------------------------------------------------
    def _local_function(self, name: str, scope: Scope) -> Optional[Scope]:
        _, bindings = lookup(name, scope)
        if len(bindings) == 1 and bindings[0].kind == "def":
            return self.raw.functions.get(bindings[0].node)
        return None

    def _callee_function(self, call: cst.Call, scope: Scope) -> Optional[Scope]:
        if isinstance(call.func, cst.Name):
            return self._local_function(call.func.value, scope)
        return None

    def _build_from_function(self, fn: Scope, call: cst.Call, scope: Scope, depth: int) -> TxNode:
        values = [r.node.value for r in fn.returns if r.node.value is not None]
        if len(values) != 1:
            return TxNode("<unknown>", "unknown", call, scope, reason=f"{fn.name}() returns {len(values)} values")
        node = self.build(values[0], fn, depth + 1)
        node.via.append(call)
        return self.injected_by(fn, node, call, scope)

    def injected_by(self, fn: Scope, node: TxNode, call: cst.Call, scope: Scope) -> TxNode:
        """`@optax.inject_hyperparams def make(lr): return optax.lars(lr)`: what `fn`
        returns is the injected optimizer, whose hyperparams are the factory's own
        parameters; other functions return `node` as it is."""
        outer = self._inject_decorator(fn)
        if outer is None:
            return node
        wrapper = TxNode(outer.key, "wrapper", call, scope, None, outer, children=[node], reason=INJECTED_FACTORY)
        node.parent = wrapper
        return wrapper

    def _inject_decorator(self, fn: Scope) -> Optional[ApiEntry]:
        """The inject_hyperparams entry when `fn` is decorated with it (bare, or through
        functools.partial with static_args)."""
        if not isinstance(fn.node, cst.FunctionDef):
            return None
        for decorator in fn.node.decorators:
            expr = decorator.decorator
            if isinstance(expr, cst.Call) and expr.args and self.names.canonical(expr.func, fn.parent or fn) == "functools.partial":
                expr = expr.args[0].value
            entry = self.api.entry(self.names.canonical(expr, fn.parent or fn)) if isinstance(expr, (cst.Name, cst.Attribute)) else None
            if entry is not None and entry.short in ("inject_hyperparams", "inject_stateful_hyperparams"):
                return entry
        return None


# The reason an inject_hyperparams wrapper gives when a decorated factory built it: its
# hyperparams are the factory's parameters, not those of the optimizer it returns.
INJECTED_FACTORY = "inject_hyperparams decorating a factory"


def _names_in(expr: cst.BaseExpression):
    return walk(expr)


def _rebound_from(use: cst.Name, scope: Scope):
    """The binding a name holds inside the value of its own next assignment
    (`opt = multi_transform({"model": set_to_zero(), "lora": opt})`, `tx = chain(clip, tx)`):
    the one just before it, when every binding is a plain unconditional assignment in
    one scope, so the order of the statements is the order they run in."""
    owner, bindings = lookup(use.value, scope)
    if owner is None or len(bindings) < 2:
        return None
    if any(b.conditional or b.kind not in ("assign", "annassign") or b.index or b.value is None or b.scope is not owner for b in bindings):
        return None
    for before, binding in zip(bindings, bindings[1:]):
        if any(node is use for node in _names_in(binding.value)):
            return before
    return None


def _last_before(raw: RawFacts, use: cst.Name, scope: Scope):
    """The binding a name holds where it is read after being rebound in straight-line
    code (`opt_d = chain(...)`, then `opt_d = masked(opt_d, mask)`, then
    `chain(opt_d, opt_ra)`): the last one whose statement comes before the reading
    statement (RawFacts.reaching_binding), when the name is read in the scope that
    binds it and every binding is a plain assignment of that scope, outside any branch
    or loop."""
    owner, bindings = lookup(use.value, scope)
    if owner is None or owner is not scope or len(bindings) < 2:
        return None
    if any(b.conditional or b.in_loop or b.kind not in ("assign", "annassign") or b.index or b.value is None or b.scope is not owner for b in bindings):
        return None
    node = owner.node
    body = node.body if isinstance(node, cst.Module) else getattr(getattr(node, "body", None), "body", None)
    if not isinstance(body, (list, tuple)):
        return None
    reading = next((statement for statement in body if holds(statement, use)), None)
    return None if reading is None else raw.reaching_binding(bindings, reading)


# ---------------------------------------------------------------------------
# Expansion into primitive steps


def expand(node: TxNode) -> list[list[Step]]:
    """The primitive sequences a pipeline applies; one per multi_transform branch."""
    return [list(seq) for seq in _expand(node, masked=False)]


def _expand(node: TxNode, masked: bool, group: tuple = ()) -> list[list[Step]]:
    if node.kind == "unknown":
        return [[Step("<unknown>", node, masked=masked, maybe=node.conditional, mask_group=group)]]
    if node.kind == "transform":
        return [[Step(node.key, node, masked=masked, maybe=node.conditional, mask_group=group)]]
    if node.kind == "alias":
        entry = node.entry
        if entry is None or not (entry.expansion or entry.branches):
            return [[Step("<unknown>", node, masked=masked, maybe=node.conditional, mask_group=group)]]
        specs_list = list(entry.branches.values()) if entry.branches else [entry.expansion]
        out = []
        for specs in specs_list:
            steps = []
            for spec in specs:
                present = _condition(spec, node)
                if present is False:
                    continue
                steps.append(
                    Step(
                        spec.step, node, dict(spec.const), dict(spec.passed),
                        masked=masked or spec.masked,
                        maybe=present is None or node.conditional,
                        negated=dict(spec.negated),
                        derived=spec.derived,
                        mask_group=group,
                    )
                )
            out.append(steps)
        return out
    # wrappers
    short = node.short
    if short in ("chain", "named_chain"):
        branches: list[list[Step]] = [[]]
        for child in node.children:
            child_branches = _expand(child, masked, group)
            if child.conditional:
                for branch in child_branches:
                    for step in branch:
                        step.maybe = True
            branches = [a + b for a, b in itertools.product(branches, child_branches)]
            if len(branches) > 64:  # keep pathological multi_transform nests bounded
                branches = branches[:64]
        return branches
    if short == "<choice>":
        out = []
        for child in node.children:
            for branch in _expand(child, masked, group):
                for step in branch:
                    step.maybe = True
                out.append(branch)
        return out
    if short in ("multi_transform", "partition"):
        out = []
        for child in node.children:
            out.extend(_expand(child, masked, group))
        return out or [[Step("<unknown>", node, masked=masked, mask_group=group)]]
    if short == "masked":
        return [seq for child in node.children for seq in _expand(child, True, group + (node,))]
    if node.children:
        return [seq for child in node.children for seq in _expand(child, masked, group)]
    return [[Step("<unknown>", node, masked=masked, mask_group=group)]]


def _condition(spec: ExpansionStep, node: TxNode) -> Optional[bool]:
    """Whether a conditional expansion step is present: True, False, or None (unknown)."""
    if not spec.when:
        return True
    value = node.args.value(spec.when["arg"]) if node.args is not None else Unknown("")
    if isinstance(value, Unknown):
        return None
    test = spec.when.get("is")
    if test == "not_none":
        return value is not None
    if test == "none":
        return value is None
    if test == "truthy":
        return bool(value)
    if test == "falsy":
        return not value
    if test == "nonzero":
        return value is not None and value != 0
    return None
