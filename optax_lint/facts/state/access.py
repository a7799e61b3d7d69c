"""Optimizer state: where an `opt_state` comes from, what it looks like, and where it is
read, gathered behind `ModuleFacts.state`. Three facts, all static and all allowed to be
"unknown", each in its own module of this package:

- **Origins** (origins.py, on the function table of functions.py): what an expression
  holds, traced back through the module (an optimizer, the state one built, a
  `TrainState` or nnx `Optimizer` holding one, the updates of an `update`).
- **Layouts** (layouts.py, with the state paths of paths.py): the shape of a pipeline's
  state.
- **Accesses** (reads.py): `X.hyperparams[...]` reads and `tree_get/tree_set` calls,
  each linked to the origin of `X`.

Everything is computed from the walker's records and short walks of the subtrees that
matter; whatever cannot be followed resolves to nothing, and the rules stay silent.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline
from optax_lint.facts.state import reads
from optax_lint.facts.state.functions import FunctionInfo, FunctionTable
from optax_lint.facts.state.layouts import Layout, Layouts
from optax_lint.facts.state.origins import Held, Origins
from optax_lint.facts.state.reads import HyperparamsAccess, TreeAccess
from optax_lint.syntax.names import lookup
from optax_lint.syntax.nodes import assigned_names
from optax_lint.syntax.walker import Scope


class StateFacts:
    """The optimizer-state facts of one module (`ModuleFacts.state`)."""

    def __init__(self, facts) -> None:
        self.facts = facts
        self.raw = facts.raw
        self.table = FunctionTable(facts)
        self.functions: dict[cst.FunctionDef, FunctionInfo] = self.table.functions
        self.origins = Origins(facts, self.table)
        self.layouts = Layouts(facts)
        self._reads: Optional[list] = None

    # -- functions and origins -----------------------------------------------
    def callee(self, call: cst.Call, scope: Scope) -> Optional[FunctionInfo]:
        """The module's own function a call runs (directly, or through `jax.jit(f)`)."""
        return self.table.callee(call, scope)

    def function_of(self, scope: Scope) -> Optional[FunctionInfo]:
        """The function a scope belongs to (the innermost enclosing def)."""
        return self.table.function_of(scope)

    def held(self, expr: Optional[cst.BaseExpression], scope: Scope) -> Optional[Held]:
        """What `expr` holds, or None when that cannot be known."""
        return self.origins.held(expr, scope)

    def tx_of(self, expr: Optional[cst.BaseExpression], scope: Scope) -> Optional[Pipeline]:
        return self.origins.tx_of(expr, scope)

    # -- layouts -------------------------------------------------------------
    def layout(self, pipeline: Pipeline) -> Layout:
        return self.layouts.layout(pipeline)

    def classify(self, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
        """How inject_hyperparams treats an argument: const, sched, None or unknown."""
        return self.layouts.classify(expr, scope)

    # -- accesses ------------------------------------------------------------
    def hyperparams_accesses(self) -> list[HyperparamsAccess]:
        return reads.hyperparams_accesses(self.facts, self.origins)

    def tree_accesses(self) -> list[TreeAccess]:
        return reads.tree_accesses(self.facts, self.origins)

    def state_reads(self) -> list[tuple[cst.CSTNode, Scope, Held]]:
        """Every `x[i]` / `x.inner_state`-style read whose value is an optimizer state
        (computed on demand: only fixes that move a state need it)."""
        if self._reads is None:
            self._reads = reads.state_reads(self.facts, self.origins)
        return self._reads

    # -- helpers for rules ---------------------------------------------------
    def enclosing_loop(self, statement: cst.CSTNode) -> tuple[Optional[cst.CSTNode], bool]:
        """The innermost for/while around a statement (in its function), and whether an
        if/try/match stands between them."""
        conditional = False
        current = self.raw.parent_stmt.get(statement)
        while current is not None and not isinstance(current, (cst.Module, cst.FunctionDef, cst.ClassDef)):
            if isinstance(current, (cst.For, cst.While)):
                return current, conditional
            if isinstance(current, (cst.If, cst.Try)) or type(current).__name__ in ("Match", "TryStar"):
                conditional = True
            current = self.raw.parent_stmt.get(current)
        return None, conditional

    def carried(self, name: str, loop: cst.CSTNode, scope: Scope) -> bool:
        """`name` is bound before the loop and rebound in it: state carried across its
        passes (training state, as opposed to a fresh start per pass)."""
        owner, bindings = lookup(name, scope)
        if owner is None:
            return False
        inside = [b for b in bindings if b.kind != "param" and (b.node is loop or self.inside(b.node, loop))]
        return bool(inside) and len(inside) < len(bindings)

    def bound_earlier_in_pass(self, name: str, loop: cst.CSTNode, statement: cst.CSTNode) -> bool:
        """`name` is assigned by a statement of `loop`'s own body that comes before the one
        holding `statement`: every pass binds it afresh before `statement` reads it, so
        nothing of the previous pass reaches there (`activities = init(...)` then
        `opt.init(activities)`). Only the body's own statements count: one nested in an
        `if` or an inner loop may not run."""
        body = getattr(getattr(loop, "body", None), "body", ())
        top = statement
        while top is not None and self.raw.parent_stmt.get(top) is not loop:
            top = self.raw.parent_stmt.get(top)
        if top is None or not any(stmt is top for stmt in body):
            return False  # (the loop's `else:` block runs once, after the passes)
        for stmt in body:
            if stmt is top:
                return False
            if name in assigned_names(stmt):
                return True
        return False

    def pass_binding(self, name: str, statement: cst.CSTNode, outermost: Optional[cst.CSTNode] = None) -> Optional[cst.CSTNode]:
        """The loop around `statement` (up to `outermost`) that binds `name` earlier in each
        of its passes (bound_earlier_in_pass): what `statement` reads of it is made in the
        same pass. None when no such loop."""
        current = statement
        while current is not None:
            loop, _ = self.enclosing_loop(current)
            if loop is None:
                return None
            if self.bound_earlier_in_pass(name, loop, statement):
                return loop
            if loop is outermost:
                return None
            current = loop
        return None

    def values_bound_in(self, name: str, scope: Scope, loop: cst.CSTNode) -> list[Optional[cst.BaseExpression]]:
        """The values `name` (as seen from `scope`) is given by its bindings inside `loop`,
        one per binding (None for one with no value, such as `del`)."""
        _, bindings = lookup(name, scope)
        return [b.value for b in bindings if self.inside(b.node, loop)]

    def inside(self, statement: cst.CSTNode, ancestor: cst.CSTNode) -> bool:
        return self.raw.statement_inside(statement, ancestor)
