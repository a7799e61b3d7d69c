"""A user trainer that still uses older library APIs."""

import jax
import optax
from flax import nnx
from flax.training import checkpoints
from optax._src.alias import adamw


def make_optimizer(model):
    return nnx.Optimizer(model, adamw(1e-3))


def replicate(tree):
    return jax.device_put_replicated(tree, jax.local_devices())


def save(workdir, state, step):
    checkpoints.save_checkpoint(workdir, state, step)


AXIS_NAMES = ("_device_put_sharded", "data")


def clip_like_before():
    return optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))
