"""What optax's states hold and what inject_hyperparams breaks, measured with optax 0.2.8
(tests/test_state_runtime.py re-checks every entry against the installed optax)."""

from __future__ import annotations

from optax_lint.facts.pipelines.build import Pipeline

# Primitive states holding a field named like a hyperparameter, so that
# tree_get(opt_state, name) finds them without inject_hyperparams (checked against the
# installed optax by tests/test_state_runtime.py).
STATE_FIELD_HOLDERS: dict[str, frozenset[str]] = {
    "learning_rate": frozenset({"lbfgs", "scale_by_backtracking_linesearch", "scale_by_zoom_linesearch"}),
    "b1": frozenset({"contrib.schedule_free", "contrib.schedule_free_adamw", "contrib.schedule_free_sgd"}),
    "gamma": frozenset({"contrib.momo", "contrib.momo_adam"}),
    "scale": frozenset({"contrib.cocob", "contrib.scale_by_cocob", "contrib.reduce_on_plateau"}),
    "ns_coeffs": frozenset({"contrib.muon", "contrib.scale_by_muon"}),
    "count": frozenset(),  # nearly every state has a count: never judged
    "params": frozenset({"lbfgs", "scale_by_lbfgs"}),
    "updates": frozenset({"lbfgs", "scale_by_lbfgs"}),
    "grad": frozenset({"lbfgs", "scale_by_backtracking_linesearch", "scale_by_zoom_linesearch"}),
    "value": frozenset({"lbfgs", "scale_by_backtracking_linesearch", "scale_by_zoom_linesearch"}),
    "key": frozenset({"contrib.sophia", "contrib.hutchinson_estimator_diag_hessian"}),
    "gradient_step": frozenset({"MultiSteps"}),
}


# inject_hyperparams(f) turns every int/float argument into a traced array and every
# callable into a schedule. For these factories that breaks: parameter -> what happens
# (measured with optax 0.2.8; tests/test_state_runtime.py re-checks every entry).
INJECT_NEEDS_STATIC: dict[str, dict[str, tuple[str, bool]]] = {
    "adafactor": {"min_dim_size_to_factor": ("is compared in Python, so the jitted update raises TracerBoolConversionError", True)},
    "lookahead": {"sync_period": ("is compared in Python, so the jitted update raises TracerBoolConversionError", True)},
    "contrib.adopt": {"clip_value_fn": ("is a function, so it is called as a schedule and update raises TypeError", False)},
}


# Primitives whose state holds no arrays (EmptyState), so dropping the new state loses nothing.
STATELESS_PRIMITIVES = frozenset({
    "clip_by_global_norm", "clip", "clip_by_block_rms", "scale", "add_decayed_weights", "identity",
    "keep_params_nonnegative", "centralize", "set_to_zero", "scale_by_trust_ratio",
    "adaptive_grad_clip", "normalize_by_update_norm", "scale_by_param_block_norm", "scale_by_param_block_rms",
})


def field_holder(pipeline: Pipeline, name: str) -> bool:
    holders = STATE_FIELD_HOLDERS.get(name)
    if holders is None:
        return False
    if not holders:
        return True
    for node in pipeline.nodes():
        if node.key in holders:
            return True
        if node.entry is not None and any(step.step in holders for step in node.entry.expansion):
            return True
    return False
