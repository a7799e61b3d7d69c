"""Schedules assembled from lists, as in configurable trainers."""

import optax


def make_schedule(config):
    schedules = []
    boundaries = []
    schedules.append(optax.linear_schedule(0.0, config.lr, config.warmup_steps))
    boundaries.append(config.warmup_steps)
    schedules.append(optax.cosine_decay_schedule(config.lr, config.total_steps - config.warmup_steps))
    return optax.join_schedules(schedules, boundaries)


def piecewise(lr):
    pieces = [optax.constant_schedule(lr)]
    pieces.append(optax.constant_schedule(lr / 10))
    pieces.append(optax.constant_schedule(lr / 100))
    return optax.join_schedules(pieces, [1000, 2000])


def wrong_boundaries(lr):
    pieces = [optax.constant_schedule(lr)]
    pieces.append(optax.constant_schedule(lr / 10))
    pieces.append(optax.constant_schedule(lr / 100))
    return optax.join_schedules(pieces, [1000])
