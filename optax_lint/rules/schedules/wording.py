"""How the schedule rules spell numbers and name schedules in their messages."""

from __future__ import annotations

from typing import Any

from optax_lint.facts.schedules.calls import Schedule
from optax_lint.rules.base import describe


def fmt(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1:
        value = int(value)
    if isinstance(value, int):
        return str(value)
    return "0.0" if value == 0 else f"{value:.3g}"


def schedule_name(s: Schedule) -> str:
    short = s.key.rsplit(".", 1)[-1]
    text = describe(s.call, 60)
    if s.name:
        return f"{s.name} = {text if len(text) <= 40 else short + '(...)'}"
    return text
