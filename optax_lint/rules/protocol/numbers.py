"""Numbers in the protocol rules: what counts as one, and how their messages spell it."""

from __future__ import annotations

from typing import Any


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def fmt(value: Any) -> str:
    if isinstance(value, bool) or not is_number(value):
        return repr(value)
    if isinstance(value, int) or float(value).is_integer():
        value = int(value)
        return f"{value:_}" if abs(value) >= 10_000 else str(value)
    return f"{value:g}"
