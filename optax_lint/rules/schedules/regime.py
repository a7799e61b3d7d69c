"""The run's regime from the context: a Transformer, a fine-tuning run."""

from __future__ import annotations

from typing import Any, Optional

from optax_lint.facts.schedules.analysis import context_value


def transformer_entry(facts) -> Optional[Any]:
    entry = context_value(facts, "arch")
    if entry is not None and str(entry.value).lower() == "transformer":
        return entry
    return None


def fine_tune_entry(facts) -> Optional[Any]:
    entry = context_value(facts, "fine_tune")
    if entry is not None and entry.value is True:
        return entry
    return None
