"""Layouts: the shape of a pipeline's state. `chain` is a tuple (one element per
transformation), `named_chain` a dict, `inject_hyperparams` an
`InjectStatefulHyperparamsState` with its hyperparameters (and which are scheduled),
`MultiSteps` a `MultiStepsState` holding `.inner_opt_state`, `masked`/`apply_if_finite`
an `.inner_state`, `multi_transform` `.inner_states[label].inner_state`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional

import libcst as cst

from optax_lint.facts.pipelines.build import INJECTED_FACTORY, Pipeline, TxNode
from optax_lint.facts.state.paths import STATE_ATTRS, step_text
from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import Scope

INJECT_WRAPPERS = frozenset({"inject_hyperparams", "inject_stateful_hyperparams"})
# TxNode.reason of unknown chain elements that may stand for any number of elements.
_MULTI_ELEMENT_REASONS = ("*arguments not a list", "not a list built in this function", "** arguments", "with an unknown value", "insert at an unknown index")


@dataclass(eq=False)
class Layout:
    kind: str  # tuple | dict | inject | fields | opaque | unknown
    node: Optional[TxNode] = None
    items: list["Layout"] = field(default_factory=list)  # tuple elements
    exact_upto: int = 0  # tuple: items[:exact_upto] are surely at their index
    keys: dict = field(default_factory=dict)  # dict: named_chain names / partition labels
    keys_complete: bool = True
    fields: tuple = ()  # NamedTuple fields (inject / fields kinds)
    inner_field: str = ""  # the field holding the inner state
    inner: Optional["Layout"] = None
    hyper: dict = field(default_factory=dict)  # inject: name -> "const" | "sched" | "unknown"
    hyper_complete: bool = False
    state_name: str = ""  # for messages

    def __repr__(self) -> str:
        inside = ""
        if self.kind == "tuple":
            inside = ", ".join(map(repr, self.items)) + ("" if self.exact_upto == len(self.items) else f"; exact_upto={self.exact_upto}")
        elif self.kind == "dict":
            inside = ", ".join(f"{k!r}: {v!r}" for k, v in self.keys.items())
        elif self.kind == "inject":
            inside = f"{self.hyper}, {self.inner!r}"
        elif self.kind == "fields":
            inside = f"{self.inner_field}={self.inner!r}"
        elif self.node is not None:
            inside = self.node.key
        return f"{self.kind}({inside})"

    def walk(self) -> Iterator["Layout"]:
        yield self
        for item in self.items:
            yield from item.walk()
        for value in self.keys.values():
            yield from value.walk()
        if self.inner is not None:
            yield from self.inner.walk()

    @property
    def complete(self) -> bool:
        """Every part of the state is known (no unknown transformation, no unknown element count)."""
        for layout in self.walk():
            if layout.kind == "unknown" or not layout.keys_complete:
                return False
            if layout.kind == "tuple" and layout.exact_upto < len(layout.items):
                return False
        return True

    def injects(self, prefix: tuple = ()) -> list[tuple[Optional[tuple], "Layout"]]:
        """Every inject_hyperparams state, with its path (None when its index is uncertain)."""
        out: list[tuple[Optional[tuple], Layout]] = []
        if self.kind == "inject":
            out.append((prefix, self))
        if self.kind == "tuple":
            for i, item in enumerate(self.items):
                path = prefix + (("index", i),) if prefix is not None and i < self.exact_upto else None
                out.extend(item.injects(path))
        elif self.kind == "dict":
            for key, item in self.keys.items():
                out.extend(item.injects(prefix + (("key", key),) if prefix is not None else None))
        if self.inner is not None:
            out.extend(self.inner.injects(prefix + (("attr", self.inner_field),) if prefix is not None else None))
        return out

    def follow(self, steps: tuple) -> tuple[Optional["Layout"], str]:
        """The layout at `steps`: (layout, ""), (None, error) when the access fails at
        run time, or (None, "") when it cannot be known."""
        layout: Layout = self
        for step in steps:
            kind, value = step
            if layout.kind == "unknown":
                return None, ""
            if layout.kind == "tuple":
                if kind == "index":
                    n = len(layout.items)
                    if layout.exact_upto == n and not -n <= value < n:
                        return None, f"index {value} is out of range for a chain of {n}"
                    if 0 <= value < layout.exact_upto or (layout.exact_upto == n and value < 0):
                        layout = layout.items[value]
                        continue
                    return None, ""
                return None, f"the chain's state is a tuple, it has no {step_text(step)}"
            if layout.kind == "dict":
                if kind == "key" and value in layout.keys:
                    layout = layout.keys[value]
                    continue
                if not layout.keys_complete:
                    return None, ""
                return None, f"{layout.state_name} has no key {value!r}"
            if layout.kind in ("inject", "fields"):
                name = value if kind == "attr" else (layout.fields[value] if kind == "index" and -len(layout.fields) <= value < len(layout.fields) else None)
                if name is None:
                    return None, f"{layout.state_name} has no {step_text(step)}"
                if name == layout.inner_field:
                    layout = layout.inner if layout.inner is not None else Layout("unknown")
                    continue
                if name in layout.fields:
                    layout = Layout("leaf", state_name=f"{layout.state_name}.{name}")
                    continue
                return None, f"{layout.state_name} has no attribute {name!r}"
            if layout.kind == "opaque":
                if kind == "attr" and value in STATE_ATTRS:
                    return None, f"{layout.state_name} has no attribute {value!r}"
                return None, ""  # inside a transformation's own state: not modelled
            if layout.kind == "leaf":
                return None, f"{layout.state_name} has no {step_text(step)}"
            return None, ""
        return layout, ""




class Layouts:
    """The layouts of one module's pipelines, built once each."""

    def __init__(self, facts) -> None:
        self.facts = facts
        self._layouts: dict[int, Layout] = {}

    def layout(self, pipeline: Pipeline) -> Layout:
        key = id(pipeline)
        if key not in self._layouts:
            self._layouts[key] = self._layout(pipeline.root)
        return self._layouts[key]

    def _layout(self, node: TxNode) -> Layout:
        short = node.short
        if node.kind == "unknown":
            return Layout("unknown", node)
        if node.kind in ("alias", "transform"):
            return Layout("opaque", node, state_name=f"the state of {node.short}")
        if short in INJECT_WRAPPERS:
            child = node.children[0] if node.children else None
            inner = self._layout(child) if child is not None and child.kind != "unknown" else Layout("unknown", child)
            layout = Layout(
                "inject", node, fields=("count", "hyperparams", "hyperparams_states", "inner_state"),
                inner_field="inner_state", inner=inner, state_name="an InjectStatefulHyperparamsState",
            )
            layout.hyper, layout.hyper_complete = self._hyperparams(node, child)
            return layout
        if short == "chain":
            items = [self._layout(c) for c in node.children]
            exact = 0
            for child in node.children:
                if child.conditional or (child.kind == "unknown" and (child.slot is None or any(r in child.reason for r in _MULTI_ELEMENT_REASONS))):
                    break
                exact += 1
            return Layout("tuple", node, items=items, exact_upto=exact, state_name="the chain's state (a tuple)")
        if short == "named_chain":
            keys, complete = {}, True
            for label, child in zip(node.labels, node.children):
                if isinstance(label, str) and not child.conditional:
                    keys[label] = self._layout(child)
                else:
                    complete = False
            if len(node.labels) != len(node.children):
                complete = False
            return Layout("dict", node, keys=keys, keys_complete=complete, state_name="the named_chain's state (a dict)")
        if short == "MultiSteps":
            inner = self._layout(node.children[0]) if node.children else Layout("unknown")
            return Layout(
                "fields", node, fields=("mini_step", "gradient_step", "inner_opt_state", "acc_grads", "skip_state"),
                inner_field="inner_opt_state", inner=inner, state_name="a MultiStepsState",
            )
        if short == "apply_if_finite":
            inner = self._layout(node.children[0]) if node.children else Layout("unknown")
            return Layout(
                "fields", node, fields=("notfinite_count", "last_finite", "total_notfinite", "inner_state"),
                inner_field="inner_state", inner=inner, state_name="an ApplyIfFiniteState",
            )
        if short == "masked":
            inner = self._layout(node.children[0]) if node.children else Layout("unknown")
            return Layout("fields", node, fields=("inner_state",), inner_field="inner_state", inner=inner, state_name="a MaskedState")
        if short in ("multi_transform", "partition"):
            keys, complete = {}, len(node.labels) == len(node.children)
            for label, child in zip(node.labels, node.children):
                if isinstance(label, str):
                    keys[label] = Layout("fields", child, fields=("inner_state",), inner_field="inner_state", inner=self._layout(child), state_name="a MaskedState")
                else:
                    complete = False
            states = Layout("dict", node, keys=keys, keys_complete=complete, state_name="PartitionState.inner_states (a dict)")
            return Layout("fields", node, fields=("inner_states",), inner_field="inner_states", inner=states, state_name="a PartitionState")
        return Layout("unknown", node)

    def _hyperparams(self, wrapper: TxNode, child: Optional[TxNode]) -> tuple[dict, bool]:
        """The hyperparams dict of an inject_hyperparams state: name -> const | sched | unknown."""
        if wrapper.reason == INJECTED_FACTORY:
            return {}, False  # the factory's own parameters: not read here
        static: set[str] = set()
        complete = True
        if wrapper.args is not None and wrapper.args.given("static_args"):
            value = wrapper.args.value("static_args")
            if isinstance(value, str):
                static = {value}
            elif isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
                static = set(value)
            else:
                complete = False
        out: dict[str, str] = {}
        if child is None:
            return out, False
        entry = child.entry
        if entry is None or child.args is None:
            call = child.call
            if isinstance(call, cst.Call):
                for arg in call.args:
                    if arg.keyword is not None and arg.keyword.value not in static:
                        kind = self.classify(arg.value, child.scope)
                        if kind is not None:
                            out[arg.keyword.value] = kind
            return out, False
        args = child.args
        if args.has_star or args.unmatched:
            complete = False
        for param in entry.params + tuple(p for p in entry.kwonly if p not in entry.params):
            if param in static:
                continue
            expr = args.expr(param)
            if expr is not None:
                kind = self.classify(expr, child.scope)
            elif param in entry.defaults:
                default = entry.defaults[param]
                kind = "const" if isinstance(default, (int, float)) and not isinstance(default, bool) else None
            elif param in entry.none_defaults or param not in entry.params:
                kind = None
            else:
                kind = "unknown"  # a non-literal default (a dtype, a function)
            if kind is not None:
                out[param] = kind
        return out, complete

    def classify(self, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
        """How inject_hyperparams treats an argument: const (numeric), sched (callable),
        None (bool/None/str: not a hyperparameter), unknown."""
        if self.facts.schedule_of(expr, scope) is not None or isinstance(expr, cst.Lambda):
            return "sched"
        if isinstance(expr, cst.Name):
            _, bindings = lookup(expr.value, scope)
            if len(bindings) == 1 and bindings[0].kind == "def":
                return "sched"
        value = value_of(expr, scope)
        if isinstance(value, Unknown):
            return "unknown"
        if isinstance(value, bool) or value is None or isinstance(value, (str, dict, list, tuple)):
            return None
        if isinstance(value, (int, float)):
            return "const"
        return "unknown"
