"""PPO in the shape of the popular single-file RL trainers: counts in updates,
a linear schedule that divides the count by minibatches * epochs."""

import jax
import jax.numpy as jnp
import optax
from flax.training.train_state import TrainState

TOTAL_TIMESTEPS = 5_000_000
NUM_STEPS = 128
NUM_ENVS = 8
NUM_MINIBATCHES = 4
UPDATE_EPOCHS = 4
LR = 2.5e-4
MAX_GRAD_NORM = 0.5
ANNEAL_LR = True
NUM_UPDATES = TOTAL_TIMESTEPS // NUM_STEPS // NUM_ENVS


def linear_schedule(count):
    frac = 1.0 - (count // (NUM_MINIBATCHES * UPDATE_EPOCHS)) / NUM_UPDATES
    return LR * frac


def make_train(network, params):
    if ANNEAL_LR:
        tx = optax.chain(
            optax.clip_by_global_norm(MAX_GRAD_NORM),
            optax.adam(learning_rate=linear_schedule, eps=1e-5),
        )
    else:
        tx = optax.chain(optax.clip_by_global_norm(MAX_GRAD_NORM), optax.adam(LR, eps=1e-5))
    return TrainState.create(apply_fn=network.apply, params=params, tx=tx)


def update_minibatch(train_state, batch, loss_fn):
    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
    (loss, aux), grads = grad_fn(train_state.params, batch)
    train_state = train_state.apply_gradients(grads=grads)
    return train_state, loss
