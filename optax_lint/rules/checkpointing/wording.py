"""How the checkpointing rules show a call in their messages."""

from __future__ import annotations

import libcst as cst

from optax_lint.rules.base import describe
from optax_lint.syntax.nodes import node_text


def call_text(call: cst.Call, limit: int = 64) -> str:
    """`mngr.save(step, args=...)`: a call with its receiver, shortened for messages."""
    func = node_text(call.func)
    text = describe(call, limit=10_000)
    args = text[text.index("(") :] if "(" in text else "()"
    full = f"{func}{args}"
    return full if len(full) <= limit and "\n" not in full else f"{func}(...)"
