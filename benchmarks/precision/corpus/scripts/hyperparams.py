"""Reading the learning rate back for logging: a wrong index, and defensive reads."""

import optax


def make(schedule):
    return optax.chain(
        optax.clip_by_global_norm(1.0),
        optax.inject_hyperparams(optax.adamw)(learning_rate=schedule, weight_decay=0.01),
    )


def make_wrapped(schedule):
    return optax.inject_hyperparams(optax.adamw)(learning_rate=schedule)


def log_lr(params, schedule):
    tx = make(schedule)
    opt_state = tx.init(params)
    lr = opt_state[0].hyperparams["learning_rate"]
    wrapped = make_wrapped(schedule)
    state2 = wrapped.init(params)
    lr2 = state2.hyperparams["learning_rate"]
    if hasattr(opt_state[-1], "hyperparams"):
        lr3 = opt_state[-1].hyperparams["learning_rate"]
    return lr, lr2
