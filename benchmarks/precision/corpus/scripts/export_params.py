"""A pmap trainer that pickles the replicated state after training (export)."""

import pickle

import jax
import optax
from flax import jax_utils
from flax.training import train_state


def train(model, params, batches, steps=100):
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)
    state = jax_utils.replicate(state)

    def step(state, batch):
        grads = jax.grad(lambda p: model.apply(p, batch).mean())(state.params)
        grads = jax.lax.pmean(grads, axis_name="batch")
        return state.apply_gradients(grads=grads)

    p_step = jax.pmap(step, axis_name="batch")
    for i in range(steps):
        state = p_step(state, batches[i])
    with open("/tmp/state.pkl", "wb") as f:
        pickle.dump(state, f)
    return state
