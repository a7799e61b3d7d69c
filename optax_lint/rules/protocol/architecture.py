"""The architecture from the run context (asked for only once a rule has found something
to judge), and its name in messages."""

from __future__ import annotations

from typing import Any, Optional

from optax_lint.rules.base import Context


def arch_ok(ctx: Context, wanted) -> Optional[Any]:
    arch = ctx.facts.run_context.get("arch")
    if arch is None or arch.value not in wanted:
        return None
    return arch


def arch_name(arch: str) -> str:
    return {"transformer": "Transformer", "cnn": "CNN", "mlp": "MLP", "rnn": "RNN"}.get(arch, arch)
