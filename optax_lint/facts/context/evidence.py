"""What the inference of every run-context field uses: the file's evaluator (values
with provenance across the project), locations, notes on why a field stays unknown,
and values bound to well-known names (`num_train_steps`, `batch_size`, ...)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.context.run_context import ContextValue
from optax_lint.facts.project.evaluate import ConfigEvaluator, config_of
from optax_lint.facts.project.found import Found, Origin
from optax_lint.syntax.nodes import last_name  # noqa: F401 (re-exported: the context readers import it from here)
from optax_lint.syntax.values import Unknown
from optax_lint.syntax.walker import Scope


class Evidence:
    """One file's inference: what its field readers share."""

    def __init__(self, facts) -> None:
        self.facts = facts
        self.context = None  # the RunContext being inferred
        self._evaluator: Optional[ConfigEvaluator] = None
        # Indexes the field readers share, each built on first use (one Evidence per file).
        self.binding_names: Optional[dict] = None  # name -> [(scope, written name)]
        self.attribute_reads: Optional[dict] = None  # attribute -> [(expr, scope)]
        self.step_functions: Optional[set] = None  # functions that step an optimizer, and their callers
        self.training_loops: Optional[list] = None  # (loop, step call) of loops around a train step

    @property
    def ev(self) -> ConfigEvaluator:
        if self._evaluator is None:
            self._evaluator = ConfigEvaluator(self.facts, self.facts.project)
        return self._evaluator

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

    def named(self, names: frozenset, scope: Optional[Scope] = None):
        """A value bound to (or read as a config attribute named) one of `names`."""
        facts = self.facts
        candidates: list[Found] = []
        if self.binding_names is None:
            self.binding_names = _binding_names(facts)
        index = self.binding_names
        for name in names:
            for s, written in index.get(name, ()):
                found = self.ev.name(written, s)
                if isinstance(found, Found) and positive_int(found.value):
                    candidates.append(Found(found.value, found.confidence, found.origin, found.detail or written))
        if not candidates:
            for expr, s in self._attribute_reads(names):
                found = self.ev.eval(expr, s)
                if isinstance(found, Found) and positive_int(found.value):
                    candidates.append(Found(found.value, found.confidence, found.origin, found.detail or code_text(expr)))
        if not candidates:
            # Flags and command-line options the file defines, read or not through an attribute.
            mc = config_of(facts, facts.project)
            for table in (mc.flags, mc.argparse):
                for name, found in table.items():
                    if name.lower() in names and positive_int(found.value):
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

        if self.attribute_reads is None:
            self.attribute_reads = compute(None)
        table = self.attribute_reads
        seen = set()
        for name in names:
            for expr, scope in table.get(name, ()):
                if id(expr) not in seen:
                    seen.add(id(expr))
                    yield expr, scope


def code_text(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


def shortened(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


def positive_int(value) -> bool:
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
