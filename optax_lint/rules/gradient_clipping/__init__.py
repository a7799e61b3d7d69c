"""Gradient clipping (docs/protocol.md#gradient-clipping): what the clip measures when
part of the model is frozen."""

# Prefilter (optax_lint/engine/prefilter.py): the clip and the partition are optax calls.
TRIGGERS = ("optax",)
