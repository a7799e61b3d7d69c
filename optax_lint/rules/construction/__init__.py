"""How an optimizer is constructed (docs/protocol.md#optimizer): arguments landing in
the wrong parameter, `masked` mistaken for freezing, a trailing comma making a tuple."""

# Prefilter (optax_lint/engine/prefilter.py): optimizer construction is optax calls.
TRIGGERS = ("optax",)
