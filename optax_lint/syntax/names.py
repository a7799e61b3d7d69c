"""Qualified names without libcst's QualifiedNameProvider (which costs ~7x the parse).

A name is resolved through the bindings the walker recorded: `import optax as ox`
makes `ox.adamw` resolve to `optax.adamw`; `from big_vision import optax` makes
`optax.adamw` resolve to `big_vision.optax.adamw`, which is *not* optax. A name that
is both imported and reassigned in the same scope resolves to nothing: never guess.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.core.optax_api import OptaxApi
from optax_lint.syntax.walker import Binding, Scope


def lookup(name: str, scope: Scope) -> tuple[Optional[Scope], list[Binding]]:
    """The scope that binds `name` as seen from `scope`, and its bindings there."""
    for candidate in scope.lookup_chain():
        bindings = candidate.bindings.get(name)
        if bindings:
            return candidate, bindings
    return None, []


def local_function(raw, expr: cst.BaseExpression, scope: Scope) -> Optional[Scope]:
    """The scope of the function the file (`raw`, its RawFacts) defines once under the
    name `expr`; None for anything else."""
    if not isinstance(expr, cst.Name):
        return None
    _, bindings = lookup(expr.value, scope)
    if len(bindings) == 1 and bindings[0].kind == "def":
        return raw.functions.get(bindings[0].node)
    return None


def module_function(raw, name: str) -> Optional[Scope]:
    """The scope of the module-level function `name` the file (`raw`) defines."""
    return next((s for s in raw.functions.values() if s.name == name and s.parent is raw.module_scope), None)


def qualified_name(expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
    """`ox.transforms.clip` -> 'optax.transforms.clip', or None when not an import."""
    if isinstance(expr, cst.Name):
        _, bindings = lookup(expr.value, scope)
        if not bindings:
            return None
        quals = {b.qualname for b in bindings}
        if len(quals) == 1 and all(b.kind == "import" for b in bindings):
            return bindings[0].qualname
        return None
    if isinstance(expr, cst.Attribute):
        base = qualified_name(expr.value, scope)
        if base is None:
            return None
        return f"{base}.{expr.attr.value}"
    return None


class NameResolver:
    """Resolves callee expressions to canonical names such as `optax.adamw`."""

    def __init__(self, api: OptaxApi) -> None:
        self.api = api
        self._cache: dict[tuple[int, int], Optional[str]] = {}

    def canonical(self, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
        key = (id(expr), id(scope))
        if key in self._cache:
            return self._cache[key]
        qual = qualified_name(expr, scope)
        result = self.api.canonical(qual) if qual is not None else None
        self._cache[key] = result
        return result
