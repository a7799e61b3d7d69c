"""A contrib optimizer in optax's shape: a direction chained with the learning rate."""

import optax
from optax._src import alias
from optax._src import combine
from optax._src import transform


def scale_by_muon(beta=0.95):
    return transform.trace(decay=beta, nesterov=True)


def muon(learning_rate, beta=0.95, weight_decay=0.0):
    return combine.chain(
        scale_by_muon(beta),
        transform.add_decayed_weights(weight_decay),
        transform.scale_by_learning_rate(learning_rate),
    )


def adam_fallback(learning_rate):
    return alias.adam(learning_rate)


def clipped(learning_rate):
    return optax.chain(optax.clip_by_global_norm(1.0), optax.adam(learning_rate))


def projected(base_optimizer=None, rank=4):
    """A wrapper in GaLore's shape: it delegates to a base direction."""
    if base_optimizer is None:
        base_optimizer = transform.scale_by_adam()

    def init_fn(params):
        return base_optimizer.init(params)

    def update_fn(updates, state, params=None):
        return base_optimizer.update(updates, state, params)

    return init_fn, update_fn
