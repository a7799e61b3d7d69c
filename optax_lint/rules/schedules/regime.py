"""The run's regime from the context: a Transformer, a fine-tuning run, a small model,
a demonstration."""

from __future__ import annotations

from typing import Any, Optional

from optax_lint.facts.schedules.analysis import context_number, context_value


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


def small_model_entry(facts, max_params: float) -> Optional[Any]:
    """The `params` entry when the model is known to be small (fewer than `max_params`,
    declared or estimated from its config); None when it is not, or not known.

    An estimate is counted without its token-embedding table, as scaling-law work sizes
    a model (Kaplan et al., 2020): a step touches only its batch's rows of the table,
    and the depth and width of the stack are what the clip and the warmup guard."""
    if not max_params:
        return None
    params = context_number(facts, "params")
    if params is None:
        return None
    entry = context_value(facts, "params")
    count = entry.non_embedding if entry is not None and entry.non_embedding is not None else params
    return entry if count < max_params else None


def demo_run_entry(facts, max_steps: int) -> Optional[Any]:
    """The `steps` entry when the whole run is known (declared, or read with high
    confidence) to be at most `max_steps` optimizer steps: a demonstration."""
    if not max_steps:
        return None
    entry = context_value(facts, "steps")
    if entry is None or not entry.firm:
        return None
    steps = context_number(facts, "steps")
    return entry if steps is not None and steps <= max_steps else None
