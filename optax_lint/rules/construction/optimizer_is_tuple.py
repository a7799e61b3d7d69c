"""OPX107 optimizer-is-tuple: A trailing comma turns the optimizer into a one-element
tuple."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.rules.base import Context, Rule, describe
from optax_lint.syntax import edits as fixes


class OptimizerIsTuple(Rule):
    code = "OPX107"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        for record in facts.raw.calls:
            parent = record.parent_call
            if parent is not None and parent.func is record.node:
                continue
            if not facts.builder.is_transform_call(record.node, record.scope):
                continue
            holder = self._tuple_holder(record)
            if holder is None:
                continue
            statement, tuple_node = holder
            ctx.report(
                tuple_node,
                optimizer=describe(record.node),
                fix=fixes.replace(tuple_node, tuple_node.elements[0].value),
            )

    @staticmethod
    def _tuple_holder(record) -> Optional[tuple[cst.CSTNode, cst.Tuple]]:
        statement = record.statement
        if not isinstance(statement, cst.SimpleStatementLine):
            return None
        for small in statement.body:
            value = small.value if isinstance(small, (cst.Assign, cst.Return)) else None
            if (
                isinstance(value, cst.Tuple)
                and not value.lpar
                and len(value.elements) == 1
                and value.elements[0].value is record.node
            ):
                return statement, value
        return None
