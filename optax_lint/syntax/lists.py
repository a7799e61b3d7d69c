"""One list model for the whole extraction layer.

Real code builds the lists it hands to `optax.chain(*transforms)` and
`optax.join_schedules(schedules, boundaries)` piece by piece: a literal, then
`.append` / `.insert(0, ...)` / `.extend([...])`, `+= [...]` or `x = x + [...]`,
often under `if config.x:`. Both the pipeline and the schedule extractors read such
lists through `ListModel.elements`, so they never disagree about what a list holds.

Only mutations made in the scope that owns the list, before the call that consumes it
(in source order), count. Anything else that could change the list (an append in a
loop, an extend with an unknown value, an insert at an unknown index) makes the list
`complete=False`: a rule that needs its exact length stays silent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import value_of
from optax_lint.syntax.walker import CallRecord, RawFacts, Scope

_MAX_DEPTH = 8
_MUTATORS = ("append", "insert", "extend", "update", "setdefault", "pop", "remove", "clear")


@dataclass(eq=False)
class ListItem:
    expr: cst.BaseExpression
    scope: Scope
    conditional: bool = False  # added under a branch or in a loop (the walker counts loops as branches)
    slot: Optional[cst.CSTNode] = None  # the literal's Element; None when added by a mutation
    # The `if` arms the mutation that added it sits in, innermost first: (id of the If,
    # whether in its body). Items added in the two arms of one `if` are alternatives.
    arms: tuple = ()


@dataclass(eq=False)
class ListValue:
    items: list[ListItem] = field(default_factory=list)
    complete: bool = True  # False: some part of the list is unknown
    reason: str = ""

    def exact(self) -> Optional[list[cst.BaseExpression]]:
        """The element expressions when the list's length and order are certain."""
        if not self.complete or any(item.conditional for item in self.items):
            return None
        return [item.expr for item in self.items]


