"""Optimizers assembled from conditional pieces: every piece is part of one chain."""

import optax


def make_optimizer(learning_rate: float, momentum: float = 0.0, clip: float = 0.0, nesterov: bool = False):
    tx = optax.chain(
        optax.clip_by_global_norm(clip) if clip > 0 else optax.identity(),
        optax.trace(decay=momentum, nesterov=nesterov) if momentum else optax.identity(),
        optax.scale(-learning_rate),
    )
    return tx


def make_optimizer_branches(learning_rate: float, use_adam: bool):
    if use_adam:
        direction = optax.scale_by_adam()
    else:
        direction = optax.scale_by_rms()
    return optax.chain(direction, optax.scale_by_learning_rate(learning_rate))


def make_optimizer_list(learning_rate: float, weight_decay: float, clip: float):
    transforms = []
    transforms += [optax.clip_by_global_norm(clip)]
    transforms += [optax.scale_by_adam()]
    if weight_decay:
        transforms.extend([optax.add_decayed_weights(weight_decay)])
    transforms.append(optax.scale_by_learning_rate(learning_rate))
    return optax.chain(*transforms)


def make_named(learning_rate: float):
    parts = {
        "clip": optax.clip_by_global_norm(1.0),
        "adam": optax.scale_by_adam(),
    }
    parts["lr"] = optax.scale_by_learning_rate(learning_rate)
    return optax.named_chain(*parts.items())


def make_named_literal(learning_rate: float):
    return optax.named_chain(**{"adam": optax.scale_by_adam(), "lr": optax.scale_by_learning_rate(learning_rate)})


def make_with_default(learning_rate: float, direction=optax.scale_by_adam()):
    return optax.chain(direction, optax.scale(-learning_rate))


def train(params, grads, learning_rate=1e-3):
    tx = make_optimizer(learning_rate, momentum=0.9, clip=1.0)
    opt_state = tx.init(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state
