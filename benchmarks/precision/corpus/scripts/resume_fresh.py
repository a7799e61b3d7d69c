"""A resume path that restores only the params and starts the optimizer again."""

import optax
import orbax.checkpoint as ocp


def train(params, batches, update_fn, ckpt_dir, resume=False):
    tx = optax.adamw(3e-4)
    checkpointer = ocp.PyTreeCheckpointer()
    if resume:
        params = checkpointer.restore(ckpt_dir, item=params)
    opt_state = tx.init(params)
    for step, batch in enumerate(batches):
        params, opt_state = update_fn(tx, params, opt_state, batch)
        if step % 500 == 0:
            checkpointer.save(f"{ckpt_dir}/{step}", {"params": params, "opt_state": opt_state})
    return params
