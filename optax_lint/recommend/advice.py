"""What to expect from a recommendation and how to watch it: memory (recommend/memory.py),
convergence and risks, monitoring, what to change first on divergence, and a
checkpoint snippet with the current orbax API."""

from __future__ import annotations

from optax_lint.core.protocol_table import table
from optax_lint.recommend.decide import Recommendation
from optax_lint.recommend.fmt import py_number as _n
from optax_lint.recommend.memory import memory, size_text


def expected(rec: Recommendation) -> dict:
    req = rec.request
    mem = memory(rec)
    risks = [rec.row["risks"]]
    if not mem.fits:
        risks.append(f"params, grads and optimizer state need {size_text(mem.total)} per device, more than {mem.device}: "
                     "as written, the run stops with an out-of-memory error (see Memory for what fits)")
    if rec.weight_decay is not None and not rec.decay_in_chain:
        param = rec.optimizer_info["decay_param"]
        mask = "weight_decay_mask" if param == "weight_decay_rate" else "mask"
        risks.append(f"the decay also shrinks biases and normalization scales; to decay only matrices pass "
                     f"{mask}=lambda p: jax.tree.map(lambda x: x.ndim > 1, p) and add '{mask}' to inject_hyperparams' "
                     "static_args (a callable that is not static is taken for a schedule)")
    if rec.schedule_kind == "constant":
        risks.append("no decay: the final loss stays at the noise level of the constant LR")
    epochs = None
    if req.dataset_size:
        epochs = req.steps * req.effective_batch / req.dataset_size
        if epochs > 10 and rec.weight_decay is None:
            risks.append(f"{epochs:.1f} epochs over the data with no weight decay: overfitting is likely (--issue overfitting adds decay)")
    return {
        "convergence": rec.row["convergence"],
        "epochs": epochs,
        "memory": mem,
        "risks": risks,
    }


def monitoring(rec: Recommendation) -> list[tuple[str, str]]:
    """(what to watch, what value means trouble)."""
    i = rec.lr_index
    lr_read = f'opt_state[{i}].hyperparams["learning_rate"]' + ("[0] (one copy per device)" if rec.multi_device else "")
    items = [
        ("loss (train and validation)", "NaN/inf, a jump of more than 2x over its recent average, or a validation loss rising while training loss falls"),
        ("gradient global norm: optax.tree.norm(grads), logged before the clip",
         (f"sitting above the clip threshold {_n(rec.clip_norm)} on most steps (the clip is then rescaling every step: raise it), "
          "or spikes of 10x the running median" if rec.clip_norm is not None else "spikes of 10x its running median (then add clip_by_global_norm)")),
        (f"learning rate, read back as {lr_read}",
         f"anything but the computed schedule, e.g. {_n(rec.schedule_value(rec.warmup))} at step {rec.warmup:,}"
         if rec.warmup else f"anything but {_n(rec.peak_lr)}"),
        ("update-to-parameter norm ratio: optax.tree.norm(updates) / optax.tree.norm(params)",
         "above 1e-2 (steps too large) or below 1e-5 (training has stalled)"),
    ]
    if rec.optimizer in ("adam", "adamw", "lamb"):
        items.append(("loss right after the warmup ends", "a spike (the peak LR is too high)"))
    if "slow-convergence" in rec.request.issues:
        items.append(("loss slope over the first 5% of steps", "flat after the warmup: the LR is too low (try 3x) or the warmup too long"))
    return items


def divergence(rec: Recommendation) -> list[str]:
    steps = list(table()["divergence"]["steps"])
    if not rec.multi_device:
        steps[0] = steps[0].split(" (under pmap")[0]
    if rec.clip_norm is None:
        steps[2] = "add optax.clip_by_global_norm at the head of the chain, just above the usual gradient norm"
    if rec.request.fine_tune:
        steps[0] = "lower the peak learning rate 3x (fine-tuning: 1e-5 or below)"
    return steps


def checkpoint_snippet(rec: Recommendation) -> str:
    one_copy = "jax_utils.unreplicate(params)" if rec.multi_device else "params"
    one_state = "jax_utils.unreplicate(opt_state)" if rec.multi_device else "opt_state"
    return "\n".join([
        "import orbax.checkpoint as ocp",
        "",
        "manager = ocp.CheckpointManager(ckpt_dir, options=ocp.CheckpointManagerOptions(max_to_keep=3))",
        f"manager.save(step, args=ocp.args.StandardSave({{'params': {one_copy}, 'opt_state': {one_state}}}))",
        "# resume: restore into freshly built state so opt_state comes back as optax NamedTuples",
        "abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, {'params': params, 'opt_state': opt_state})",
        "restored = manager.restore(manager.latest_step(), args=ocp.args.StandardRestore(abstract))",
    ]) + "\n"
