"""StableAdamW-style hand-built chains: clipping normalized updates, decay after a
positive scale, a negative cosine schedule: all correct."""

import optax


def stable_adamw(learning_rate, weight_decay=0.1, max_rms=1.0):
    return optax.chain(
        optax.scale_by_adam(),
        optax.clip_by_block_rms(max_rms),
        optax.scale(learning_rate),
        optax.add_decayed_weights(weight_decay),
        optax.scale(-1.0),
    )


def schedule_descent(learning_rate, steps):
    return optax.chain(
        optax.scale_by_adam(),
        optax.scale_by_schedule(optax.cosine_decay_schedule(-learning_rate, steps)),
    )


def custom_decay(learning_rate, weight_decay, mult):
    # decay folded into the negated update with its own sign: -lr * wd * p
    return optax.chain(
        optax.scale_by_adam(),
        optax.scale(-learning_rate),
        optax.add_decayed_weights(-learning_rate * weight_decay),
        optax.add_decayed_weights(mult - 1),
    )


def buggy_decay(learning_rate, weight_decay):
    # the real mistake: decay added after adam negated the update
    return optax.chain(optax.adam(learning_rate), optax.add_decayed_weights(weight_decay))


def init(params, grads):
    for make in (stable_adamw, schedule_descent):
        tx = make(1e-3, 100)
        state = tx.init(params)
        tx.update(grads, state, params)
    tx = custom_decay(1e-3, 0.1, 0.5)
    tx.init(params)
    tx = buggy_decay(1e-3, 0.1)
    return tx.init(params)
