"""Short source text of a mask or a part of it, for messages (OPX109, OPX110)."""

from __future__ import annotations

import libcst as cst


def _code(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


def snippet(node: cst.CSTNode) -> str:
    text = _code(node)
    return text if len(text) <= 60 else text[:57] + "..."
