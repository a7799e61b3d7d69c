"""Correct code from real-world-patterns that looks like a mistake to a naive rule."""

import functools

import jax
import optax
from big_vision import optax as bv_optax
from flax import nnx


def optimizer_from_config(config):
    # named by a config string: nothing can be known statically
    return getattr(optax, config.optimizer)(config.learning_rate)


def project_optax(config):
    # a project's own module called optax: not optax
    return bv_optax.make(config, params=None, sched_kw={})


def frozen_backbone(learning_rate, backbone_mask, head_mask):
    # masked optimizer whose complement is frozen explicitly
    return optax.chain(
        optax.masked(optax.adamw(learning_rate), head_mask),
        optax.masked(optax.set_to_zero(), backbone_mask),
    )


def freeze_after_alias(learning_rate, frozen_mask):
    # masked(scale(0.0)) after the alias freezes a subset: harmless
    return optax.chain(optax.adam(learning_rate), optax.masked(optax.scale(0.0), frozen_mask))


def vmapped_inside_pmap(loss_fn):
    def per_example(params, x):
        grads = jax.grad(loss_fn)(params, x)
        return jax.lax.pmean(grads, axis_name="examples")

    batched = jax.vmap(per_example, in_axes=(None, 0), axis_name="examples")
    return jax.pmap(batched, axis_name="devices", in_axes=(None, 0))


@functools.partial(jax.jit, static_argnums=(3,))
def jitted_step(params, opt_state, grads, learning_rate):
    tx = optax.adam(learning_rate)  # built once per trace inside a pure factory
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def nnx_step(model, optimizer: nnx.Optimizer, grads):
    optimizer.update(model, grads)  # nnx mutates in place: nothing is discarded
    return model


def export_after_training(params, path):
    import pickle

    with open(path, "wb") as f:
        pickle.dump(params, f)  # once, for evaluation


def train(params, batches, loss_fn, lr=1e-3):
    tx = freeze_after_alias(lr, None)
    opt_state = tx.init(params)
    for batch in batches:
        grads = jax.grad(loss_fn)(params, batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
    tx2 = frozen_backbone(lr, None, None)
    state2 = tx2.init(params)
    export_after_training(params, "/tmp/params.pkl")
    return params, opt_state, state2
