"""Optimizer configuration for a Transformer, 340M parameters, 50,000 steps.

Written by:
    optax-lint recommend --arch transformer --params 340000000 --steps 50000 --batch \
    1024 --devices 16 --output-format python

Import `optimizer`, `schedule` and `current_learning_rate` into your training
script, or run this file for a smoke test on a toy model: python THIS_FILE.py [steps]
"""
# optax-lint: context arch=transformer params=340_000_000 steps=50_000 fine_tune=false
# optax-lint: context batch_per_device=1_024 devices=16 batch_global=16_384

import functools
import sys

import jax
import jax.numpy as jnp
import optax
from flax import jax_utils

TOTAL_STEPS = 50_000  # optimizer updates
PER_DEVICE_BATCH = 1024
NUM_DEVICES = 16  # data-parallel (pmap) devices this configuration was computed for
GLOBAL_BATCH = PER_DEVICE_BATCH * NUM_DEVICES  # the effective batch: 16_384
BASE_LEARNING_RATE = 1e-3  # Large batch (>8K)
REFERENCE_BATCH = 8192  # the largest global batch it is tuned for
# lamb: square-root scaling from the reference batch; the linear rule, BASE_LEARNING_RATE * NUM_DEVICES, would give 0.016
PEAK_LEARNING_RATE = BASE_LEARNING_RATE * max(GLOBAL_BATCH / REFERENCE_BATCH, 1.0) ** 0.5  # square-root scaling: 1.414214e-3
WARMUP_STEPS = min(2000 * NUM_DEVICES, 2500)  # scaled, at most the range's top: 2500
WEIGHT_DECAY = 0.01

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
    # Large batch (>8K): the layer-wise trust ratio scales each layer's step by its weight
    # norm, keeping very large-batch steps stable
    optax.inject_hyperparams(optax.lamb)(learning_rate=schedule, weight_decay=WEIGHT_DECAY),
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


@functools.partial(jax.pmap, axis_name="batch")
def train_step(params, opt_state, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    grads = jax.lax.pmean(grads, axis_name="batch")  # average the gradients across devices
    loss = jax.lax.pmean(loss, axis_name="batch")
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, loss


def save_checkpoint(manager, step, params, opt_state):
    """Save one copy of params and opt_state together (they are replicated per device)."""
    import orbax.checkpoint as ocp

    state = {"params": jax_utils.unreplicate(params), "opt_state": jax_utils.unreplicate(opt_state)}
    manager.save(step, args=ocp.args.StandardSave(state))


def restore_checkpoint(manager, params, opt_state):
    """Restore into the structure of freshly built (unreplicated) state, then replicate."""
    import orbax.checkpoint as ocp

    state = {"params": params, "opt_state": opt_state}
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
    restored = manager.restore(manager.latest_step(), args=ocp.args.StandardRestore(abstract))
    return jax_utils.replicate(restored["params"]), jax_utils.replicate(restored["opt_state"])


def main(num_steps=3):
    """A smoke run on a toy regression over the local devices: a few steps, the loss
    and the LR read back (one copy per device)."""
    devices = jax.local_device_count()
    if devices != NUM_DEVICES:
        print(f"note: running on {devices} devices; LR and warmup were computed for {NUM_DEVICES}")
    key = jax.random.PRNGKey(0)
    params = init_params(key)
    opt_state = optimizer.init(params)
    params = jax_utils.replicate(params)
    opt_state = jax_utils.replicate(opt_state)
    for step in range(num_steps):
        batch = make_batch(jax.random.fold_in(key, step), (devices, min(PER_DEVICE_BATCH, 32)))
        params, opt_state, loss = train_step(params, opt_state, batch)
        lr = float(current_learning_rate(opt_state)[0])
        print(f"step {step}: loss {float(loss[0]):.4f} lr {lr:.3g}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
