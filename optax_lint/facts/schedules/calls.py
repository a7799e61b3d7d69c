"""Learning-rate schedules: which optax schedule function, its parameters (by name),
where it is defined, and which optimizer argument consumes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import libcst as cst

from optax_lint.core.optax_api import ApiEntry, OptaxApi
from optax_lint.syntax.arguments import BoundArgs, bind
from optax_lint.syntax.lists import ListModel
from optax_lint.syntax.names import NameResolver
from optax_lint.syntax.values import single_binding
from optax_lint.syntax.walker import RawFacts, Scope

# The parameter that carries a schedule's scale, in order of preference, for its sign.
_MAGNITUDE_PARAMS = ("peak_value", "init_value", "value", "max_value", "end_value")


@dataclass(eq=False)
class Schedule:
    key: str  # "warmup_cosine_decay_schedule", "join_schedules", ...
    call: cst.Call
    scope: Scope
    args: BoundArgs
    entry: ApiEntry
    pieces: list["Schedule"] = field(default_factory=list)  # join_schedules components
    name: Optional[str] = None  # variable it is assigned to

    def value(self, param: str) -> Any:
        return self.args.value(param)

    def sign(self) -> Optional[int]:
        """-1 for a negative schedule (a descent built into the schedule), +1, or None."""
        if self.key == "join_schedules":
            signs = {p.sign() for p in self.pieces}
            signs.discard(0)
            return signs.pop() if len(signs) == 1 and None not in signs else None
        seen_zero = False
        for param in _MAGNITUDE_PARAMS:
            if param not in self.entry.params:
                continue
            value = self.value(param)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if value < 0:
                return -1
            if value > 0:
                return 1
            seen_zero = True
        return 0 if seen_zero else None


class ScheduleExtractor:
    def __init__(self, raw: RawFacts, api: OptaxApi, names: NameResolver, lists: Optional[ListModel] = None) -> None:
        self.raw = raw
        self.lists = lists  # the list model the pipeline builder uses too
        self.api = api
        self.names = names
        self._by_call: dict[cst.Call, Schedule] = {}

    def entry(self, call: cst.Call, scope: Scope) -> Optional[ApiEntry]:
        entry = self.api.entry(self.names.canonical(call.func, scope))
        return entry if entry is not None and entry.kind == "schedule" else None

    def from_call(self, call: cst.Call, scope: Scope, name: Optional[str] = None) -> Optional[Schedule]:
        cached = self._by_call.get(call)
        if cached is not None:
            return cached
        entry = self.entry(call, scope)
        if entry is None:
            return None
        schedule = Schedule(entry.key, call, scope, bind(call, scope, entry), entry, name=name)
        self._by_call[call] = schedule
        if entry.key == "join_schedules":
            listed = self.lists.elements(schedule.args.expr("schedules"), scope, call) if self.lists is not None else None
            for item in (listed.items if listed is not None and listed.exact() is not None else ()):
                piece = self.resolve(item.expr, item.scope)
                if piece is not None:
                    schedule.pieces.append(piece)
        return schedule

    def resolve(self, expr: Optional[cst.BaseExpression], scope: Scope, depth: int = 0) -> Optional[Schedule]:
        """The schedule an expression evaluates to (through names assigned once)."""
        if expr is None or depth > 8:
            return None
        if isinstance(expr, cst.Call):
            return self.from_call(expr, scope)
        if isinstance(expr, cst.Name):
            binding, _ = single_binding(expr.value, scope)
            if binding is None or binding.index:
                return None
            schedule = self.resolve(binding.value, binding.scope, depth + 1)
            if schedule is not None and schedule.name is None:
                schedule.name = expr.value
            return schedule
        return None

    def all(self) -> list[Schedule]:
        out = []
        for record in self.raw.calls:
            schedule = self.from_call(record.node, record.scope)
            if schedule is not None:
                if schedule.name is None and isinstance(record.assigned_to, cst.Name):
                    schedule.name = record.assigned_to.value
                out.append(schedule)
        return out

