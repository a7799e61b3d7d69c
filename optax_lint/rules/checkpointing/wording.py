"""How the checkpointing rules show a call in their messages."""

from __future__ import annotations

import libcst as cst

from optax_lint.rules.base import describe


def call_text(call: cst.Call, limit: int = 64) -> str:
    """`mngr.save(step, args=...)`: a call with its receiver, shortened for messages."""
    func = " ".join(cst.Module([]).code_for_node(call.func).split())
    text = describe(call, limit=10_000)
    args = text[text.index("(") :] if "(" in text else "()"
    full = f"{func}{args}"
    return full if len(full) <= limit and "\n" not in full else f"{func}(...)"
