"""OPX603 hyperparams-not-injected: Hyperparameters read from the state of an optimizer
that is not wrapped in `inject_hyperparams`."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline
from optax_lint.facts.state.access import HyperparamsAccess, StateFacts, TreeAccess
from optax_lint.facts.state.origins import TREE_GET
from optax_lint.facts.state.paths import key_literal, path_expr
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.state.call_args import keyword_arg, positional_args
from optax_lint.rules.state.hyperparams_reads import judge
from optax_lint.rules.state.optax_states import INJECT_NEEDS_STATIC, field_holder
from optax_lint.rules.state.wording import call_text, describe_node
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.nodes import node_text


class HyperparamsNotInjected(Rule):
    code = "OPX603"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        has_attr = any(r.node.attr.value == "hyperparams" for r in facts.raw.attributes)
        if not has_attr and TREE_GET not in facts.calls_by_name:
            return
        sf = facts.state
        for access in sf.hyperparams_accesses() if has_attr else ():
            judged = judge(sf, access)
            if judged is None or judged[0] != "none":
                continue
            pipeline = access.held.pipeline
            ctx.report(
                access.node,
                access=describe(access.node),
                outcome="raises AttributeError",
                pipeline=describe_node(pipeline.root),
                fix=_inject_fix(sf, pipeline, access.key, access=access),
                changes_state=True,
                related=[(pipeline.call, "optimizer built here")],
            )
        for tree in sf.tree_accesses():
            if tree.kind != "get" or tree.held is None or tree.key is None or not tree.complete:
                continue
            pipeline = tree.held.pipeline
            layout = sf.layout(pipeline)
            if tree.held.path or not layout.complete or layout.injects():
                continue
            if not _is_hyperparameter(pipeline, tree.key) or field_holder(pipeline, tree.key):
                continue
            default = tree.call.args[2] if len(positional_args(tree.call)) > 2 else keyword_arg(tree.call, "default")
            outcome = "returns None" if default is None else f"returns its default ({node_text(default.value)})"
            ctx.report(
                tree.call,
                access=call_text(tree.call),
                outcome=outcome,
                pipeline=describe_node(pipeline.root),
                fix=_inject_fix(sf, pipeline, tree.key, tree=tree),
                changes_state=True,
                related=[(pipeline.call, "optimizer built here")],
            )


def _is_hyperparameter(pipeline: Pipeline, name: str) -> bool:
    return any(node.entry is not None and name in node.entry.params for node in pipeline.nodes())


def _inject_fix(sf: StateFacts, pipeline: Pipeline, name: Optional[str], *, access: Optional[HyperparamsAccess] = None, tree: Optional[TreeAccess] = None):
    """Wrap the transformation that takes `name` in inject_hyperparams and point the
    access at its new state (unsafe: it changes the state's layout)."""
    if name is None:
        return None
    facts = sf.facts
    owners = [n for n in pipeline.nodes() if n.kind in ("alias", "transform") and n.entry is not None and name in n.entry.params]
    if len(owners) != 1:
        return None
    node = owners[0]
    call = node.call
    if call is None or node.args is None or node.args.has_star or node.key in INJECT_NEEDS_STATIC:
        return None
    root = pipeline.root
    if node is root:
        element_path: tuple = ()
    elif node.parent is root and root.short == "chain" and node.slot is not None:
        layout = sf.layout(pipeline)
        index = root.children.index(node)
        if layout.exact_upto <= index:
            return None
        element_path = (("index", index),)
    else:
        return None
    for arg_name, arg in node.args.by_name.items():
        if arg_name.endswith("dtype"):
            return None
    func = call.func
    if not isinstance(func, cst.Attribute) or facts.canonical(func.value, node.scope) != "optax":
        return None
    inject = cst.Call(func=cst.Attribute(value=func.value, attr=cst.Name("inject_hyperparams")), args=[cst.Arg(value=func)])
    wrapped = call.with_changes(func=inject)
    edits: list[tuple[cst.CSTNode, cst.CSTNode]] = [(call, wrapped)]
    if access is not None and access.held.path != element_path:
        base_path = access.base_held.path if access.base_held is not None else None
        if base_path is None or element_path[: len(base_path)] != base_path:
            return None
        edits.append((access.node, access.node.with_changes(value=path_expr(access.base, element_path[len(base_path):]))))
    for read, _scope, held in sf.state_reads():
        if held.pipeline is not pipeline or len(held.path) != len(element_path) + 1 or held.path[: len(element_path)] != element_path:
            continue
        if held.path[-1] == ("attr", "inner_state"):
            continue
        inner = read.value
        moved = cst.Attribute(value=inner, attr=cst.Name("inner_state"))
        edits.append((read, read.with_changes(value=moved)))
    if tree is not None:
        kind = sf.classify(node.args.expr(name), node.scope) if node.args.given(name) else "const"
        if kind != "const":
            if tree.held.path != () or tree.state_arg is None:
                return None
            direct = cst.Subscript(
                value=cst.Attribute(value=path_expr(tree.state_arg.value, element_path), attr=cst.Name("hyperparams")),
                slice=[cst.SubscriptElement(slice=cst.Index(value=cst.SimpleString(key_literal(name))))],
            )
            edits.append((tree.call, direct))

    return fixes.rewrite_nodes([(old, lambda _updated, new=new: new) for old, new in edits])
