"""Data flow of a restored value: `Flow` follows it, `Use` is where it arrives (an
optimizer update, a step function's `opt_state`, ...)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

import libcst as cst

from optax_lint.facts.checkpoints.classify import subscript_key
from optax_lint.facts.checkpoints.functions import LocalFunctions
from optax_lint.facts.checkpoints.vocabulary import TRANSPARENT, TREE_MAPS, opt_name
from optax_lint.syntax.arguments import call_arg_expr
from optax_lint.syntax.walker import Binding, CallRecord, Scope


@dataclass(frozen=True)
class Use:
    kind: str  # update_state | opt_state_kw | apply_gradients | opt_state_path | reinit
    node: cst.CSTNode
    path: tuple[str, ...]
    scope: Scope


def holds_opt_state(path: tuple[str, ...]) -> bool:
    """A path into a restored value that selects optimizer state (`["opt_state"]`,
    `.optimizer_state`, ...)."""
    return any(opt_name(key) for key in path)


class Flow:
    """Follows a value (a restore's result) through one function: names assigned from
    it, `['key']`/`.attr` selections, replication/transfer wrappers, and into the
    parameters of locally defined functions it is passed to (two levels)."""

    def __init__(
        self,
        ckpt: LocalFunctions,
        scope: Scope,
        tracked: dict[str, tuple[str, ...]],
        depth: int = 0,
        origins: Optional[dict[str, cst.CSTNode]] = None,
    ) -> None:
        """`origins`: the statement that binds a tracked name to the value (a restore's
        own statement); a read of the name that a later binding certainly reaches first
        is not the value."""
        self.ckpt = ckpt
        self.facts = ckpt.facts
        self.scope = scope
        self.tracked = dict(tracked)
        self.sources: dict[str, set[int]] = {name: {id(node)} for name, node in (origins or {}).items()}
        self.depth = depth
        self._propagate()

    def _bindings(self) -> Iterator[Binding]:
        for bindings in self.scope.bindings.values():
            yield from bindings

    def _propagate(self) -> None:
        changed = True
        rounds = 0
        while changed and rounds < 6:
            changed = False
            rounds += 1
            for b in self._bindings():
                if b.value is None or b.kind not in ("assign", "annassign", "walrus", "unpack", "with"):
                    continue
                if id(b.node) in self.sources.get(b.name, ()):
                    continue
                value = b.value
                if b.index:
                    if isinstance(value, (cst.Tuple, cst.List)) and len(b.index) == 1 and b.index[0] < len(value.elements):
                        value = value.elements[b.index[0]].value
                    else:
                        continue
                path = self.path_of(value, at=b.node)
                if path is not None:
                    self.tracked.setdefault(b.name, path)
                    self.sources.setdefault(b.name, set()).add(id(b.node))
                    changed = True

    def _rebound(self, name: str, at: Optional[cst.CSTNode]) -> bool:
        """A binding that does not carry the value certainly reaches `at` first:
        `ckpt = dict(model=state)` before `ckpt["model"]` in the same block."""
        sources = self.sources.get(name)
        if at is None or not sources:
            return False  # which binding carries the value is not known: keep following it
        binding = self.facts.raw.reaching_binding(self.scope.bindings.get(name, []), at)
        return binding is not None and id(binding.node) not in sources

    def path_of(self, expr: Optional[cst.BaseExpression], depth: int = 0, at: Optional[cst.CSTNode] = None) -> Optional[tuple[str, ...]]:
        """The path into the value that `expr` selects, or None; `at`: the statement that
        reads `expr` (to see a name rebound before it)."""
        if expr is None or depth > 8:
            return None
        if isinstance(expr, cst.Name):
            path = self.tracked.get(expr.value)
            return None if path is None or self._rebound(expr.value, at) else path
        if isinstance(expr, cst.Subscript):
            base = self.path_of(expr.value, depth + 1, at)
            if base is None:
                return None
            key = subscript_key(expr, self.scope)
            return base + ((key,) if key is not None else ("[]",))
        if isinstance(expr, cst.Attribute):
            base = self.path_of(expr.value, depth + 1, at)
            return None if base is None else base + (expr.attr.value,)
        if isinstance(expr, cst.Call):
            name = self.ckpt.qual(expr.func, self.scope)
            if name in TRANSPARENT:
                return self.path_of(call_arg_expr(expr, 0, None, strict=True), depth + 1, at)
            if name in TREE_MAPS:
                positional = [a for a in expr.args if a.keyword is None]
                return self.path_of(positional[1].value, depth + 1, at) if len(positional) >= 2 else None
        return None

    def calls(self) -> Iterator[CallRecord]:
        for record in self.ckpt.raw.calls:
            scope = record.scope
            if scope is self.scope or (scope.kind == "lambda" and scope.parent is self.scope):
                yield record

    def uses(self) -> list[Use]:
        out: list[Use] = []
        facts = self.facts
        sites = {site.call: site for site in facts.update_sites}
        for record in self.calls():
            call = record.node
            site = sites.get(call)
            if site is not None and site.kind == "update":
                state_arg = site.arg(1, "state")
                if state_arg is not None:
                    path = self.path_of(state_arg.value, at=record.statement)
                    if path is not None:
                        out.append(Use("update_state", state_arg.value, path, self.scope))
            for arg in call.args:
                path = self.path_of(arg.value, at=record.statement)
                if path is None:
                    continue
                if arg.keyword is not None and opt_name(arg.keyword.value):
                    out.append(Use("opt_state_kw", arg.value, path, self.scope))
                if holds_opt_state(path):
                    out.append(Use("opt_state_path", arg.value, path, self.scope))
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "apply_gradients":
                path = self.path_of(func.value, at=record.statement)
                if path is not None:
                    out.append(Use("apply_gradients", func.value, path, self.scope))
            if self.depth < 2:
                out.extend(self._into_function(record))
        for b in self._bindings():
            if b.value is not None and b.kind in ("assign", "annassign"):
                path = self.path_of(b.value, at=b.node)
                if path is not None and holds_opt_state(path):
                    out.append(Use("opt_state_path", b.value, path, self.scope))
        return out

    def _into_function(self, record: CallRecord) -> list[Use]:
        call = record.node
        fn = self.ckpt.function_of(call.func, record.scope)
        if fn is None:
            return []
        scope, shift = fn
        node = scope.node
        if not isinstance(node, cst.FunctionDef):
            return []
        positional_params = [p.name.value for p in list(node.params.posonly_params) + list(node.params.params)]
        tracked: dict[str, tuple[str, ...]] = {}
        position = shift
        for arg in call.args:
            if arg.star:
                return []
            path = self.path_of(arg.value, at=record.statement)
            if arg.keyword is not None:
                if path is not None:
                    tracked[arg.keyword.value] = path
                continue
            if path is not None and position < len(positional_params):
                tracked[positional_params[position]] = path
            position += 1
        if not tracked:
            return []
        return Flow(self.ckpt, scope, tracked, self.depth + 1).uses()
