"""A data-parallel pmap trainer (the pre-jit.sharding idiom), with the classic slip:
the gradients are never averaged across devices."""

import functools

import jax
import optax
from flax import jax_utils
from flax.training import train_state


def create(model, params):
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1, momentum=0.9))
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)


@functools.partial(jax.pmap, axis_name="batch")
def train_step(state, batch):
    def loss_fn(params):
        return ((state.apply_fn(params, batch["x"]) - batch["y"]) ** 2).mean()

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    loss = jax.lax.pmean(loss, axis_name="batch")
    return state.apply_gradients(grads=grads), loss


@functools.partial(jax.pmap, axis_name="batch")
def eval_step(state, batch):
    preds = state.apply_fn(state.params, batch["x"])
    return jax.lax.pmean(((preds - batch["y"]) ** 2).mean(), axis_name="batch")


def train(model, params, batches):
    state = jax_utils.replicate(create(model, params))
    for batch in batches:
        state, loss = train_step(state, batch)
    return jax_utils.unreplicate(state)
