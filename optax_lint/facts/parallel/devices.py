"""Device counts and per-device batches, for the linear scaling rule: whether an
expression involves the device count, evidence of a fixed per-device batch, and a
device count declared in the run context or set through XLA_FLAGS."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

import libcst as cst

from optax_lint.facts.parallel.names import (
    DEFAULT_DEVICE_COUNT_NAMES,
    DEFAULT_PER_DEVICE_BATCH_NAMES,
    DEVICE_COUNT_CALLS,
)
from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import value_of
from optax_lint.syntax.walker import Scope, iter_children


def mentions_device_count(facts, expr, scope: Scope, names: Iterable[str] = DEFAULT_DEVICE_COUNT_NAMES, depth: int = 0) -> bool:
    """Whether an expression involves the device count: jax.device_count(),
    len(jax.devices()), or a name that holds or is named like it."""
    if expr is None or depth > 6:
        return False
    names = tuple(names)
    for node in walk_expr(expr):
        if isinstance(node, cst.Call) and facts.canonical(node.func, scope) in DEVICE_COUNT_CALLS:
            return True
        if isinstance(node, cst.Name):
            if node.value.lower() in names:
                return True
            _, bindings = lookup(node.value, scope)
            if len(bindings) == 1 and bindings[0].value is not None and bindings[0].kind in ("assign", "annassign", "unpack"):
                if mentions_device_count(facts, bindings[0].value, bindings[0].scope, names, depth + 1):
                    return True
        elif isinstance(node, cst.Attribute) and node.attr.value.lower() in names:
            return True
    return False


@dataclass
class BatchEvidence:
    per_device: Optional[cst.BaseExpression] = field(repr=False)  # the per-device batch expression
    scope: Optional[Scope] = field(repr=False)
    node: Optional[cst.CSTNode] = field(repr=False)  # where the evidence is written
    value: Any  # its static value, or Unknown


_BATCH = re.compile(r"batch", re.IGNORECASE)


def _name_of(expr) -> Optional[str]:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


def _divides_by_devices(facts, expr, scope, names) -> bool:
    for node in walk_expr(expr):
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Divide, cst.FloorDivide)):
            if mentions_device_count(facts, node.right, scope, names):
                return True
    return False


def walk_expr(expr) -> Iterator[cst.CSTNode]:
    """The nodes of an expression, lambda bodies left out."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, cst.Lambda):
            continue
        stack.extend(iter_children(node))


def per_device_batch(facts, batch_patterns: Iterable[str] = DEFAULT_PER_DEVICE_BATCH_NAMES, device_names: Iterable[str] = DEFAULT_DEVICE_COUNT_NAMES) -> Optional[BatchEvidence]:
    """Evidence that the script keeps a fixed per-device batch (so the global batch
    grows with the device count), or None. Any sign of a fixed global batch split
    across devices (`global // jax.device_count()`, `reshape((n_devices, -1, ...))`)
    makes the answer None."""
    declared = context_value(facts, "batch_per_device")
    if declared is not None and declared.source != "inferred":
        # Only a declared value: an inferred per-device batch may itself be a fixed
        # global batch divided by the device count, which this function rules out below.
        return BatchEvidence(None, None, None, declared.value)
    device_names = tuple(n.lower() for n in device_names)
    pattern = re.compile("|".join(f"(?:{p})" for p in batch_patterns), re.IGNORECASE) if batch_patterns else None
    evidence: list[BatchEvidence] = []
    for scope in facts.raw.scopes:
        for name, bindings in scope.bindings.items():
            for binding in bindings:
                if binding.value is None or binding.kind not in ("assign", "annassign"):
                    continue
                if _BATCH.search(name) and _divides_by_devices(facts, binding.value, binding.scope, device_names):
                    return None  # a global batch split across devices
                if pattern is not None and pattern.search(name) and not binding.index:
                    if mentions_device_count(facts, binding.value, binding.scope, device_names):
                        return None
                    evidence.append(BatchEvidence(binding.value, binding.scope, binding.node, value_of(binding.value, binding.scope)))
    for record in facts.raw.calls:
        for arg in record.node.args:
            for node in walk_expr(arg.value):
                if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
                    for side, other in ((node.left, node.right), (node.right, node.left)):
                        name = _name_of(side)
                        if name and _BATCH.search(name) and mentions_device_count(facts, other, record.scope, device_names) and not mentions_device_count(facts, side, record.scope, device_names):
                            evidence.append(BatchEvidence(side, record.scope, node, value_of(side, record.scope)))
                if isinstance(node, cst.Tuple) and len(node.elements) >= 2:
                    first, second = node.elements[0].value, node.elements[1].value
                    if not mentions_device_count(facts, first, record.scope, device_names):
                        continue
                    if _divides_by_devices(facts, second, record.scope, device_names):
                        return None
                    second_value = value_of(second, record.scope)
                    if second_value == -1:
                        return None
                    name = _name_of(second)
                    if name and _BATCH.search(name):
                        evidence.append(BatchEvidence(second, record.scope, node, second_value))
    for scope in facts.raw.scopes:
        for name, bindings in scope.bindings.items():
            if not _BATCH.search(name):
                continue
            for binding in bindings:
                if binding.value is None or binding.kind not in ("assign", "annassign"):
                    continue
                value = binding.value
                if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
                    for side, other in ((value.left, value.right), (value.right, value.left)):
                        side_name = _name_of(side)
                        if side_name and _BATCH.search(side_name) and mentions_device_count(facts, other, binding.scope, device_names):
                            evidence.append(BatchEvidence(side, binding.scope, value, value_of(side, binding.scope)))
    if not evidence:
        return None
    known = [e for e in evidence if isinstance(e.value, int) and not isinstance(e.value, bool)]
    return known[0] if known else evidence[0]


def context_value(facts, name: str):
    """A run-context value (declared or inferred), or None; never fails the rule."""
    try:
        context = facts.run_context
        return context.get(name) if context is not None else None
    except Exception:  # the run context is another family's work: degrade to unknown
        return None


_XLA_DEVICES = re.compile(r"--xla_force_host_platform_device_count=(\d+)")


def known_device_count(facts) -> Optional[tuple[int, str]]:
    """(count, where it comes from) when the device count is declared or set in the
    file through XLA_FLAGS; None otherwise."""
    declared = context_value(facts, "devices")
    if declared is not None and isinstance(declared.value, int) and not isinstance(declared.value, bool):
        if declared.source == "inferred":
            return declared.value, f"from {declared.detail}" if declared.detail else "inferred"
        return declared.value, f"declared in {declared.source}"
    text = facts.text
    if text is None:
        return None
    match = _XLA_DEVICES.search(text)
    if match is not None:
        return int(match.group(1)), "XLA_FLAGS in this file"
    return None
