"""HOSTILE FIXTURE: a training script whose run context lives in modules that run
commands at import (train_config.py, configs/default.py, models.py)."""

from absl import app
import jax
import jax.numpy as jnp
from ml_collections import config_flags
import optax

import models
from train_config import LEARNING_RATE, NUM_TRAIN_STEPS, WARMUP_STEPS

_CONFIG = config_flags.DEFINE_config_file("config", "configs/default.py", "Training configuration.")


def make_optimizer():
  schedule = optax.warmup_cosine_decay_schedule(
      init_value=0.0, peak_value=LEARNING_RATE, warmup_steps=WARMUP_STEPS, decay_steps=NUM_TRAIN_STEPS
  )
  return optax.chain(
      optax.adamw(learning_rate=schedule, weight_decay=1e-4),
      optax.clip_by_global_norm(1.0),
  )


def main(_):
  config = _CONFIG.value
  model = models.MLP()
  params = model.init(jax.random.PRNGKey(0), jnp.ones((1, 8)))
  tx = make_optimizer()
  opt_state = tx.init(params)
  for step in range(config.num_train_steps):
    grads = jax.grad(lambda p: jnp.mean(model.apply(p, jnp.ones((4, 8))) ** 2))(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)


if __name__ == "__main__":
  app.run(main)
