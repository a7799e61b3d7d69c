"""The library facts the weight-decay mask rules (OPX108-OPX113) rest on, checked
against the installed flax and optax, so a change in either is noticed.

Every claim is measured twice where possible: the linter's static reading of a
source text (parameter names, mask values) and the real objects jax builds from the
same text (test code, run here on purpose; the linter itself never runs user code).
"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

jax = pytest.importorskip("jax")
optax = pytest.importorskip("optax")
flax = pytest.importorskip("flax")

import jax.numpy as jnp  # noqa: E402
from flax import traverse_util  # noqa: E402

from optax_lint.facts.masks import expr as mx  # noqa: E402
from optax_lint.facts.module import ModuleFacts  # noqa: E402

# Its module fixtures are costly: one xdist worker computes them once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("masks_runtime")

LINEN_MODEL = textwrap.dedent(
    '''
    import flax.linen as nn
    import jax
    import optax
    from flax import traverse_util


    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            y = nn.LayerNorm()(x)
            y = nn.MultiHeadDotProductAttention(num_heads=2)(y, y)
            return x + nn.Dense(x.shape[-1], use_bias=False)(y), None


    class Model(nn.Module):
        @nn.compact
        def __call__(self, tokens):
            x = nn.Embed(32, 8)(tokens)
            x, _ = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=3)()(x, None)
            x = nn.LayerNorm(name="ln_f")(x)
            return nn.Dense(32, name="head")(x)
    '''
)

MASKS = {
    "flatten_tuple_keys": '''
def mask(params):
    flat = traverse_util.flatten_dict(params)
    return traverse_util.unflatten_dict({k: not any(n in k for n in ("bias", "LayerNorm.weight")) for k in flat})
''',
    "flatten_joined_keys": '''
def mask(params):
    flat = traverse_util.flatten_dict(params, sep="/")
    return traverse_util.unflatten_dict({k: not (k.endswith("bias") or "LayerNorm" in k) for k in flat}, sep="/")
''',
    "path_aware_map_last": '''
def mask(params):
    return traverse_util.path_aware_map(lambda path, _: path[-1] not in ("bias", "scale"), params)
''',
    "tree_map_with_path_strings": '''
def mask(params):
    return jax.tree_util.tree_map_with_path(lambda path, _: "bias" not in path, params)
''',
    "tree_map_with_path_key": '''
def mask(params):
    return jax.tree_util.tree_map_with_path(lambda path, _: path[-1].key != "bias" and "scale" not in jax.tree_util.keystr(path), params)
''',
    "constant_list_comprehension": '''
def mask(params):
    flat_params = traverse_util.flatten_dict(params)
    norms = [(name, "scale") for name in ["ln_f", "LayerNorm_0"]]
    return traverse_util.unflatten_dict({path: (path[-1] != "bias" and path[-2:] not in norms) for path in flat_params})
''',
    "jnp_ndim": '''
def mask(params):
    return jax.tree_util.tree_map(lambda x: jax.numpy.ndim(x) != 1, params)
''',
    "ndim": '''
def mask(params):
    return jax.tree.map(lambda x: x.ndim > 1, params)
''',
}


def _facts(text: str) -> ModuleFacts:
    return ModuleFacts(cst.parse_module(text), "model.py", text=text)


@pytest.fixture(scope="module")
def linen_params():
    namespace: dict = {}
    exec(compile(LINEN_MODEL, "model.py", "exec"), namespace)  # the test's own model, not user code
    variables = namespace["Model"]().init(jax.random.key(0), jnp.zeros((2, 4), jnp.int32))
    return namespace, variables["params"]


def test_linen_init_returns_plain_dicts_and_flax_names(linen_params) -> None:
    _, params = linen_params
    assert type(params) is dict  # FrozenDict only when the code freezes it (OPX111)
    assert set(params) == {"Embed_0", "ScanBlock_0", "ln_f", "head"}
    assert set(params["ScanBlock_0"]) == {"LayerNorm_0", "MultiHeadDotProductAttention_0", "Dense_0"}


def test_static_param_tree_matches_the_real_params(linen_params) -> None:
    _, params = linen_params
    tree = _facts(LINEN_MODEL).model_tree
    assert tree is not None and tree.complete and tree.scanned
    real = {path: leaf.ndim for path, leaf in traverse_util.flatten_dict(params).items()}
    static = {leaf.names: len(leaf.shape) for leaf in tree.leaves}
    assert static == real  # names, use_bias=False, the scan axis and attention ranks


def test_stacking_sites_are_found() -> None:
    assert [s.how for s in _facts(LINEN_MODEL).stacked_layers] == ["nn.scan(..., variable_axes={'params': ...})"]


def test_flatten_dict_and_path_aware_map_paths_are_tuples_of_names() -> None:
    tree = {"LayerNorm_0": {"scale": jnp.ones(2)}}
    assert list(traverse_util.flatten_dict(tree)) == [("LayerNorm_0", "scale")]
    assert list(traverse_util.flatten_dict(tree, sep=".")) == ["LayerNorm_0.scale"]
    seen = []
    traverse_util.path_aware_map(lambda path, x: seen.append(path), tree)
    assert seen == [("LayerNorm_0", "scale")]


def test_tree_map_with_path_gives_key_entries_like_the_emulation() -> None:
    seen = []
    jax.tree_util.tree_map_with_path(lambda path, x: seen.append(path), {"a": {"bias": 1.0}})
    (path,) = seen
    assert "bias" not in path and path[-1].key == "bias"
    emulated = mx.path_value(("a", "bias"), mx.KEYS)
    assert jax.tree_util.keystr(path) == "".join(str(k) for k in emulated)


@pytest.mark.parametrize("name", sorted(MASKS))
def test_static_mask_values_equal_the_real_mask(linen_params, name: str) -> None:
    namespace, params = linen_params
    source = LINEN_MODEL + MASKS[name] + "\ntx = optax.adamw(1e-3, weight_decay=0.1, mask=mask)\n"
    scope: dict = {}
    exec(compile(source, "model.py", "exec"), scope)
    real = traverse_util.flatten_dict(scope["mask"](params))
    facts = _facts(source)
    (site,) = facts.mask_sites
    fn = site.function(facts)
    assert fn is not None, site.why_not()
    static = {leaf.names: fn.value(leaf.names, leaf.shape) for leaf in facts.model_tree.leaves}
    assert static == {k: bool(v) for k, v in real.items()}


def test_ndim_mask_decays_scanned_norms(linen_params) -> None:
    scope: dict = {}
    exec(compile(LINEN_MODEL + MASKS["ndim"], "model.py", "exec"), scope)
    mask = scope["mask"](linen_params[1])
    assert mask["ScanBlock_0"]["LayerNorm_0"]["scale"] is True  # the jaxformer#28 effect (OPX110)
    assert mask["ln_f"]["scale"] is False


def test_nnx_vmap_stacks_params_and_optimizer_passes_a_state() -> None:
    from flax import nnx

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.norm = nnx.LayerNorm(4, rngs=rngs)

    @nnx.split_rngs(splits=3)
    @nnx.vmap(in_axes=(0,), out_axes=0)
    def create(rngs):
        return Block(rngs)

    class Model(nnx.Module):
        def __init__(self, rngs):
            self.blocks = create(rngs)
            self.head = nnx.Linear(4, 2, rngs=rngs)

    model = Model(nnx.Rngs(0))
    assert nnx.state(model, nnx.Param)["blocks"]["norm"]["scale"][...].shape == (3, 4)
    seen = []

    def mask(params):
        seen.append(type(params).__name__)
        return jax.tree.map(lambda x: x.ndim > 1, params)

    nnx.Optimizer(model, optax.adamw(1e-3, mask=mask), wrt=nnx.Param)
    assert seen == ["State"]
    labels = {"blocks": "frozen", "head": "train"}
    with pytest.raises(ValueError, match="pytree structure"):
        nnx.Optimizer(model, optax.multi_transform({"train": optax.adam(1e-3), "frozen": optax.set_to_zero()}, labels), wrt=nnx.Param)


def test_frozen_params_with_plain_dict_labels_raise() -> None:
    params = flax.core.freeze({"a": {"w": jnp.ones(2)}, "b": {"w": jnp.ones(2)}})
    tx = optax.multi_transform({"t": optax.adam(1e-3), "f": optax.set_to_zero()}, {"a": {"w": "t"}, "b": {"w": "f"}})
    with pytest.raises(ValueError, match="pytree structure"):
        tx.update(params, tx.init(params), params)
    masked = optax.masked(optax.add_decayed_weights(1e-4), {"a": {"w": True}, "b": {"w": False}})
    with pytest.raises(ValueError, match="pytree structure"):
        masked.update(params, masked.init(params), params)
    missing = optax.multi_transform({"t": optax.adam(1e-3), "f": optax.set_to_zero()}, {"a": {"w": "t"}})
    with pytest.raises(ValueError, match="pytree structure"):
        missing.init(dict(params))


def test_clip_before_partition_counts_frozen_gradients() -> None:
    grads = {"a": jnp.array([3.0, 4.0]), "b": jnp.array([300.0, 400.0])}
    labels = {"a": "t", "b": "f"}
    before = optax.chain(optax.clip_by_global_norm(1.0), optax.multi_transform({"t": optax.sgd(1.0), "f": optax.set_to_zero()}, labels))
    inside = optax.multi_transform({"t": optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(1.0)), "f": optax.set_to_zero()}, labels)
    u_before, _ = before.update(grads, before.init(grads))
    u_inside, _ = inside.update(grads, inside.init(grads))
    assert jnp.allclose(u_inside["a"], jnp.array([-0.6, -0.8]))
    assert jnp.allclose(u_before["a"], jnp.array([-0.006, -0.008]), atol=1e-5)


def _one_step(tx, p):
    updates, _ = tx.update(2 * p, tx.init(p))  # the gradient of p**2
    return optax.apply_updates(p, updates)


def test_negative_rate_to_an_alias_ascends_and_a_hand_built_chain_descends() -> None:
    schedule = optax.cosine_decay_schedule(-0.1, decay_steps=10)
    p = jnp.array(1.0)
    assert _one_step(optax.adam(learning_rate=schedule), p) > p  # OPX113: -(-lr) climbs
    assert _one_step(optax.sgd(-0.1), p) > p
    assert _one_step(optax.chain(optax.scale_by_adam(), optax.scale_by_schedule(schedule)), p) < p  # silent: correct
