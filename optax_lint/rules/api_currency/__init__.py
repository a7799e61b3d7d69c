"""API currency (OPX701-OPX704): names that break, or will break, on the installed
optax/flax/jax, judged from `rules/api_currency.toml` (generated from those libraries).

Severity per finding: a path that raises in the tabled versions (AttributeError,
ModuleNotFoundError, TypeError) is reported as an error whatever the catalogue's
default; a path that only warns is reported as a warning. The catalogue severity is
the rule's default as the issue defines it.
"""

import re

from optax_lint.core.catalogue import load_table


def TRIGGERS() -> tuple[str, ...]:
    """Prefilter words (optax_lint/engine/prefilter.py), from the table these rules read: "optax",
    the last part of every other listed path (no reference to `jax.experimental.maps`
    can avoid spelling `maps`), and `Optimizer` for nnx.Optimizer's old call forms."""
    raw = load_table("api_currency")
    words = {"optax", r"\bOptimizer\b"}
    for path in raw.get("names", {}):
        if not path.startswith("optax"):
            words.add(rf"\b{re.escape(path.rsplit('.', 1)[-1])}\b")
    return tuple(sorted(words))
