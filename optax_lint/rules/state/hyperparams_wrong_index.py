"""OPX602 hyperparams-wrong-index: `.hyperparams` read from the wrong element of a
chained state (or from the chain's tuple itself)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.state.layouts import Layout
from optax_lint.facts.state.origins import Held
from optax_lint.facts.state.paths import path_expr, path_text
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.state.hyperparams_reads import judge
from optax_lint.rules.state.wording import describe_node
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.nodes import node_text


def _what(reached: Optional[Layout]) -> str:
    if reached is None:
        return "not a state"
    if reached.kind == "opaque" and reached.node is not None:
        return f"the state of {describe_node(reached.node)}"
    return reached.state_name or "a state"


def _base_text(access_base: Optional[cst.BaseExpression], held: Optional[Held]) -> tuple[str, tuple]:
    if access_base is not None and held is not None:
        return node_text(access_base), held.path
    return "opt_state", ()


class HyperparamsWrongIndex(Rule):
    code = "OPX602"

    def check(self, ctx: Context) -> None:
        if not any(r.node.attr.value == "hyperparams" for r in ctx.facts.raw.attributes):
            return
        sf = ctx.facts.state
        for access in sf.hyperparams_accesses():
            judged = judge(sf, access)
            if judged is None or judged[0] != "wrong":
                continue
            verdict = judged[1]
            injects = verdict.layout.injects()
            key = access.key
            candidates = [
                (path, inj) for path, inj in injects
                if key is None or not inj.hyper_complete or key in inj.hyper
            ] or injects
            base_text, base_path = _base_text(access.base, access.base_held)
            targets = []
            for path, inj in candidates:
                if path is not None and path[: len(base_path)] == base_path:
                    targets.append(path_text(base_text, path[len(base_path):]) + ".hyperparams")
                else:
                    targets.append("at an index that depends on a condition")
            target = targets[0] if len(targets) == 1 else "one of " + ", ".join(targets)
            problem = verdict.error or f"{node_text(access.node.value)} is {_what(verdict.reached)}, which has no hyperparams"
            fix = None
            if len(candidates) == 1 and candidates[0][0] is not None and access.base_held is not None:
                path = candidates[0][0]
                if path[: len(base_path)] == base_path:
                    new_value = path_expr(access.base, path[len(base_path):])
                    fix = fixes.replace(access.node, access.node.with_changes(value=new_value))
            ctx.report(
                access.node,
                access=describe(access.node),
                problem=problem,
                inject=describe_node(candidates[0][1].node),
                target=target,
                fix=fix,
                fix_title=f"Read {target}" if fix is not None else None,
                related=[(access.held.pipeline.call, "optimizer built here")],
            )
