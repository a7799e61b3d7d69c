"""Weight-decay masks and parameter partitions: the mask that should keep biases and
norm scales out of the decay, and the labels that must match the params.

Masks are judged on what they compute (`facts/masks/extract.py` compiles them),
evaluated against the parameter names the file's model produces
(`facts/masks/param_tree.py`).
"""

# Prefilter (optax_lint/engine/prefilter.py): every rule here judges an optax optimizer,
# mask or partition: no optax, no finding.
TRIGGERS = ("optax",)
