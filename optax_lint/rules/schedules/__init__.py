"""Learning-rate schedules (docs/protocol.md: schedule, warmup): warmup, horizon, kind for
the run length, arguments optax rejects or silently degrades, join_schedules
boundaries, schedules inside MultiSteps, and schedules that never reach the optimizer.

The rules read `facts/schedules/analysis.py` (what each schedule does over time, by
optax's own formulas) and the run context (`steps`, `arch`, `fine_tune`). A rule that
needs a context field that is unknown, or a value that cannot be read statically,
says nothing.
"""

# Prefilter (optax_lint/engine/prefilter.py): schedules and the optimizers they drive are optax calls.
TRIGGERS = ("optax",)
