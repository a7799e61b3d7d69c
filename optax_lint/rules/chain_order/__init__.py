"""Chain order (docs/protocol.md#chain-order): where clipping, decay and the LR step sit
in the *expanded* chain, and the sign of the update it leaves. Written once against
primitives, so `adamw(...)`, `chain(scale_by_adam(), scale_by_learning_rate(lr))` and
every wrapper are judged alike."""

# Prefilter (optax_lint/engine/prefilter.py): chains are optax transforms, so "optax" is spelled.
TRIGGERS = ("optax",)
