"""Library-style building blocks: transforms that are parts of an optimizer, never a
whole one. Each returns a GradientTransformation that a caller chains with a
learning-rate step; none of them is used as the optimizer in this module."""

from typing import Optional

import optax


def scale_by_adam_with_clip(b1: float = 0.9, b2: float = 0.999, clip: float = 1.0):
    """Adam direction, clipped per block: a preconditioner, not an optimizer."""
    return optax.chain(
        optax.scale_by_adam(b1=b1, b2=b2),
        optax.clip(clip),
    )


def momentum_direction(decay: float = 0.9, nesterov: bool = False):
    return optax.trace(decay=decay, nesterov=nesterov)


def preconditioner(kind: str, eps: float = 1e-8):
    if kind == "adam":
        base = optax.scale_by_adam(eps=eps)
    else:
        base = optax.scale_by_rms(eps=eps)
    return optax.chain(base, optax.scale_by_trust_ratio())


def lion_direction(b1: float = 0.9, b2: float = 0.99):
    return optax.scale_by_lion(b1=b1, b2=b2)


def stable_direction(eps: float = 1e-8, max_rms: Optional[float] = 1.0):
    parts = [optax.scale_by_adam(eps=eps)]
    if max_rms is not None:
        parts.append(optax.clip_by_block_rms(max_rms))
    return optax.chain(*parts)


class DirectionFactory:
    """A registry of update directions, chained with a learning rate by its caller."""

    def __init__(self, decay: float = 0.9):
        self.decay = decay

    def build(self):
        return optax.chain(optax.scale_by_rms(decay=self.decay), optax.scale_by_trust_ratio())
