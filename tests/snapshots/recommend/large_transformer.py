"""Optimizer configuration for a Transformer, 1.3B parameters, 50,000 steps.

Written by:
    optax-lint recommend --arch transformer --params 1300000000 --steps 50000 --batch \
    512 --output-format python

Import `optimizer`, `schedule` and `current_learning_rate` into your training
script, or run this file for a smoke test on a toy model: python THIS_FILE.py [steps]
"""
# optax-lint: context arch=transformer params=1_300_000_000 steps=50_000 fine_tune=false
# optax-lint: context batch_global=512

import sys

import jax
import jax.numpy as jnp
import optax

TOTAL_STEPS = 50_000  # optimizer updates
BATCH_SIZE = 512
BASE_LEARNING_RATE = 3e-4  # Large Transformer (>1B params)
REFERENCE_BATCH = 1024  # the largest global batch it is tuned for
LR_CEILING = 2e-4  # GPT-3 (Brown et al. 2020, Table 2.1), 1.3B parameters
PEAK_LEARNING_RATE = min(BASE_LEARNING_RATE, LR_CEILING)  # capped at the stability ceiling: 2e-4
WARMUP_STEPS = 2000
WEIGHT_DECAY = 0.1

schedule = optax.warmup_cosine_decay_schedule(
    init_value=0.0,
    peak_value=PEAK_LEARNING_RATE,
    warmup_steps=WARMUP_STEPS,
    decay_steps=TOTAL_STEPS,  # the whole run, warmup included
    end_value=1e-6,
)

optimizer = optax.chain(
    # clip the gradients first: one bad batch cannot derail training
    optax.clip_by_global_norm(1.0),
    # Large Transformer (>1B params): decoupled weight decay prevents overfitting at scale
    optax.inject_hyperparams(optax.adamw)(learning_rate=schedule, weight_decay=WEIGHT_DECAY),
)


def current_learning_rate(opt_state):
    """The LR of the last update: inject_hyperparams keeps it in the state, and the
    injected optimizer is element 1 of the chain, so its state is opt_state[1]."""
    return opt_state[1].hyperparams["learning_rate"]


def loss_fn(params, batch):
    inputs, targets = batch
    predictions = inputs @ params["dense"]["kernel"] + params["dense"]["bias"]
    return jnp.mean((predictions - targets) ** 2)


def init_params(key):
    return {"dense": {"kernel": 0.1 * jax.random.normal(key, (16, 4)), "bias": jnp.zeros((4,))}}


def make_batch(key, shape):
    inputs = jax.random.normal(key, (*shape, 16))
    targets = inputs[..., :4] * 2.0 - 1.0
    return inputs, targets


@jax.jit
def train_step(params, opt_state, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, loss


def save_checkpoint(manager, step, params, opt_state):
    """Save params and opt_state together: losing Adam's moments resets training progress."""
    import orbax.checkpoint as ocp

    manager.save(step, args=ocp.args.StandardSave({"params": params, "opt_state": opt_state}))


def restore_checkpoint(manager, params, opt_state):
    """Restore into the structure of freshly built state (optax NamedTuples, not dicts)."""
    import orbax.checkpoint as ocp

    state = {"params": params, "opt_state": opt_state}
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
    restored = manager.restore(manager.latest_step(), args=ocp.args.StandardRestore(abstract))
    return restored["params"], restored["opt_state"]


def main(num_steps=3):
    """A smoke run on a toy regression: a few steps, the loss and the LR read back."""
    key = jax.random.PRNGKey(0)
    params = init_params(key)
    opt_state = optimizer.init(params)
    for step in range(num_steps):
        batch = make_batch(jax.random.fold_in(key, step), (min(BATCH_SIZE, 32),))
        params, opt_state, loss = train_step(params, opt_state, batch)
        lr = float(current_learning_rate(opt_state))
        print(f"step {step}: loss {float(loss):.4f} lr {lr:.3g}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
