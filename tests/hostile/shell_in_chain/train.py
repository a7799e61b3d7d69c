"""HOSTILE FIXTURE (tests/test_security.py). Every argument below would run a shell
command if anything evaluated it; optax-lint must only read it. If a file named
PWNED* ever appears, the linter executed user code."""

import os
import subprocess

import jax
import optax

_ = __import__("os").system("touch PWNED_module_level")  # runs only on import


def make_optimizer(cfg):
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=eval("__import__('os').system('touch PWNED_eval') or 1e-3"),
        warmup_steps=subprocess.call(["touch", "PWNED_subprocess"]),
        decay_steps=exec("import os; os.system('touch PWNED_exec')") or 10_000,
    )
    return optax.chain(
        optax.adamw(learning_rate=schedule, weight_decay=os.system("touch PWNED_wd") or 1e-4),
        optax.clip_by_global_norm(__import__("os").system("touch PWNED_clip") or 1.0),
    )


def make_other():
    return optax.chain(
        optax.clip(open("PWNED_open", "w").write("x") or 1.0),
        optax.adam(learning_rate=(lambda: os.system("touch PWNED_lambda"))()),
        optax.add_decayed_weights(1e-4, mask=getattr(os, "system")("touch PWNED_getattr")),
    )


@jax.jit
def train_step(params, opt_state, grads, tx=make_optimizer(None)):
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


class Trainer:
    tx = optax.sgd(learning_rate=__import__("subprocess").run(["touch", "PWNED_class"]).returncode or 0.1)

    def __init_subclass__(cls):
        os.system("touch PWNED_subclass")


if __name__ == "__main__":
    os.system("touch PWNED_main")
