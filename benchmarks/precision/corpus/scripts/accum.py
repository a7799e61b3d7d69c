"""Gradient accumulation with optax.MultiSteps, schedules counted in two ways."""

import optax

TOTAL_STEPS = 10_000
ACCUM = 4
WARMUP = 500


def make_in_micro_steps(peak_lr):
    # counted in micro-batches: the loop below runs TOTAL_STEPS * ACCUM micro-steps
    schedule = optax.warmup_cosine_decay_schedule(0.0, peak_lr, WARMUP * ACCUM, TOTAL_STEPS * ACCUM)
    return optax.MultiSteps(optax.adamw(schedule), every_k_schedule=ACCUM)


def make_in_optimizer_steps(peak_lr):
    schedule = optax.warmup_cosine_decay_schedule(0.0, peak_lr, WARMUP, TOTAL_STEPS)
    return optax.MultiSteps(optax.adamw(schedule), every_k_schedule=ACCUM)


def train(params, batches, grad_fn, peak_lr=3e-4, which="optimizer"):
    tx = make_in_optimizer_steps(peak_lr) if which == "optimizer" else make_in_micro_steps(peak_lr)
    opt_state = tx.init(params)
    for step in range(TOTAL_STEPS * ACCUM):
        grads = grad_fn(params, next(batches))
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
    return params
