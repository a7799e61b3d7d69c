"""A language-model trainer in the shape of the official flax examples: config-driven
values, a chain built piece by piece, warmup + cosine, an orbax CheckpointManager."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
import orbax.checkpoint as ocp
from flax.training import train_state


class TransformerBlock(nn.Module):
    num_heads: int
    emb_dim: int

    @nn.compact
    def __call__(self, x):
        y = nn.LayerNorm()(x)
        y = nn.MultiHeadDotProductAttention(num_heads=self.num_heads)(y, y)
        x = x + y
        y = nn.LayerNorm()(x)
        y = nn.Dense(4 * self.emb_dim)(y)
        return x + nn.Dense(self.emb_dim)(nn.gelu(y))


class TransformerLM(nn.Module):
    vocab_size: int
    num_layers: int
    emb_dim: int
    num_heads: int

    @nn.compact
    def __call__(self, tokens):
        x = nn.Embed(self.vocab_size, self.emb_dim)(tokens)
        for _ in range(self.num_layers):
            x = TransformerBlock(self.num_heads, self.emb_dim)(x)
        return nn.Dense(self.vocab_size)(x)


def create_learning_rate_fn(config):
    warmup = optax.linear_schedule(0.0, config.learning_rate, config.warmup_steps)
    decay = optax.cosine_decay_schedule(config.learning_rate, config.num_train_steps - config.warmup_steps)
    return optax.join_schedules([warmup, decay], [config.warmup_steps])


def create_optimizer(config, learning_rate_fn):
    transforms = []
    if config.grad_clip > 0:
        transforms.append(optax.clip_by_global_norm(config.grad_clip))
    transforms.append(
        optax.adamw(learning_rate_fn, b1=config.b1, b2=config.b2, weight_decay=config.weight_decay)
    )
    return optax.chain(*transforms)


def create_train_state(rng, config):
    model = TransformerLM(config.vocab_size, config.num_layers, config.emb_dim, config.num_heads)
    params = model.init(rng, jnp.ones((1, config.max_len), jnp.int32))["params"]
    learning_rate_fn = create_learning_rate_fn(config)
    tx = create_optimizer(config, learning_rate_fn)
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx), learning_rate_fn


@jax.jit
def train_step(state, batch):
    def loss_fn(params):
        logits = state.apply_fn({"params": params}, batch["inputs"])
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"]).mean()

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    return state.apply_gradients(grads=grads), loss


def train_and_evaluate(config, workdir, train_iter):
    state, _ = create_train_state(jax.random.PRNGKey(config.seed), config)
    manager = ocp.CheckpointManager(workdir, options=ocp.CheckpointManagerOptions(max_to_keep=3))
    for step in range(config.num_train_steps):
        state, loss = train_step(state, next(train_iter))
        if step % config.checkpoint_every == 0:
            manager.save(step, args=ocp.args.StandardSave(state))
    manager.wait_until_finished()
    return state
