"""The local spelling of an imported module, for the messages and fixes that call into it
(OPX401, OPX403, OPX406)."""

from __future__ import annotations

from typing import Optional

from optax_lint.rules.base import Context


def import_name(ctx: Context, qualname: str) -> Optional[str]:
    """The local spelling of an imported module in this file (`lax` for jax.lax via
    `from jax import lax`, `jax.lax` via `import jax`), or None."""
    scope = ctx.facts.raw.module_scope
    best = None
    for name, bindings in scope.bindings.items():
        if len(bindings) != 1 or bindings[0].kind != "import":
            continue
        qual = bindings[0].qualname or ""
        if qual == qualname:
            return name
        if qualname.startswith(qual + ".") and best is None:
            best = name + qualname[len(qual):]
    return best
