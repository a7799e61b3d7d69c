"""Optimizer construction slips and their near-misses."""

import optax

learning_rate = 1e-3
weight_decay = 0.05
momentum = 0.9


def make_adamw():
    return optax.adamw(learning_rate, weight_decay)


def make_sgd():
    return optax.sgd(learning_rate, momentum)


def make_adam_betas():
    return optax.adam(learning_rate, 0.9, 0.98)


def make_tuple():
    tx = optax.adam(learning_rate),
    return tx


def make_masked_pair(mask_fn, other_fn):
    return optax.chain(
        optax.masked(optax.adam(learning_rate), mask_fn),
        optax.masked(optax.set_to_zero(), other_fn),
    )


def train(params, grads):
    for make in (make_adamw, make_sgd, make_adam_betas, make_masked_pair):
        tx = make() if make is not make_masked_pair else make(None, None)
        state = tx.init(params)
        updates, state = tx.update(grads, state, params)
        params = optax.apply_updates(params, updates)
    return params
