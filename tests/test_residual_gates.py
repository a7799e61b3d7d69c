"""Transformer blocks gated shut at initialisation (optax_lint/facts/context/residual_gates.py),
and what OPX201/OPX301 make of them: silent on adaLN-Zero and ReZero blocks, still
speaking on near-misses (random gates, a zero-initialised head, LayerScale's small
non-zero scale, a model with one ungated attention block)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from optax_lint.engine import lint as engine
from optax_lint.facts.context.residual_gates import gated_block, identity_initialised
from optax_lint.facts.module import ModuleFacts

TRAIN = """
    def main(batches):
        model = Model()
        params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 16, 64)))
        tx = optax.adamw(1e-4, weight_decay=0.0)
        opt_state = tx.init(params)
        for batch in batches:
            grads = jax.grad(lambda p: model.apply(p, batch).mean())(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
"""

HEADER = """
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax
"""


def module(blocks: str) -> str:
    model = """
    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            for _ in range(12):
                x = Block()(x)
            return x
    """
    return textwrap.dedent(HEADER) + textwrap.dedent(blocks) + textwrap.dedent(model) + textwrap.dedent(TRAIN)


ADALN_ZERO = """
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            c = nn.Dense(3 * 64, kernel_init=nn.initializers.constant(0.))(x.mean(1))
            shift, scale, gate = jnp.split(c, 3, axis=-1)
            h = nn.LayerNorm()(x) * (1 + scale[:, None]) + shift[:, None]
            return x + gate[:, None] * nn.SelfAttention(num_heads=4)(h)
"""

REZERO = """
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            alpha = self.param("alpha", nn.initializers.zeros, ())
            return x + alpha * nn.SelfAttention(num_heads=4)(x)
"""

RANDOM_GATES = ADALN_ZERO.replace("kernel_init=nn.initializers.constant(0.)", "kernel_init=nn.initializers.lecun_normal()")
NONZERO_BIAS = ADALN_ZERO.replace("constant(0.))", "constant(0.), bias_init=nn.initializers.ones)")
LAYER_SCALE = REZERO.replace("nn.initializers.zeros", "nn.initializers.constant(1e-5)")
ZERO_HEAD = """
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = x + nn.SelfAttention(num_heads=4)(nn.LayerNorm()(x))
            return nn.Dense(10, kernel_init=nn.initializers.zeros)(x)
"""
ONE_UNGATED = REZERO + """
    class CrossBlock(nn.Module):
        @nn.compact
        def __call__(self, x, memory):
            return x + nn.MultiHeadDotProductAttention(num_heads=4)(x, memory)
"""


def facts_of(src: str) -> ModuleFacts:
    return ModuleFacts(cst.parse_module(src), "model.py", text=src)


@pytest.mark.parametrize("blocks", [ADALN_ZERO, REZERO], ids=["adaln-zero", "rezero"])
def test_zero_gated_blocks_are_read(blocks) -> None:
    facts = facts_of(module(blocks))
    block = gated_block(facts, "Block")
    assert block is not None and block.name == "Block"
    assert gated_block(facts, "Model") is None  # the model that stacks the blocks gates nothing itself
    found = identity_initialised(facts, None)
    assert found is not None and found.describe().startswith("Block (model.py:")


@pytest.mark.parametrize("blocks", [RANDOM_GATES, NONZERO_BIAS, LAYER_SCALE, ZERO_HEAD, ONE_UNGATED],
                         ids=["random-gates", "non-zero-bias", "layer-scale", "zero-head", "one-block-ungated"])
def test_near_misses_are_not_identity_initialised(blocks) -> None:
    assert identity_initialised(facts_of(module(blocks)), None) is None


def codes(src: str) -> list[str]:
    run = engine.lint_text(src, "train.py", {"OPX201", "OPX301"})
    assert run.internal_errors == 0
    return sorted(f.code for f in run.findings)


def test_protocol_rules_skip_identity_initialised_transformers() -> None:
    assert codes(module(ADALN_ZERO)) == []
    assert codes(module(REZERO)) == []
    assert codes(module(RANDOM_GATES)) == ["OPX201", "OPX301"]
    assert codes(module(ONE_UNGATED)) == ["OPX201", "OPX301"]


def test_a_declared_long_run_still_warms_up() -> None:
    """Only the Transformer premise drops: a run declared 10K+ steps long warms up whatever its blocks."""
    src = "# optax-lint: context steps=200000\n" + module(ADALN_ZERO)
    assert codes(src) == ["OPX301"]


def test_an_alias_bound_once_at_module_level_counts_and_a_rebound_one_does_not() -> None:
    nnx_block = """
        zero_init = nn.initializers.zeros_init()


        class Block(nn.Module):
            @nn.compact
            def __call__(self, x):
                g = nn.Dense(64, kernel_init=zero_init, bias_init=zero_init)(x.mean(1))
                return x + jnp.expand_dims(g, 1) * nn.SelfAttention(num_heads=4)(x)
    """
    assert identity_initialised(facts_of(module(nnx_block)), None) is not None
    rebound = nnx_block.replace("zero_init = nn.initializers.zeros_init()",
                                "zero_init = nn.initializers.zeros_init()\n        zero_init = nn.initializers.normal()")
    assert identity_initialised(facts_of(module(rebound)), None) is None
