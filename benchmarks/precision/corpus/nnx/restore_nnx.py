"""Restoring an nnx model: nnx.update(model, state) writes the restored arrays into the
model; it is not an optimizer update."""

import optax
import orbax.checkpoint as ocp
from flax import nnx


def restore(model, path):
    checkpointer = ocp.StandardCheckpointer()
    state = checkpointer.restore(path)
    nnx.update(model, state)
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    return model, optimizer
