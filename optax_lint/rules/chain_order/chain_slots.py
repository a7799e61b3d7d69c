"""Where a transformation is written in its chain call, for the fixes that move it
(OPX101, OPX102)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.pipelines.build import TxNode


def chain_slot(node: TxNode) -> Optional[tuple[cst.Call, cst.Arg]]:
    """The chain call and argument holding `node` (or its masked(...) wrapper), when it
    is written as a plain argument of the chain."""
    element = node.chain_element()
    if element is None or element.conditional:
        return None
    if isinstance(element.slot, cst.Arg) and element.slot_owner is not None and not element.slot.star:
        return element.slot_owner, element.slot
    return None
