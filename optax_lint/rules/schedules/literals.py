"""Integer literals for the schedule rules' fixes."""

from __future__ import annotations

import libcst as cst


def int_literal(n: int) -> cst.Integer:
    return cst.Integer(f"{n:_}" if n >= 10_000 else str(n))
