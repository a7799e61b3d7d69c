"""Training-loop slips seen in tutorials, next to their correct forms."""

import jax
import optax


def train_rebuilding(params, batches, loss_fn, learning_rate=1e-3):
    for batch in batches:
        tx = optax.adam(learning_rate)
        opt_state = tx.init(params)
        grads = jax.grad(loss_fn)(params, batch)
        updates, opt_state = tx.update(grads, opt_state)
        params = optax.apply_updates(params, updates)
    return params


def train_adamw_without_params(params, batches, loss_fn):
    tx = optax.adamw(1e-3, weight_decay=0.01)
    opt_state = tx.init(params)
    for batch in batches:
        grads = jax.grad(loss_fn)(params, batch)
        updates, opt_state = tx.update(grads, opt_state)
        params = optax.apply_updates(params, updates)
    return params


def train_manual_sign(params, batches, loss_fn):
    tx = optax.sgd(1e-2)
    opt_state = tx.init(params)
    for batch in batches:
        grads = jax.grad(loss_fn)(params, batch)
        updates, opt_state = tx.update(grads, opt_state)
        params = jax.tree_util.tree_map(lambda p, u: p - u, params, updates)
    return params


def train_plateau(params, batches, loss_fn):
    tx = optax.chain(optax.adam(1e-3), optax.contrib.reduce_on_plateau(patience=5))
    opt_state = tx.init(params)
    for batch in batches:
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
    return params


def train_correct(params, batches, loss_fn):
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))
    opt_state = tx.init(params)
    for batch in batches:
        grads = jax.grad(loss_fn)(params, batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
    return params, opt_state
