import optax

tx = optax.chain(optax.adamw(1e-3), optax.clip_by_global_norm(1.0))