class ListModel:
    def __init__(self, raw: RawFacts) -> None:
        self.raw = raw
        self._mutations: Optional[dict[tuple[int, str], list[CallRecord]]] = None
        # Source order of calls (the walker records them in order): mutations after the
        # consuming call are not part of what it received.
        self.order = {id(r.node): i for i, r in enumerate(raw.calls)}

    def elements(self, expr: Optional[cst.BaseExpression], scope: Scope, consumer: Optional[cst.Call] = None, depth: int = 0) -> Optional[ListValue]:
        """The list `expr` evaluates to, or None when it is not a list this file builds."""
        if depth > _MAX_DEPTH:
            return ListValue([], False, "list built too deep to follow")
        if isinstance(expr, (cst.List, cst.Tuple)):
            return self._literal(expr, scope, False, depth)
        if not isinstance(expr, cst.Name):
            return None
        owner, bindings = lookup(expr.value, scope)
        if owner is None or not bindings:
            return None
        base = bindings[0]
        if base.kind not in ("assign", "annassign") or base.index or not isinstance(base.value, (cst.List, cst.Tuple)):
            return None
        out = self._literal(base.value, base.scope, False, depth)
        if (id(owner), expr.value) in self.raw.item_stores:
            out.complete, out.reason = False, f"'{expr.value}[...]' is assigned"
        limit = self.order.get(id(consumer)) if consumer is not None else None
        # Everything that grows the list, in source order: (position, kind, node).
        additions: list[tuple[float, str, object]] = []
        for binding in bindings[1:]:  # `x += [...]` and `x = x + [...]`
            added = self._concatenated(binding, expr.value)
            if added is None:
                return ListValue(out.items, False, f"'{expr.value}' is reassigned to a value this file does not show")
            position = binding.order - 0.5  # bound after the calls in its own value
            if limit is not None and position > limit and binding.scope is owner:
                continue
            additions.append((position, "concat", (binding, added)))
        for record in self.mutations(owner, expr.value):
            position = self.order.get(id(record.node), -1)
            if limit is not None and position > limit and record.scope is owner:
                continue  # changed after the consumer received it
            additions.append((position, "call", record))
        for _, kind, what in sorted(additions, key=lambda a: a[0]):
            if kind == "concat":
                binding, added = what
                self._extend(out, added, binding.scope, binding.conditional and not base.conditional, expr.value, depth)
                continue
            record = what
            method = record.node.func.attr.value
            branch = record.conditional and not base.conditional
            if method not in ("append", "insert", "extend"):
                out.complete, out.reason = False, f"'{expr.value}.{method}(...)' changes it"
                continue
            if not record.node.args:
                continue
            value = record.node.args[-1].value
            arms = tuple((id(node), body) for node, body in self.raw.enclosing_ifs(record.statement)) if branch else ()
            if method == "append":
                out.items.append(ListItem(value, owner, branch, arms=arms))
            elif method == "insert":
                if value_of(record.node.args[0].value, owner) == 0:
                    out.items.insert(0, ListItem(value, owner, branch, arms=arms))
                else:
                    out.complete, out.reason = False, "insert at an unknown index"
            else:
                self._extend(out, value, owner, branch, expr.value, depth, arms)
        return out

    def _extend(self, out: ListValue, value: cst.BaseExpression, scope: Scope, branch: bool, name: str, depth: int,
                arms: tuple = ()) -> None:
        extra = self.elements(value, scope, depth=depth + 1)
        if extra is None:
            out.complete, out.reason = False, f"'{name}' grows by an unknown value"
            return
        out.items.extend(ListItem(i.expr, i.scope, i.conditional or branch, arms=i.arms + arms) for i in extra.items)
        out.complete = out.complete and extra.complete

    def _literal(self, node: cst.BaseExpression, scope: Scope, conditional: bool, depth: int) -> ListValue:
        out = ListValue()
        for element in node.elements:
            if isinstance(element, cst.StarredElement):
                inner = self.elements(element.value, scope, depth=depth + 1)
                if inner is None:
                    out.complete, out.reason = False, "starred element"
                    continue
                out.items.extend(inner.items)
                out.complete = out.complete and inner.complete
                continue
            out.items.append(ListItem(element.value, scope, conditional, element))
        return out

    @staticmethod
    def _concatenated(binding, name: str) -> Optional[cst.BaseExpression]:
        """What `x += v` or `x = x + v` adds to the list `x`."""
        if binding.kind == "augassign" and isinstance(binding.node, cst.SimpleStatementLine):
            for small in binding.node.body:
                if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign):
                    return small.value
            return None
        value = binding.value
        if (
            binding.kind == "assign"
            and not binding.index
            and isinstance(value, cst.BinaryOperation)
            and isinstance(value.operator, cst.Add)
            and isinstance(value.left, cst.Name)
            and value.left.value == name
        ):
            return value.right
        return None

    def mutations(self, scope: Scope, name: str) -> list[CallRecord]:
        if self._mutations is None:
            self._mutations = {}
            for record in self.raw.calls:
                func = record.node.func
                if isinstance(func, cst.Attribute) and func.attr.value in _MUTATORS and isinstance(func.value, cst.Name):
                    self._mutations.setdefault((id(record.scope), func.value.value), []).append(record)
        return self._mutations.get((id(scope), name), [])


def alternatives(items: list[ListItem]) -> list[tuple[int, bool]]:
    """(index of the first, exhaustive) for each pair of adjacent items that are the only
    items added in the two arms of one `if` (`if muon: xs.append(a) else:
    xs.append(b)`): one or the other is in the list, never both. `exhaustive` is False
    when the pair sits under further branches (then neither may be there)."""
    count: dict[tuple, int] = {}
    for item in items:
        for arm in item.arms:
            count[arm] = count.get(arm, 0) + 1
    out = []
    for i in range(len(items) - 1):
        a, b = items[i], items[i + 1]
        shared = {node for node, _ in a.arms} & {node for node, _ in b.arms}
        for node in shared:
            if dict(a.arms)[node] != dict(b.arms)[node] and count.get((node, True)) == 1 and count.get((node, False)) == 1:
                rest_a = tuple(arm for arm in a.arms if arm[0] != node)
                rest_b = tuple(arm for arm in b.arms if arm[0] != node)
                out.append((i, not rest_a and not rest_b))
                break
    return out
