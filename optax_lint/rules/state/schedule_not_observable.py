"""OPX611 schedule-not-observable: A schedule written inline in the optimizer call drives
the learning rate, but nothing can read its current value back for logging."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from optax_lint.facts.pipelines.build import TxNode
from optax_lint.facts.state.access import StateFacts
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.state.wording import describe_node


def _schedule_args(node: TxNode, inside_inject: bool = False) -> Iterator[tuple[TxNode, cst.BaseExpression]]:
    if node.short in ("inject_hyperparams", "inject_stateful_hyperparams"):
        return
    if node.kind in ("alias", "transform") and node.args is not None:
        param = "step_size_fn" if node.short == "scale_by_schedule" else "learning_rate"
        expr = node.args.expr(param)
        if expr is not None:
            yield node, expr
    for child in node.children:
        yield from _schedule_args(child)


class ScheduleNotObservable(Rule):
    code = "OPX611"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        if not facts.pipelines or not facts.schedules:
            return
        sf = facts.state
        linked = self._linked(sf)
        read = {id(a.held.pipeline) for a in sf.hyperparams_accesses() if a.held is not None}
        read |= {id(t.held.pipeline) for t in sf.tree_accesses() if t.held is not None}
        for pipeline in facts.pipelines:
            if id(pipeline) not in linked or id(pipeline) in read:
                continue
            for node, expr in _schedule_args(pipeline.root):
                schedule = facts.schedule_of(expr, node.scope)
                if schedule is None:
                    continue
                if not isinstance(expr, cst.Call):
                    continue  # a named schedule can be evaluated and logged as name(step)
                ctx.report(
                    expr,
                    optimizer=describe_node(node),
                    schedule=describe(schedule.call),
                    call=f"{expr.value}(step)" if isinstance(expr, cst.Name) else "the schedule's value at each step",
                    related=[(schedule.call, "schedule built here")],
                )

    @staticmethod
    def _linked(sf: StateFacts) -> set[int]:
        facts = sf.facts
        out: set[int] = set()
        for site in facts.update_sites:
            if site.receiver is not None:
                held = sf.held(site.receiver, site.record.scope)
                if held is not None:
                    out.add(id(held.pipeline))
        for consumer in facts.consumers:
            if consumer.pipeline is not None:
                out.add(id(consumer.pipeline))
            elif consumer.tx_arg is not None:
                pipeline = sf.tx_of(consumer.tx_arg.value, consumer.record.scope)
                if pipeline is not None:
                    out.add(id(pipeline))
        for record in facts.raw.calls:
            func = record.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "init":
                pipeline = sf.tx_of(func.value, record.scope)
                if pipeline is not None:
                    out.add(id(pipeline))
        return out
