"""Small questions about libcst nodes: their source text, whether one is `None`, whether two
statements sit in different arms of one `if`."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.syntax.walker import walk

# A node's code depends only on the module's default formatting (newline, indent),
# so one empty module serves every node.
_EMPTY = cst.Module([])


def node_code(node: cst.CSTNode) -> str:
    """The node's source exactly as written (line breaks and comments kept)."""
    return _EMPTY.code_for_node(node)


def node_text(node: cst.CSTNode) -> str:
    """The node's source on one line, runs of whitespace collapsed: for messages and keys."""
    return " ".join(_EMPTY.code_for_node(node).split())


def is_none(expr: Optional[cst.BaseExpression]) -> bool:
    """The literal `None`."""
    return isinstance(expr, cst.Name) and expr.value == "None"


def last_name(func: cst.BaseExpression) -> str:
    """The last component of a callee: `fit` for `trainer.fit`, `update` for `update`."""
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return ""


def over_range(expr: cst.BaseExpression) -> bool:
    """A count of steps, no data drawn: `range(n)`, `trange(n)`, or either wrapped in
    `tqdm(...)`, `enumerate(...)`, `list(...)`."""
    while isinstance(expr, cst.Call) and last_name(expr.func) in ("tqdm", "trange", "enumerate", "list"):
        if last_name(expr.func) == "trange":
            return True
        if not expr.args:
            return False  # `ds.enumerate()`: a dataset's own method, no range inside
        expr = expr.args[0].value
        if not isinstance(expr, cst.Call):
            return False
    return isinstance(expr, cst.Call) and last_name(expr.func) in ("range", "trange")


def spells_test_case(base: cst.BaseExpression) -> bool:
    """A class base whose source ends with `TestCase` (`absltest.TestCase`,
    `parameterized.TestCase`). Only an unparenthesised name or attribute can end
    so, which its last name tells without printing the node (asked for every class
    around every call)."""
    return isinstance(base, (cst.Name, cst.Attribute)) and not base.rpar and last_name(base).endswith("TestCase")


def other_branch(root: cst.CSTNode, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """Statements `a` and `b` sit in different arms of one if/elif/else under `root`
    (a function body), so no run executes both."""
    for node in walk(root):
        if not isinstance(node, cst.If):
            continue
        arms: list[cst.CSTNode] = [node.body]
        orelse = node.orelse
        while orelse is not None:
            if isinstance(orelse, cst.If):
                arms.append(orelse.body)
                orelse = orelse.orelse
            else:
                arms.append(orelse.body)
                orelse = None
        where_a = next((i for i, arm in enumerate(arms) if holds(arm, a)), None)
        if where_a is None:
            continue
        where_b = next((i for i, arm in enumerate(arms) if holds(arm, b)), None)
        if where_b is not None and where_b != where_a:
            return True
    return False


def holds(tree: cst.CSTNode, node: cst.CSTNode) -> bool:
    """`node` is `tree` or lies inside it."""
    return any(n is node for n in walk(tree))


def assigned_names(statement) -> set[str]:
    """The names a simple statement line binds: `x = ...`, `state, loss = step(...)`,
    `x: T = ...`, `first, *rest = ...`."""
    out: set[str] = set()
    if not isinstance(statement, cst.SimpleStatementLine):
        return out
    for small in statement.body:
        if isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            targets = [small.target]
        else:
            continue
        while targets:
            target = targets.pop()
            if isinstance(target, cst.Name):
                out.add(target.value)
            elif isinstance(target, (cst.Tuple, cst.List)):
                targets.extend(e.value for e in target.elements)
            elif isinstance(target, cst.StarredElement):
                targets.append(target.value)
    return out


def base_name(expr: cst.BaseExpression) -> Optional[str]:
    """The name an attribute or subscript chain starts from (`state` of
    `state.params["w"]`), or None when it starts from something else."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None
