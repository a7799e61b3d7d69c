"""How a schedule bound to a name is used in its scope: passed on, called only for
logging (`print(lr(step))`, `{"lr": lr(step)}`, `lr = float(sched(step))` then logged),
or never called. OPX308 reads it to tell an LR schedule nobody trains with."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.syntax.walker import walk

_LR_KEY = re.compile(r"(^|_)(lr|learning_rate)($|_)", re.I)


_LR_VAR = re.compile(r"(^|_)(lr|learning_rate)($|_)", re.I)


# Callees that only display a value, and conversions on the way to them.
_LOG_SINKS = frozenset({"print", "log", "info", "debug", "warning", "scalar", "scalars", "add_scalar", "add_scalars", "write_scalars", "log_metrics", "log_scalar", "set_postfix", "set_description", "write"})


_CONVERSIONS = frozenset({"float", "int", "str", "round", "asarray", "array", "item", "device_get", "format"})


def _callee_short(call: cst.Call) -> str:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return ""


def _logged(facts, call: cst.Call) -> bool:
    """The schedule's value only reaches a print/log call, or a variable named `lr`."""
    record = facts.record_of.get(call)
    for _ in range(6):
        if record is None:
            return False
        parent = record.parent_call
        if parent is None:
            target = record.assigned_to
            return isinstance(target, cst.Name) and bool(_LR_VAR.search(target.value)) and _only_logged_var(facts, record, target.value)
        short = _callee_short(parent)
        if short in _LOG_SINKS:
            return True
        if short not in _CONVERSIONS:
            return False
        record = facts.record_of.get(parent)
    return False


def _only_logged_var(facts, record, name: str) -> bool:
    """`lr = float(schedule(step))` whose every later use is inside a print/log call."""
    uses = 0
    for node in walk(record.scope.node):
        if isinstance(node, cst.Name) and node.value == name:
            uses += 1
    logged = 0
    for other in facts.raw.calls:
        if other.scope is record.scope and _callee_short(other.node) in _LOG_SINKS:
            logged += sum(1 for n in walk(other.node) if isinstance(n, cst.Name) and n.value == name)
    return uses - 1 == logged


def schedule_name_usage(facts, record, name: str) -> Optional[str]:
    """"never called", "only logged", or None: passed somewhere, rebound globally, or
    called for its value."""
    owner = record.scope.node
    total = targets = 0
    calls: list[cst.Call] = []
    logged_in_dict: set[int] = set()
    for node in walk(owner):
        if isinstance(node, cst.Name) and node.value == name:
            total += 1
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == name:
            calls.append(node)
        elif isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name) and node.target.value == name:
            targets += 1
        elif isinstance(node, (cst.Global, cst.Nonlocal)) and any(n.name.value == name for n in node.names):
            return None
        elif isinstance(node, cst.DictElement) and isinstance(node.key, cst.SimpleString) and _LR_KEY.search(node.key.raw_value):
            for inner in walk(node.value):
                if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == name:
                    logged_in_dict.add(id(inner))
    if total - len(calls) - targets > 0:
        return None  # passed somewhere: used
    if not calls:
        return "never called"
    if all(id(c) in logged_in_dict or _logged(facts, c) for c in calls):
        return "only logged"
    return None
