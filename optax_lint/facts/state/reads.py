"""Where optimizer state is read: `X.hyperparams[...]` reads and
`optax.tree_utils.tree_get/tree_set` (and `optax.tree.get/set`) calls, each linked to
the origin of `X`; and every read of a part of a state (`x[i]`, `x.inner_state`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from optax_lint.facts.state.origins import TREE_GET, TREE_SET, Held, Origins
from optax_lint.facts.state.paths import split_state_expr, subscript_step
from optax_lint.facts.state.walks import walk_scope
from optax_lint.syntax.values import value_of
from optax_lint.syntax.walker import AttributeRecord, CallRecord, Scope, walk


@dataclass(eq=False)
class HyperparamsAccess:
    node: cst.Attribute  # `X.hyperparams`
    record: AttributeRecord
    key: Optional[str]  # literal key of X.hyperparams["..."], if any
    held: Optional[Held]  # origin of X (a state, with its path)
    base: Optional[cst.BaseExpression]  # X with the trailing state steps removed
    base_held: Optional[Held]
    steps: tuple  # the steps from `base` to X, as written
    guarded: bool  # behind hasattr/isinstance/try

    @property
    def scope(self) -> Scope:
        return self.record.scope


@dataclass(eq=False)
class TreeAccess:
    kind: str  # get | set
    record: CallRecord
    state_arg: Optional[cst.Arg]
    held: Optional[Held]
    key: Optional[str]  # get: the key
    names: tuple[str, ...]  # set: the keyword names
    filtered: bool  # a filtering function is given
    complete: bool  # every argument is visible (no * / **)

    @property
    def call(self) -> cst.Call:
        return self.record.node


def hyperparams_accesses(facts, origins: Origins) -> list[HyperparamsAccess]:
    out = []
    for record in facts.raw.attributes:
        node = record.node
        if node.attr.value != "hyperparams":
            continue
        base, steps = split_state_expr(node.value)
        held = origins.held(node.value, record.scope)
        base_held = origins.held(base, record.scope) if base is not node.value else held
        out.append(
            HyperparamsAccess(
                node, record, _subscript_key(record.statement, node),
                held if held is not None and held.kind == "state" else None,
                base, base_held if base_held is not None and base_held.kind == "state" else None,
                steps, _guarded(facts.raw, record.statement),
            )
        )
    return out


def tree_accesses(facts, origins: Origins) -> list[TreeAccess]:
    out = []
    by_name = facts.calls_by_name
    for kind, name in (("get", TREE_GET), ("set", TREE_SET)):
        for record in by_name.get(name, ()):
            call = record.node
            complete = not any(a.star for a in call.args)
            positional = [a for a in call.args if a.keyword is None and not a.star]
            keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
            state_arg = positional[0] if positional else keywords.get("tree")
            held = origins.held(state_arg.value, record.scope) if state_arg is not None else None
            if held is not None and held.kind != "state":
                held = None
            if kind == "get":
                key_arg = positional[1] if len(positional) > 1 else keywords.get("key")
                key = value_of(key_arg.value, record.scope) if key_arg is not None else None
                filtered = len(positional) > 3 or "filtering" in keywords
                out.append(TreeAccess("get", record, state_arg, held, key if isinstance(key, str) else None, (), filtered, complete))
            else:
                names = tuple(k for k in keywords if k != "tree")
                out.append(TreeAccess("set", record, state_arg, held, None, names, len(positional) > 1, complete))
    return out


def _subscript_key(statement: cst.CSTNode, attribute: cst.Attribute) -> Optional[str]:
    for node in walk(statement):
        if isinstance(node, cst.Subscript) and node.value is attribute:
            step = subscript_step(node)
            return step[1] if step is not None and step[0] == "key" else None
    return None


def _guarded(raw, statement: cst.CSTNode) -> bool:
    """Behind `hasattr(x, "hyperparams")`, an isinstance check, or inside a try."""
    current: Optional[cst.CSTNode] = statement
    first = True
    while current is not None and not isinstance(current, (cst.Module, cst.FunctionDef, cst.ClassDef)):
        if isinstance(current, cst.Try) and not first:
            return True
        probe = current.test if isinstance(current, (cst.If, cst.While)) else (current if first else None)
        if probe is not None and _has_guard_call(probe):
            return True
        first = False
        current = raw.parent_stmt.get(current)
    return False


def _has_guard_call(node: cst.CSTNode) -> bool:
    for sub in walk(node):
        if isinstance(sub, cst.Call) and isinstance(sub.func, cst.Name) and sub.func.value in ("hasattr", "isinstance", "getattr"):
            return True
    return False


def state_reads(facts, origins: Origins) -> list[tuple[cst.CSTNode, Scope, Held]]:
    """Every `x[i]` / `x.inner_state`-style read whose value is an optimizer state."""
    reads = []
    for scope in facts.raw.scopes:
        root = scope.node
        if scope.kind not in ("module", "function"):
            continue
        for node in walk_scope(root.body if isinstance(root, cst.FunctionDef) else root):
            if isinstance(node, cst.Subscript) or (
                isinstance(node, cst.Attribute) and node.attr.value in ("inner_opt_state", "inner_state", "inner_states")
            ):
                held = origins.held(node, scope)
                if held is not None and held.kind == "state":
                    reads.append((node, scope, held))
    return reads
