"""A small Flax Transformer language model trained with Optax.

This script carries the kind of silent mistakes optax-lint exists to catch:
run `optax-lint examples/train_transformer.py` to see them, and
`optax-lint examples/train_transformer.py --diff` to see the safe fixes.
"""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training import train_state

VOCAB = 256
WIDTH = 128
LAYERS = 2
HEADS = 4
SEQ_LEN = 64
BATCH = 32
NUM_TRAIN_STEPS = 20_000
WARMUP_STEPS = 1_000
PEAK_LR = 3e-4
WEIGHT_DECAY = 0.1


class Block(nn.Module):
    width: int
    heads: int

    @nn.compact
    def __call__(self, x):
        y = nn.LayerNorm()(x)
        y = nn.SelfAttention(num_heads=self.heads)(y)
        x = x + y
        y = nn.LayerNorm()(x)
        y = nn.Dense(4 * self.width)(y)
        y = nn.gelu(y)
        return x + nn.Dense(self.width)(y)


class TransformerLM(nn.Module):
    vocab: int = VOCAB
    width: int = WIDTH
    layers: int = LAYERS
    heads: int = HEADS

    @nn.compact
    def __call__(self, tokens):
        x = nn.Embed(self.vocab, self.width)(tokens)
        for _ in range(self.layers):
            x = Block(self.width, self.heads)(x)
        return nn.Dense(self.vocab)(nn.LayerNorm()(x))


def make_optimizer():
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=PEAK_LR,
        warmup_steps=WARMUP_STEPS,
        decay_steps=NUM_TRAIN_STEPS,
        end_value=PEAK_LR * 0.1,
    )
    return optax.chain(
        optax.adamw(schedule, WEIGHT_DECAY),  # the decay lands in b1
        optax.clip_by_global_norm(1.0),  # clips updates, not gradients
    )


def create_state(rng):
    model = TransformerLM()
    params = model.init(rng, jnp.zeros((1, SEQ_LEN), jnp.int32))["params"]
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=make_optimizer())


@functools.partial(jax.jit, donate_argnums=0)
def train_step(state, batch):
    def loss_fn(params):
        logits = state.apply_fn({"params": params}, batch[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch[:, 1:]).mean()

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    return state.apply_gradients(grads=grads), loss


def main():
    rng = np.random.default_rng(0)
    state = create_state(jax.random.PRNGKey(0))
    for step in range(NUM_TRAIN_STEPS):
        batch = jnp.asarray(rng.integers(0, VOCAB, size=(BATCH, SEQ_LEN + 1)))
        state, loss = train_step(state, batch)
        if step % 1000 == 0:
            print(f"step {step}: loss {float(loss):.3f}")


if __name__ == "__main__":
    main()
