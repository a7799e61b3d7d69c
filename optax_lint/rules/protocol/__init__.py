"""Optimizer choice against what is being trained (docs/protocol.md: optimizer,
gradient clipping, weight decay).

Every rule here judges a pipeline against the run context (`facts.run_context`),
and asks for the context only after it has found a pipeline it could judge, so a
file with nothing to judge pays nothing for inference. A field that is unknown (or
only guessed with low confidence) keeps the rule silent; `--show-context` lists the
rules skipped that way. Findings are protocol advice, worded with the reason, and a
deliberate choice is recorded with `noqa` or a declared context.
"""

# Prefilter (optax_lint/engine/prefilter.py): every protocol rule judges an optax pipeline.
TRIGGERS = ("optax",)
