"""Aliases, in optax's own shape: each builds its chain from building blocks."""

from optax._src import base
from optax._src import transform
from optax._src import combine


def adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8):
    return combine.chain(
        transform.scale_by_adam(b1=b1, b2=b2, eps=eps),
        transform.scale_by_learning_rate(learning_rate),
    )


def adamw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-4, mask=None):
    return combine.chain(
        transform.scale_by_adam(b1=b1, b2=b2, eps=eps),
        transform.add_decayed_weights(weight_decay, mask),
        transform.scale_by_learning_rate(learning_rate),
    )


def sgd(learning_rate, momentum=None, nesterov=False):
    return combine.chain(
        (transform.trace(decay=momentum, nesterov=nesterov) if momentum is not None else base.identity()),
        transform.scale_by_learning_rate(learning_rate),
    )


def lion_direction(b1=0.9, b2=0.99):
    return transform.scale_by_lion(b1=b1, b2=b2)
