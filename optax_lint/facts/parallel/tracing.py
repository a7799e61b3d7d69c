"""What a mapped step traces: the local functions each function hands on (called, or
passed to a call that runs them: vmap, tree.map, scan, partial, ...), the functions
reachable from a step, and the collectives naming an axis that the pmap/shard_map site
tracing them does not bind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

from optax_lint.facts.parallel.calls import keyword_arg, positional_args
from optax_lint.facts.parallel.collectives import Collective
from optax_lint.facts.parallel.names import PARTIAL, PASS_THROUGH, axis_set
from optax_lint.facts.parallel.sites import MappedStep
from optax_lint.syntax.names import lookup
from optax_lint.syntax.nodes import node_text
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import CallRecord, Scope, iter_children


@dataclass(eq=False)
class Reference:
    """A local function named inside another function."""

    name: cst.Name
    function: Scope
    holders: list  # calls that receive it (or a lambda around it) as a function
    escaped: bool  # stored, returned or otherwise used as a value: cannot be followed


@dataclass(eq=False)
class UnboundUse:
    collective: Collective
    root: MappedStep  # the pmap/shard_map site whose trace reaches it
    missing: frozenset  # axis names not bound there
    bound: frozenset  # names bound there
    path: list  # the names followed from the mapped function to the collective


class Tracing:
    """References, reachability and axis environments of one module's functions.
    `pf` is the module's ParallelFacts (steps.py): its steps, sites and collectives."""

    def __init__(self, pf) -> None:
        self.pf = pf
        self.facts = pf.facts
        self.raw = pf.raw
        self._references: dict[Scope, list] = {}
        self._traced_cache: Optional[set] = None
        self._unbound: Optional[list] = None

    def references(self, function: Scope) -> list[Reference]:
        """Names inside `function` (its lambdas included, nested defs excluded) that
        refer to local functions, with the calls that receive them as functions."""
        cached = self._references.get(function)
        if cached is not None:
            return cached
        out: list[Reference] = []
        node = function.node
        body = node.body if isinstance(node, (cst.FunctionDef, cst.Lambda)) else None
        if body is not None:
            try:
                self._collect_refs(body, function, (), False, False, out)
            except RecursionError:  # pathological nesting: keep what was found
                pass
        self._references[function] = out
        return out

    def _collect_refs(self, node, function: Scope, chain: tuple, top: bool, callee: bool, out: list) -> None:
        # chain: ((call, confirmed), ...) outer to inner: calls whose argument holds
        # `node`; confirmed once we know they receive a function containing it.
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return
        if isinstance(node, cst.Name):
            _, bindings = lookup(node.value, function)
            if len(bindings) == 1 and bindings[0].kind == "def":
                fn = self.raw.functions.get(bindings[0].node)
                if fn is not None and fn is not function:
                    holders = [c for c, confirmed in chain if confirmed]
                    if top and chain:
                        holders = [c for c, _ in chain if _ or c is chain[-1][0]]
                    escaped = not callee and not (top and chain)
                    out.append(Reference(node, fn, holders, escaped))
            return
        if isinstance(node, cst.Lambda):
            scope = self.pf.sites.lambda_scopes.get(node)
            if top and chain and scope is not None:
                # A lambda handed to a call (vmap, tree.map, an unknown wrapper...): a
                # function of its own, traced in whatever the call adds.
                holders = [c for c, confirmed in chain if confirmed] + [chain[-1][0]]
                out.append(Reference(cst.Name("lambda"), scope, holders, False))
                return
            confirmed = tuple((c, True) for c, _ in chain)
            self._collect_refs(node.body, function, confirmed, False, False, out)
            return
        if isinstance(node, cst.Call):
            name = self.facts.canonical(node.func, function)
            if name in PARTIAL:
                positional = positional_args(node)
                for arg in node.args:
                    if positional and arg is positional[0]:
                        self._collect_refs(arg.value, function, chain, top, False, out)
                    else:
                        self._collect_refs(arg.value, function, chain + ((node, False),), True, False, out)
                return
            self._collect_refs(node.func, function, chain, False, True, out)
            for arg in node.args:
                self._collect_refs(arg.value, function, chain + ((node, False),), True, False, out)
            return
        for child in iter_children(node):
            self._collect_refs(child, function, chain, False, False, out)

    def reachable(self, function: Scope) -> list[Scope]:
        seen = [function]
        i = 0
        while i < len(seen) and i < 64:
            for ref in self.references(seen[i]):
                if ref.function not in seen:
                    seen.append(ref.function)
            i += 1
        return seen

    def _traced(self) -> set:
        if self._traced_cache is None:
            traced: set = set()
            for step in self.pf.steps:
                if step.function is not None:
                    traced.update(self.reachable(step.function))
            self._traced_cache = traced
        return self._traced_cache

    def is_nested_site(self, step: MappedStep) -> bool:
        """Whether the site is written inside a function that some mapped step traces."""
        traced = self._traced()
        scope: Optional[Scope] = step.scope
        while scope is not None:
            if scope in traced:
                return True
            scope = scope.parent
        return False

    def under_if(self, record: CallRecord) -> bool:
        stmt = record.statement
        parents = self.raw.parent_stmt
        while stmt in parents:
            parent = parents[stmt]
            if isinstance(parent, cst.If):
                return True
            if isinstance(parent, (cst.FunctionDef, cst.Module)):
                return False
            stmt = parent
        return False

    @staticmethod
    def _inside(scope: Scope, lambdas: set, function: Scope) -> bool:
        """Whether `scope` sits in one of `lambdas` (below `function`)."""
        while scope is not None and scope is not function:
            if scope in lambdas:
                return True
            scope = scope.parent
        return False

    def _binder_axes(self, call: cst.Call, scope: Scope) -> Any:
        """What a call that receives a function adds to the axis environment:
        frozenset (possibly empty), or Unknown when it cannot be known."""
        site = self.pf.step_by_site.get(call)
        if site is not None:
            if site.kind == "jit":
                return frozenset()
            axes = site.axis_names
            return frozenset() if axes is None else axes
        name = self.facts.canonical(call.func, scope)
        if name in PASS_THROUGH:
            return frozenset()
        axis = keyword_arg(call, "axis_name")
        if axis is not None:
            return axis_set(value_of(axis.value, scope)) or frozenset()
        return Unknown(f"passed to {node_text(call.func)[:40]}")

    def unbound_axis_uses(self) -> list[UnboundUse]:
        """Collectives naming an axis that the pmap/shard_map site tracing them does not
        bind (nor any vmap/pmap/shard_map between the site and the collective)."""
        if self._unbound is not None:
            return self._unbound
        out: list[UnboundUse] = []
        seen: set = set()
        for step in self.pf.steps:
            if step.kind not in ("pmap", "shard_map") or step.function is None:
                continue
            if self.is_nested_site(step):
                continue
            env = step.axis_names
            if isinstance(env, Unknown):
                continue
            self._visit(step.function, env or frozenset(), step, [], out, seen, set())
        self._unbound = out
        return out

    def _visit(self, function: Scope, env: frozenset, root: MappedStep, path: list, out: list, seen: set, visiting: set) -> None:
        key = (function, env)
        if key in visiting or len(visiting) > 200:
            return
        visiting.add(key)
        refs = self.references(function)
        separate = {ref.function for ref in refs if ref.function.kind == "lambda"}
        for collective in self.pf.collectives_in(function):
            if not isinstance(collective.axes, frozenset) or self._inside(collective.record.scope, separate, function):
                continue
            missing = collective.axes - env
            if missing and collective.call not in seen and not self.under_if(collective.record):
                seen.add(collective.call)
                out.append(UnboundUse(collective, root, frozenset(missing), env, list(path)))
        for ref in refs:
            if ref.escaped:
                continue
            new_env: Any = env
            for holder in ref.holders:
                added = self._binder_axes(holder, function)
                if isinstance(added, Unknown):
                    new_env = added
                    break
                new_env = new_env | added
            if isinstance(new_env, Unknown):
                continue
            for step in self.pf.steps:
                if step.decorated is not None and step.function is ref.function and step.kind != "jit":
                    axes = step.axis_names
                    if isinstance(axes, Unknown):
                        new_env = axes
                        break
                    new_env = new_env | (axes or frozenset())
            if isinstance(new_env, Unknown):
                continue
            self._visit(ref.function, new_env, root, path + [ref.name], out, seen, visiting)
