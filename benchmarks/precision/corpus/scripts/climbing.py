"""Real mistakes a precision corpus must keep finding."""

import optax

LEARNING_RATE = 1e-3


def make_tx():
    return optax.chain(optax.scale_by_adam(), optax.scale(LEARNING_RATE))


def make_double_negated():
    schedule = optax.cosine_decay_schedule(-LEARNING_RATE, 1000)
    return optax.chain(optax.scale_by_adam(), optax.scale_by_schedule(schedule), optax.scale(-1.0))


def train(params, grads):
    tx = make_tx()
    opt_state = tx.init(params)
    updates, opt_state = tx.update(grads, opt_state)
    params = optax.apply_updates(params, updates)
    print(opt_state)
    tx2 = make_double_negated()
    state2 = tx2.init(params)
    tx2.update(grads, state2)
    bad = optax.chain(optax.adamw(LEARNING_RATE), optax.clip_by_global_norm(1.0))
    bad.init(params)
    return params
