"""Checkpointing (docs/protocol.md#checkpointing): save the optimizer state with the
params, restore it with a target, resume without re-initializing it, keep functional
updates, and use the current orbax API. Judged on `facts/checkpoints/sites.py`."""

# Prefilter (optax_lint/engine/prefilter.py): optimizer state (optax, a TrainState, a `tx` or
# `opt_state`, an `x.update(...)` site), saves and restores (orbax, flax checkpoints and
# serialization, pickle), and `state.replace(field=...)`.
TRIGGERS = (
    "optax", "orbax", r"\bcheckpoints\b", "pickle", "dill", "serialization", "apply_gradients", "TrainState",
    "Optimizer", "opt_state", r"\btx\b", r"\.update\(", r"\.replace\(\s*\w+\s*=",
)
