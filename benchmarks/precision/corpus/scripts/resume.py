"""Checkpointing in the shape of the flax examples: a periodic save and a resume path."""

import optax
import orbax.checkpoint as ocp
from flax.training import train_state


def make_state(model, params, learning_rate=1e-3):
    tx = optax.adamw(learning_rate)
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)


def train(model, params, batches, workdir, train_step, resume=False):
    manager = ocp.CheckpointManager(workdir)
    state = make_state(model, params)
    if resume:
        restored = manager.restore(manager.latest_step(), args=ocp.args.StandardRestore(state))
        state = restored
    for step, batch in enumerate(batches):
        state = train_step(state, batch)
        if step % 1000 == 0:
            manager.save(step, args=ocp.args.StandardSave({"params": state.params}))
    return state


def export(state, path):
    # once, after training: for serving, not for resuming
    ocp.StandardCheckpointer().save(path, state.params)
