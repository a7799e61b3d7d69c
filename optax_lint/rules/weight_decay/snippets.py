"""Short source text of a mask or a part of it, for messages (OPX109, OPX110)."""

from __future__ import annotations

import libcst as cst

from optax_lint.syntax.nodes import node_text


def snippet(node: cst.CSTNode) -> str:
    text = node_text(node)
    return text if len(text) <= 60 else text[:57] + "..."
