#!/usr/bin/env python3
"""One large generated Python module, for the linear-in-size rows of bench_real.py.

    python benchmarks/make_large.py OUT.py --mb 5 [--optax-every 20] [--seed 0]

The module imports optax at the top, then holds small top-level functions and classes
(numeric helpers, config dictionaries, data tables) until it reaches the size asked
for. Every `--optax-every`-th function builds an optimizer (a clipped adamw with a
warmup-cosine schedule; one in three of those clips after the optimizer, a finding);
`--optax-every 1` makes every function build one, the worst case for a linter that
parses only what the prefilter flags. The same arguments give the same bytes.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

HEADER = '''"""Generated: a large module of helpers, configs and optimizer factories."""

import math

import jax.numpy as jnp
import optax

'''


def _helper(i: int, rnd: random.Random) -> str:
    a, b = rnd.randint(1, 9), rnd.randint(2, 99)
    return f'''

def scale_{i}(x, factor={a}.0):
    """Scale and shift a value (helper {i})."""
    y = x * factor + {b}
    if y > {b * 10}:
        y = math.sqrt(y)
    return jnp.asarray(y)
'''


def _config(i: int, rnd: random.Random) -> str:
    rows = ",\n".join(f'    "key_{i}_{k}": {rnd.randint(0, 10_000)}' for k in range(6))
    return f'''

CONFIG_{i} = {{
{rows},
}}
'''


def _klass(i: int, rnd: random.Random) -> str:
    return f'''

class Block{i}:
    """A small stateful helper."""

    def __init__(self, width={rnd.randint(8, 512)}):
        self.width = width

    def __call__(self, x):
        return x[..., : self.width]
'''


def _optimizer(i: int, rnd: random.Random) -> str:
    steps = rnd.choice([1000, 5000, 20000])
    clip_first = i % 3 != 0
    clip = "optax.clip_by_global_norm(1.0)"
    adam = "optax.adamw(learning_rate=schedule, weight_decay=1e-4)"
    parts = f"{clip},\n        {adam}," if clip_first else f"{adam},\n        {clip},"
    return f'''

def make_optimizer_{i}(peak_lr={rnd.choice(["1e-3", "3e-4", "5e-4"])}):
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=peak_lr, warmup_steps={steps // 20}, decay_steps={steps},
    )
    return optax.chain(
        {parts}
    )
'''


def generate(size_bytes: int, optax_every: int = 20, seed: int = 0) -> str:
    rnd = random.Random(seed)
    parts = [HEADER]
    total = len(HEADER)
    i = 0
    makers = (_helper, _config, _klass)
    while total < size_bytes:
        if optax_every and i % optax_every == optax_every - 1:
            chunk = _optimizer(i, rnd)
        else:
            chunk = makers[i % len(makers)](i, rnd)
        parts.append(chunk)
        total += len(chunk)
        i += 1
    return "".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=1.0, help="size in MB (10**6 bytes)")
    ap.add_argument("--optax-every", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    Path(args.out).write_text(generate(int(args.mb * 1_000_000), args.optax_every, args.seed), encoding="utf-8")


if __name__ == "__main__":
    main()
