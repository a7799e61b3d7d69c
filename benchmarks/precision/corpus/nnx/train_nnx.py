"""flax.nnx training: in-place updates, nnx.update of a model's state, a re-bound
ModelAndOptimizer."""

import optax
from flax import nnx


class MLP(nnx.Module):
    def __init__(self, rngs):
        self.l1 = nnx.Linear(4, 16, rngs=rngs)
        self.l2 = nnx.Linear(16, 2, rngs=rngs)

    def __call__(self, x):
        return self.l2(nnx.relu(self.l1(x)))


def train(batches, restored_state=None):
    model = MLP(nnx.Rngs(0))
    if restored_state is not None:
        nnx.update(model, restored_state)
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer, x, y):
        def loss_fn(model):
            return ((model(x) - y) ** 2).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    for x, y in batches:
        train_step(model, optimizer, x, y)
    return model


MAO = nnx.ModelAndOptimizer


def train_wrapped(batches):
    model = MLP(nnx.Rngs(0))
    state = MAO(model, optax.adamw(1e-3))
    for x, y in batches:
        grads = nnx.grad(lambda m: ((m(x) - y) ** 2).mean())(state.model)
        state.update(grads)
    return state
