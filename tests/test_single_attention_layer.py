"""A Transformer with a single attention layer (optax_lint/facts/context/depth.py), and
what OPX201/OPX301 make of it: silent on one block built once, still speaking whenever
the count is in doubt (a loop or comprehension, nn.scan, a second construction, two
attention layers, a declared architecture)."""

from __future__ import annotations

import textwrap

import pytest

from optax_lint.engine import lint as engine

HEADER = """
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax
"""

TRAIN = """
    def main(batches):
        model = Model()
        params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 16, 64)))
        tx = optax.adam(1e-4)
        opt_state = tx.init(params)
        for batch in batches:
            grads = jax.grad(lambda p: model.apply(p, batch).mean())(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
"""

BLOCK = """
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = x + nn.SelfAttention(num_heads=4)(nn.LayerNorm()(x))
            return x + nn.Dense(64)(nn.gelu(nn.Dense(256)(nn.LayerNorm()(x))))
"""

ONE_BLOCK = """
    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(Block()(nn.Dense(64)(x)).mean(1))
"""

LOOPED = """
    class Model(nn.Module):
        depth: int = 1

        @nn.compact
        def __call__(self, x):
            for _ in range(self.depth):
                x = Block()(x)
            return x
"""

COMPREHENSION = """
    class Model(nn.Module):
        def setup(self):
            self.blocks = [Block() for _ in range(2)]

        def __call__(self, x):
            return self.blocks[1](self.blocks[0](x))
"""

SHARED = """
    class Model(nn.Module):
        def setup(self):
            self.block = Block()

        def __call__(self, x):
            for _ in range(6):
                x = self.block(x)
            return x
"""

SCANNED = """
    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            x, _ = nn.scan(Block, variable_broadcast="params", length=6)()(x, None)
            return x
"""

TWO_BLOCKS = """
    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            return Block()(Block()(x))
"""

CROSS = """
    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = Block()(x)
            return x + nn.MultiHeadDotProductAttention(num_heads=4)(x, x)
"""


def codes(src: str) -> list[str]:
    run = engine.lint_text(src, "train.py", {"OPX201", "OPX301"})
    assert run.internal_errors == 0
    return sorted(f.code for f in run.findings)


def module(model: str, pragma: str = "") -> str:
    return pragma + textwrap.dedent(HEADER) + textwrap.dedent(BLOCK) + textwrap.dedent(model) + textwrap.dedent(TRAIN)


def test_one_attention_layer_is_no_stack() -> None:
    assert codes(module(ONE_BLOCK)) == []


@pytest.mark.parametrize("model", [LOOPED, COMPREHENSION, SHARED, SCANNED, TWO_BLOCKS, CROSS],
                         ids=["loop", "comprehension", "shared-weights-loop", "nn.scan", "two-blocks", "block-and-cross-attention"])
def test_a_stack_or_a_count_in_doubt_keeps_the_premise(model) -> None:
    assert codes(module(model)) == ["OPX201", "OPX301"]


def test_a_declared_transformer_is_the_users_word() -> None:
    assert codes(module(ONE_BLOCK, "# optax-lint: context arch=transformer\n")) == ["OPX201", "OPX301"]


def test_a_declared_long_run_still_warms_up() -> None:
    """Only the Transformer premise drops: a run declared 10K+ steps long warms up."""
    assert codes(module(ONE_BLOCK, "# optax-lint: context steps=200000\n")) == ["OPX301"]
