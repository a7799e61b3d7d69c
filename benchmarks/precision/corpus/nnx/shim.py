"""flax's own migration shim: keep the pre-0.11 nnx.Optimizer API by rebinding the name."""

import optax
from flax import nnx

nnx.Optimizer = nnx.ModelAndOptimizer


def train(model, batches):
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3))
    for x, y in batches:
        grads = nnx.grad(lambda m: ((m(x) - y) ** 2).mean())(optimizer.model)
        optimizer.update(grads)
    return optimizer.model
