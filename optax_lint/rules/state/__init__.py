"""Updates and optimizer state (docs/protocol.md: optimizer state and updates,
reading hyperparameters back with `inject_hyperparams` from a chained state).

Every rule here links an update call or a state access back to the pipeline that built
the state (see `facts/state/access.py`) and judges it against the state's layout.
"""

# Prefilter (optax_lint/engine/prefilter.py): optimizer state comes from optax, a TrainState
# (`apply_gradients`), nnx.Optimizer, or a `tx` / `opt_state` / `x.update(...)` in the file.
TRIGGERS = ("optax", "apply_gradients", "Optimizer", "opt_state", "hyperparams", r"\btx\b", r"\.update\(")
