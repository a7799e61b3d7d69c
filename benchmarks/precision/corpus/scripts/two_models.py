"""An MLP trainer whose file also holds an evaluation helper: a reference Transformer
loaded from a hub to score samples. Neither makes the MLP a Transformer or its
training a fine-tuning run."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax.training import train_state
from transformers import FlaxAutoModel

NUM_STEPS = 5_000


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(10)(nn.relu(nn.Dense(256)(x)))


class ReferenceTransformerScorer:
    """Scores generated samples with a pretrained Transformer (evaluation only)."""

    def __init__(self, name="gpt2"):
        self.model = FlaxAutoModel.from_pretrained(name)

    def __call__(self, tokens):
        return self.model(tokens).last_hidden_state.mean()


def score_samples(samples):
    scorer = ReferenceTransformerScorer()
    return [scorer(s) for s in samples]


def create_state(rng):
    model = MLP()
    params = model.init(rng, jnp.ones((1, 784)))["params"]
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))


@jax.jit
def train_step(state, x, y):
    grads = jax.grad(lambda p: optax.softmax_cross_entropy_with_integer_labels(state.apply_fn({"params": p}, x), y).mean())(state.params)
    return state.apply_gradients(grads=grads)


def main(data):
    state = create_state(jax.random.PRNGKey(0))
    for _ in range(NUM_STEPS):
        state = train_step(state, *next(data))
    return state
