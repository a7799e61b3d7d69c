"""OPX308 unused-schedule: A learning-rate schedule is built, but the optimizer gets a
constant learning rate."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.facts.schedules.analysis import LrUse
from optax_lint.facts.schedules.calls import Schedule
from optax_lint.facts.schedules.usage import schedule_name_usage
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.schedules.wording import schedule_name
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.names import lookup

# Schedules for something other than the learning rate.
_NOT_LR = re.compile(r"eps|explor|beta|temp|tau|momentum|noise|clip|kl_|entropy|ent_coef|weight_decay|wd|decay_rate|ema|dropout|alpha|sigma", re.I)


class UnusedSchedule(Rule):
    code = "OPX308"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        if not facts.schedules:
            return
        sf = facts.schedule_analysis
        if any(a.node.attr.value == "hyperparams" for a in facts.raw.attributes):
            return
        uses = [u for u in sf.lr_uses if not u.self_scheduling]
        if not uses or any(u.injected or u.schedule is not None or not (u.constant or u.lr_field) for u in uses):
            return  # some optimizer gets a schedule or something we cannot read
        nested = set()
        for schedule in facts.schedules:
            nested.update(id(p) for p in schedule.pieces)
        for schedule in facts.schedules:
            if id(schedule) in nested or schedule.key == "constant_schedule":
                continue
            record = facts.record_of.get(schedule.call)
            if record is None or record.parent_call is not None:
                continue
            how = self._unused(facts, schedule, record)
            if how is None:
                continue
            use = uses[0]
            fix = self._fix(facts, schedule, record, uses)
            ctx.report(
                schedule.call,
                schedule=schedule_name(schedule),
                how=how,
                optimizer=describe(use.node.call, 80) if use.node.call is not None else use.node.short,
                lr=use.constant_text,
                fix=fix,
                fix_title=f"Pass {schedule.name} as the optimizer's learning_rate" if fix else None,
                changes_state=True,
                related=[(use.node.call, "the optimizer's constant learning rate")],
            )

    @staticmethod
    def _unused(facts, schedule: Schedule, record) -> Optional[str]:
        if record.is_expression_statement:
            return "built and discarded"
        target = record.assigned_to
        if not isinstance(target, cst.Name):
            return None
        if record.scope.kind == "module" and not any(l.scope.kind == "module" for l in facts.raw.loops):
            return None  # a module-level schedule may be imported by another module; a script that trains at top level is not
        name = target.value
        if _NOT_LR.search(name):
            return None  # an exploration / momentum / temperature schedule, not an LR one
        _, bindings = lookup(name, record.scope)
        if len(bindings) != 1:
            return None
        usage = schedule_name_usage(facts, record, name)
        if usage == "never called":
            return "assigned but never used"
        if usage == "only logged":
            return f"only evaluated for logging ({name}(step)), never passed to the optimizer"
        return None

    @staticmethod
    def _fix(facts, schedule: Schedule, record, uses: list[LrUse]):
        if len(uses) != 1 or not isinstance(record.assigned_to, cst.Name):
            return None
        use = uses[0]
        if use.expr is None or use.schedule is not None:
            return None
        name = record.assigned_to.value
        owner, bindings = lookup(name, use.node.scope)
        if owner is not record.scope or len(bindings) != 1:
            return None
        opt_record = facts.record_of.get(use.node.call)
        order = {id(r.node): i for i, r in enumerate(facts.raw.calls)}
        if opt_record is None or (opt_record.scope is record.scope and order[id(use.node.call)] < order[id(schedule.call)]):
            return None
        return fixes.replace(use.expr, cst.Name(name))
