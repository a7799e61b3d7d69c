"""What a static value read from project code carries: how sure it is, and where it
was written (`file:line`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

CONFIDENCE_RANK = {"declared": 4, "high": 3, "medium": 2, "low": 1}


def weaker(a: str, b: str) -> str:
    return a if CONFIDENCE_RANK.get(a, 0) <= CONFIDENCE_RANK.get(b, 0) else b


class Origin:
    """Where a value was written: a node in some module, shown as `file:line`."""

    __slots__ = ("facts", "node", "label")

    def __init__(self, facts, node: cst.CSTNode, label: str = "") -> None:
        self.facts = facts
        self.node = node
        self.label = label

    def location(self) -> str:
        return f"{self.facts.display_path}:{line_of(self.facts, self.node)}"


def line_of(facts, node: cst.CSTNode) -> int:
    return facts.source_positions.span(node).line


@dataclass
class Found:
    value: Any
    confidence: str  # high | medium | low
    origin: Optional[Origin] = None
    detail: str = ""  # how it was found: "config.num_train_steps in configs/default.py"

    def capped(self, confidence: str, detail: Optional[str] = None) -> "Found":
        return Found(self.value, weaker(self.confidence, confidence), self.origin, self.detail if detail is None else detail)

