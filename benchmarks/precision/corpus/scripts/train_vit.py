"""A ViT classifier trainer in the shape of many research repos: adamw at a constant
learning rate, no clipping, 100k steps (protocol advice: clip at 1.0, warm up)."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax.training import train_state

NUM_TRAIN_STEPS = 100_000
LEARNING_RATE = 3e-4


class EncoderBlock(nn.Module):
    dim: int
    heads: int

    @nn.compact
    def __call__(self, x):
        y = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads)(y, y)
        y = nn.LayerNorm()(x)
        return x + nn.Dense(self.dim)(nn.gelu(nn.Dense(4 * self.dim)(y)))


class ViT(nn.Module):
    num_classes: int = 10
    dim: int = 192
    depth: int = 6

    @nn.compact
    def __call__(self, images):
        x = nn.Conv(self.dim, (4, 4), strides=(4, 4))(images)
        x = x.reshape(x.shape[0], -1, self.dim)
        for _ in range(self.depth):
            x = EncoderBlock(self.dim, 3)(x)
        return nn.Dense(self.num_classes)(x.mean(axis=1))


def create_state(rng):
    model = ViT()
    params = model.init(rng, jnp.ones((1, 32, 32, 3)))["params"]
    tx = optax.adamw(LEARNING_RATE, weight_decay=0.05)
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)


@jax.jit
def train_step(state, images, labels):
    def loss_fn(params):
        logits = state.apply_fn({"params": params}, images)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    grads = jax.grad(loss_fn)(state.params)
    return state.apply_gradients(grads=grads)


def main(data):
    state = create_state(jax.random.PRNGKey(0))
    for step in range(NUM_TRAIN_STEPS):
        images, labels = next(data)
        state = train_step(state, images, labels)
    return state
