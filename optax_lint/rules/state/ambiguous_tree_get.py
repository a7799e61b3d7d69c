"""OPX604 ambiguous-tree-get: Unfiltered `tree_get`/`tree_set` on a name that several
state nodes hold, such as a scheduled injected learning rate."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline
from optax_lint.facts.state.access import Layout, TreeAccess
from optax_lint.facts.state.origins import TREE_GET, TREE_SET
from optax_lint.facts.state.paths import key_literal, path_expr
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.state.optax_states import STATE_FIELD_HOLDERS, field_holder
from optax_lint.rules.state.wording import call_text, describe_node
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.nodes import node_text


def _holders(sub: Layout, key: str, pipeline: Pipeline) -> tuple[int, list[str], list[tuple[Optional[tuple], Layout]]]:
    """How many state nodes surely hold `key`, descriptions, and the injects holding it."""
    count = 0
    described = []
    owners = []
    for path, inj in sub.injects():
        kind = inj.hyper.get(key)
        if kind == "const":
            count += 1
            owners.append((path, inj))
            described.append(f"the injected {key} of {describe_node(inj.node)}")
        elif kind == "sched":
            count += 2
            owners.append((path, inj))
            described.append(f"the injected {key} of {describe_node(inj.node)} and the state of the schedule driving it")
    if field_holder(pipeline, key) and STATE_FIELD_HOLDERS.get(key):
        count += 1
        described.append(f"a field named {key} in a transformation's own state")
    return count, described, owners


class AmbiguousTreeGet(Rule):
    code = "OPX604"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        if TREE_GET not in facts.calls_by_name and TREE_SET not in facts.calls_by_name:
            return
        sf = facts.state
        for tree in sf.tree_accesses():
            if tree.held is None or not tree.complete or tree.filtered:
                continue
            pipeline = tree.held.pipeline
            sub, _ = sf.layout(pipeline).follow(tree.held.path)
            if sub is None:
                continue
            if tree.kind == "get":
                self._get(ctx, tree, sub, pipeline)
            else:
                self._set(ctx, tree, sub, pipeline)

    def _get(self, ctx: Context, tree: TreeAccess, sub: Layout, pipeline: Pipeline) -> None:
        if tree.key is None:
            return
        count, described, owners = _holders(sub, tree.key, pipeline)
        if count < 2:
            return
        fix, title = None, None
        only_injected = len(owners) == 1 and not (field_holder(pipeline, tree.key) and STATE_FIELD_HOLDERS.get(tree.key))
        if only_injected and tree.state_arg is not None:
            path, _ = owners[0]
            if path is not None:
                direct = cst.Subscript(
                    value=cst.Attribute(value=path_expr(tree.state_arg.value, path), attr=cst.Name("hyperparams")),
                    slice=[cst.SubscriptElement(slice=cst.Index(value=cst.SimpleString(key_literal(tree.key))))],
                )
                fix = fixes.replace(tree.call, direct)
                title = f"Read {node_text(direct)}"
            else:
                lam = cst.parse_expression('lambda path, value: hasattr(value, "dtype")')
                fix = fixes.replace(tree.call, fixes.add_keyword(tree.call, "filtering", lam))
                title = "Select the array leaf with filtering=lambda path, value: hasattr(value, \"dtype\")"
        ctx.report(
            tree.call,
            call=call_text(tree.call),
            problem=f"finds {count} values named {tree.key!r} ({'; '.join(described)}): optax raises KeyError (\"Found multiple values\")",
            fix=fix,
            fix_title=title,
            related=[(pipeline.call, "optimizer built here")],
        )

    def _set(self, ctx: Context, tree: TreeAccess, sub: Layout, pipeline: Pipeline) -> None:
        for name in tree.names:
            for path, inj in sub.injects():
                if inj.hyper.get(name) == "sched":
                    ctx.report(
                        tree.call,
                        call=call_text(tree.call),
                        problem=(
                            f"also overwrites the state of the schedule driving {name} in {describe_node(inj.node)}: "
                            "the next update fails with AttributeError (and a scheduled value is recomputed anyway)"
                        ),
                        related=[(pipeline.call, "optimizer built here")],
                    )
                    return
