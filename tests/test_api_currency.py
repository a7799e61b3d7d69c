"""API currency (OPX701-OPX704): the table against the installed libraries, every
claimed behaviour re-run, and the extraction (imports resolved, never raw text).

Sections:
(a) rules/api_currency.toml equals a fresh generation (a library upgrade shows up);
(b) every removed/deprecated claim, observed in a fresh interpreter (jax caches its
    module __getattr__, so an earlier access in this process would hide the warning);
(c) every fix is equivalent: same object, or the same numbers from a real run;
(d) nnx.Optimizer's pre-0.11 forms on the installed flax;
(e) shard_map: jax.experimental's and jax.shard_map agree on 4 fake CPU devices
    (run in (b)'s interpreter);
(f) linting: matching through imports, severities, fixes, near-misses.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import tomllib
import warnings
from pathlib import Path
from typing import Any

import pytest

from optax_lint.core.diagnostics import Severity
from optax_lint.engine import lint as engine

# Its module fixtures are costly: one xdist worker computes them once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("api_currency")

REPO = Path(__file__).resolve().parent.parent
TABLE_PATH = REPO / "rules" / "api_currency.toml"
TABLE = tomllib.loads(TABLE_PATH.read_text(encoding="utf-8"))
OPTAX_API = tomllib.loads((REPO / "rules" / "optax_api.toml").read_text(encoding="utf-8"))
CODES = {"OPX701", "OPX702", "OPX703", "OPX704"}


def _libraries() -> tuple[Any, Any, Any]:
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    flax = pytest.importorskip("flax")
    return optax, jax, flax


@functools.lru_cache(maxsize=1)
def _load_generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_api_currency", REPO / "tools" / "gen_api_currency.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _resolve(path: str) -> Any:
    return _load_generator().resolve(path)


def lint(text: str, codes: set[str] = CODES):
    return engine.lint_text(textwrap.dedent(text), "train.py", codes).findings


def fix(text: str, codes: set[str] = CODES, unsafe: bool = False) -> str:
    return engine.fix_text(textwrap.dedent(text), "train.py", codes, unsafe=unsafe).text


# --- (a) freshness -------------------------------------------------------------------------

def test_committed_table_matches_installed_libraries() -> None:
    _libraries()
    gen = _load_generator()
    fresh = gen.generate()
    assert fresh == TABLE_PATH.read_text(encoding="utf-8"), (
        "rules/api_currency.toml is stale: run .venv/bin/python tools/gen_api_currency.py")


def test_table_records_installed_versions() -> None:
    optax, jax, flax = _libraries()
    import importlib.metadata

    versions = TABLE["versions"]
    assert versions["optax"] == optax.__version__
    assert versions["jax"] == jax.__version__
    assert versions["flax"] == flax.__version__
    assert versions["orbax-checkpoint"] == importlib.metadata.version("orbax-checkpoint")


def test_no_row_duplicates_optax_api_deprecations() -> None:
    deprecated = {f"optax.{k}" for k in OPTAX_API["deprecated"]}
    for path, row in TABLE["names"].items():
        if path in deprecated:
            assert row.get("source") == "optax_api", path  # only a call recipe is added


# --- (b) claims, observed in a fresh interpreter ------------------------------------------------

_OBSERVE = r"""
import importlib, json, sys, warnings
sys.path.insert(0, sys.argv[2])
from gen_api_currency import resolve, Missing
import jax, jax.numpy as jnp, optax, optax.contrib, flax, flax.jax_utils
ns = {"optax": optax, "jax": jax, "jnp": jnp, "flax": flax}
def forget_accesses():
    # jax's module __getattr__ is functools.cache'd: it warns on the first access only.
    for module in list(sys.modules.values()):
        getter = getattr(module, "__getattr__", None)
        if hasattr(getter, "cache_clear"):
            getter.cache_clear()
statements = {
    "from jax.experimental.shard_map import shard_map": None,
    "from jax import device_put_replicated": None,
    "from jax import device_put_sharded": None,
    "from flax import optim": None,
    "import flax.optim": None,
    "import jax.experimental.maps": None,
    "from optax._src.clipping import clip_by_global_norm": None,
    "from optax import additive_weight_decay": None,
}
for statement in statements:
    forget_accesses()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            exec(statement, {})
            result = "ok"
        except Exception as e:
            result = type(e).__name__
    statements[statement] = [result, any(issubclass(w.category, DeprecationWarning) for w in caught)]
out = {}
for path, kind, probe in json.loads(sys.argv[1]):
    forget_accesses()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if kind == "module":
                importlib.import_module(path)
            obj = resolve(path)
            if probe.startswith("call:"):
                try:
                    eval(probe[5:], dict(ns))
                except Exception:
                    pass
            result = "ok"
        except Missing as m:
            result = type(m.exc).__name__
        except ImportError as e:
            result = type(e).__name__
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    out[path] = [result, bool(deprecations)]
# shard_map: the experimental function and its rewrite, on 4 fake CPU devices.
from jax.sharding import NamedSharding, PartitionSpec as P

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from jax.experimental.shard_map import shard_map as old_shard_map
mesh = jax.make_mesh((4,), ("data",))
x = jax.device_put(jnp.arange(16.0).reshape(8, 2), NamedSharding(mesh, P("data")))
w = jnp.array([0.5, -1.0])
def grads(w, x):
    return jax.lax.pmean(jax.grad(lambda w: jnp.mean((x @ w) ** 2))(w), "data")
same = []
for check in (True, False):
    a = jax.jit(old_shard_map(grads, mesh, (P(), P("data")), P(), check_rep=check))(w, x).block_until_ready()
    b = jax.jit(jax.shard_map(grads, mesh=mesh, in_specs=(P(), P("data")), out_specs=P(),
                              check_vma=check))(w, x).block_until_ready()
    same.append(bool(jnp.allclose(a, b)))
print(json.dumps({"rows": out, "statements": statements, "shard_map": same}))
"""


@pytest.fixture(scope="module")
def observed() -> dict:
    _libraries()
    gen = _load_generator()
    rows = [(p, r.get("kind", "name"), r.get("probe", "access")) for p, r in gen.ROWS.items()]
    rows += [(f"optax.{k}", "name", "access") for k in OPTAX_API["deprecated"]]
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    proc = subprocess.run(
        [sys.executable, "-c", _OBSERVE, json.dumps(rows), str(REPO / "tools")],
        capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_removed_name_raises(observed) -> None:
    for path, row in TABLE["names"].items():
        if row.get("status") != "removed":
            continue
        result, _ = observed["rows"][path]
        assert result == row["observed"].split(":")[0], (path, result)
        assert result in ("AttributeError", "ModuleNotFoundError"), path


def test_every_deprecated_name_warns(observed) -> None:
    for path, row in TABLE["names"].items():
        if row.get("status") != "deprecated" or row.get("trigger") == "doc":
            continue
        result, warned = observed["rows"][path]
        assert result == "ok" and warned, (path, result, warned)


def test_optax_api_deprecations_behave_as_recorded(observed) -> None:
    for key, row in OPTAX_API["deprecated"].items():
        result, warned = observed["rows"][f"optax.{key}"]
        if row["removed"]:
            assert result == "AttributeError", key
        else:
            assert result == "ok" and warned, key


def test_import_statements(observed) -> None:
    statements = observed["statements"]
    assert statements["from jax.experimental.shard_map import shard_map"] == ["ok", True]
    assert statements["from jax import device_put_replicated"][0] == "ImportError"
    assert statements["from jax import device_put_sharded"][0] == "ImportError"
    assert statements["from flax import optim"][0] == "ImportError"
    assert statements["import flax.optim"][0] == "ModuleNotFoundError"
    assert statements["import jax.experimental.maps"][0] == "ModuleNotFoundError"
    assert statements["from optax._src.clipping import clip_by_global_norm"][0] == "ModuleNotFoundError"
    assert statements["from optax import additive_weight_decay"][0] == "ImportError"


def test_deprecated_keywords_warn() -> None:
    optax, jax, _ = _libraries()
    for path, row in TABLE["arguments"].items():
        old = next(iter(row["rename"]))
        func = _resolve(path)
        args = {"optax.add_noise": (0.01, 0.55), "optax.noisy_sgd": (0.1,),
                "optax.contrib.differentially_private_aggregate": (1.0, 0.1)}[path]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            func(*args, **{old: 0})
        assert any(issubclass(w.category, DeprecationWarning) for w in caught), path


def test_inject_hyperparams_state_isinstance_is_false() -> None:
    optax, jax, _ = _libraries()
    state = optax.inject_hyperparams(optax.sgd)(learning_rate=0.1).init({"w": jax.numpy.ones(2)})
    assert isinstance(state, optax.InjectStatefulHyperparamsState)
    assert not isinstance(state, optax.InjectHyperparamsState)


# --- (c) fixes are equivalent -------------------------------------------------------------------

def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def test_same_object_renames() -> None:
    _libraries()
    for key, row in OPTAX_API["deprecated"].items():
        if row["same_as"]:
            assert _quiet(_resolve, f"optax.{key}") is _resolve(f"optax.{row['same_as']}"), key
    assert TABLE["names"]["optax.additive_weight_decay"]["replacement"] == "optax.add_decayed_weights"


def test_private_paths_are_the_public_objects() -> None:
    _libraries()
    for private, public in TABLE["private"].items():
        assert _quiet(_resolve, private) is _quiet(_resolve, public), private


def test_add_decayed_weights_is_the_old_additive_weight_decay() -> None:
    """optax 0.1 defined additive_weight_decay as updates + weight_decay * params."""
    optax, jax, _ = _libraries()
    jnp = jax.numpy
    g, p = {"w": jnp.array([1.0, -2.0])}, {"w": jnp.array([3.0, 4.0])}
    tx = optax.add_decayed_weights(0.1)
    updates, _ = tx.update(g, tx.init(p), p)
    assert jnp.allclose(updates["w"], g["w"] + 0.1 * p["w"])
    assert isinstance(tx.init(p), optax.AddDecayedWeightsState)


def test_call_rewrites_compute_the_same() -> None:
    optax, jax, _ = _libraries()
    jnp = jax.numpy
    tree = {"a": jnp.array([3.0, -4.0]), "b": jnp.array([[1.0, -2.0], [0.5, 0.0]])}
    otu = optax.tree_utils
    l1, l2, linf = (_quiet(getattr, otu, n) for n in ("tree_l1_norm", "tree_l2_norm", "tree_linf_norm"))
    assert jnp.allclose(_quiet(optax.global_norm, tree), optax.tree.norm(tree))
    assert jnp.allclose(_quiet(l2, tree), otu.tree_norm(tree))
    assert jnp.allclose(_quiet(l2, tree, squared=True), otu.tree_norm(tree, squared=True))
    assert jnp.allclose(_quiet(l1, tree), otu.tree_norm(tree, ord=1))
    assert jnp.allclose(_quiet(linf, tree), otu.tree_norm(tree, ord="inf"))
    logp = jax.nn.log_softmax(jnp.array([0.2, 1.0, -0.5]))
    target = jnp.array([0.1, 0.7, 0.2])
    assert jnp.allclose(_quiet(optax.convex_kl_divergence, logp, target),
                        optax.generalized_kl_divergence(logp, target))


def test_removed_losses_had_the_replacement_body() -> None:
    optax, jax, _ = _libraries()
    jnp = jax.numpy
    from optax.losses import _classification as old

    logits = jnp.array([[0.3, -1.2, 2.0], [1.0, 0.0, -0.5]])
    labels = jnp.array([2, 0])
    assert jnp.allclose(_quiet(old.multiclass_logistic_loss, logits, labels),
                        optax.losses.softmax_cross_entropy_with_integer_labels(logits, labels))
    binary_logits, binary_labels = jnp.array([0.3, -1.2]), jnp.array([1.0, 0.0])
    assert jnp.allclose(_quiet(old.binary_logistic_loss, binary_logits, binary_labels),
                        optax.losses.sigmoid_binary_cross_entropy(binary_logits, binary_labels))
    assert jnp.allclose(_quiet(old.binary_sparsemax_loss, binary_logits, binary_labels),
                        optax.losses.sparsemax_loss(binary_logits, binary_labels))


def test_inject_stateful_hyperparams_forwards() -> None:
    optax, jax, _ = _libraries()
    jnp = jax.numpy
    params = {"w": jnp.array([1.0, 2.0])}
    grads = {"w": jnp.array([0.5, -0.5])}
    old = _quiet(optax.inject_stateful_hyperparams, optax.adam)(learning_rate=0.1)
    new = optax.inject_hyperparams(optax.adam)(learning_rate=0.1)
    u_old, s_old = old.update(grads, old.init(params), params)
    u_new, s_new = new.update(grads, new.init(params), params)
    assert jnp.allclose(u_old["w"], u_new["w"])
    assert jax.tree.structure(s_old) == jax.tree.structure(s_new)


def test_seed_and_key_give_the_same_noise() -> None:
    optax, jax, _ = _libraries()
    jnp = jax.numpy
    params = {"w": jnp.zeros(3)}
    grads = {"w": jnp.ones(3)}
    for factory, args in ((optax.add_noise, (0.01, 0.55)), (optax.noisy_sgd, (0.1,))):
        old = _quiet(factory, *args, seed=7)
        new = factory(*args, key=7)
        u_old, _ = old.update(grads, old.init(params), params)
        u_new, _ = new.update(grads, new.init(params), params)
        assert jnp.array_equal(u_old["w"], u_new["w"]), factory
    dpa = optax.contrib.differentially_private_aggregate
    s_old = _quiet(dpa, 1.0, 0.1, seed=7).init(params)
    s_new = dpa(1.0, 0.1, key=7).init(params)
    assert jnp.array_equal(jax.random.key_data(s_old.rng_key), jax.random.key_data(s_new.rng_key))


def test_flax_pmean_is_lax_pmean() -> None:
    _, jax, _ = _libraries()
    from flax import jax_utils

    x = jax.numpy.arange(8.0).reshape(4, 2)
    old = jax.vmap(lambda v: _quiet(jax_utils.pmean, v, "i"), axis_name="i")(x)
    new = jax.vmap(lambda v: jax.lax.pmean(v, "i"), axis_name="i")(x)
    assert jax.numpy.array_equal(old, new)


# --- (d) nnx.Optimizer on the installed flax ------------------------------------------------------

def test_nnx_optimizer_legacy_forms_raise() -> None:
    optax, jax, _ = _libraries()
    from flax import nnx

    model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    tx = optax.sgd(0.1)
    with pytest.raises(TypeError, match="wrt"):
        nnx.Optimizer(model, tx)
    with pytest.raises(TypeError, match="wrt"):
        nnx.Optimizer(model, tx, nnx.Param)
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    grads = nnx.grad(lambda m: (m(jax.numpy.ones((1, 2))) ** 2).sum())(model)
    with pytest.raises(TypeError, match="grads"):
        optimizer.update(grads)
    with pytest.raises(AttributeError, match="model"):
        optimizer.model  # noqa: B018


def test_nnx_fix_reproduces_the_pre_011_behaviour() -> None:
    """ModelAndOptimizer is flax's own "keep the previous behaviour" class (default
    wrt=nnx.Param, update(grads)); the fixed form must train identically."""
    optax, jax, _ = _libraries()
    from flax import nnx

    x = jax.numpy.linspace(-1.0, 1.0, 6).reshape(3, 2)

    def loss(m):
        return ((m(x) - 1.0) ** 2).mean()

    old_model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    new_model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    old = nnx.ModelAndOptimizer(old_model, optax.adam(0.1))
    new = nnx.Optimizer(new_model, optax.adam(0.1), wrt=nnx.Param)
    for _ in range(2):
        old.update(nnx.grad(loss)(old_model))
        new.update(new_model, nnx.grad(loss)(new_model))
    assert jax.numpy.allclose(old_model.kernel[...], new_model.kernel[...])
    assert old.model is old_model


# --- (e) shard_map: experimental vs jax.shard_map on 4 devices --------------------------------------

def test_shard_map_rewrite_is_equivalent_on_4_devices(observed) -> None:
    """jax.experimental.shard_map(f, mesh, in, out, check_rep=c) and jax.shard_map(f,
    mesh=, in_specs=, out_specs=, check_vma=c) give the same gradients on 4 devices."""
    assert observed["shard_map"] == [True, True]


# --- (f) linting -------------------------------------------------------------------------------------

def test_names_resolve_through_imports_not_text() -> None:
    findings = lint("""
        import jax as j
        from brax.training import pmap
        AXIS = '_device_put_sharded'
        comment = "jax.device_put_replicated is gone"

        def device_put_replicated(x, devices):
            return x

        a = j.device_put_replicated(x, devices)
        b = pmap.device_put_replicated(x, devices)
        c = device_put_replicated(x, devices)
        mesh = Mesh(devices, ('_device_put_sharded',))
    """)
    assert [(f.code, f.span.line) for f in findings] == [("OPX704", 10)]
    assert findings[0].severity is Severity.ERROR


def test_shadowed_module_name_is_not_the_library() -> None:
    findings = lint("""
        import optax

        def f(optax):
            return optax.global_norm(1)

        def g():
            optax = load_plugin()
            return optax.additive_weight_decay(1e-4)
    """)
    assert findings == []


def test_severity_follows_the_table() -> None:
    findings = lint("""
        import optax
        a = optax.additive_weight_decay(1e-4)
        b = optax.global_norm(g)
        from jax.experimental.shard_map import shard_map
    """)
    by_line = {f.span.line: f for f in findings}
    assert by_line[3].severity is Severity.ERROR and by_line[3].code == "OPX701"
    assert by_line[4].severity is Severity.WARNING
    assert by_line[5].severity is Severity.WARNING and by_line[5].code == "OPX704"


def test_removed_module_reported_once_per_spelling() -> None:
    findings = lint("""
        import flax
        from flax.optim import Adam
        opt = flax.optim.Adam(1e-3).create(params)
    """)
    assert [(f.code, f.span.line, f.span.column) for f in findings] == [("OPX703", 3, 24), ("OPX703", 4, 7)]


def test_import_fix_needs_every_use_rewritable() -> None:
    text = """
        from jax.experimental.shard_map import shard_map
        step = shard_map(f, mesh, P(), P())
        registry = {"shard": shard_map}
    """
    assert fix(text) == textwrap.dedent(text)
    fixed = fix("""
        from jax.experimental.shard_map import shard_map
        step = shard_map(f, mesh, P(), P(), check_rep=False)
    """)
    assert fixed == textwrap.dedent("""
        from jax import shard_map
        step = shard_map(f, mesh=mesh, in_specs=P(), out_specs=P(), check_vma=False)
    """)


def test_attribute_fix_spells_through_existing_imports() -> None:
    fixed = fix("""
        from jax import lax
        from flax import jax_utils
        g = jax_utils.pmean(g, "batch")
        h = jax_utils.pmean(xs=h, axis_name="batch")
    """)
    assert 'g = lax.pmean(g, "batch")' in fixed
    assert 'h = lax.pmean(x=h, axis_name="batch")' in fixed


def test_call_recipe_refuses_overridden_arguments() -> None:
    text = """
        import optax
        a = optax.tree_utils.tree_l1_norm(t, ord=2)
        b = optax.global_norm(updates=g)
        c = optax.global_norm(*trees)
    """
    assert fix(text) == textwrap.dedent(text)
    assert len(lint(text)) == 3


def test_seed_keyword_fix_only_when_key_is_free() -> None:
    fixed = fix("""
        import optax
        a = optax.add_noise(0.01, 0.55, seed=0)
        b = optax.add_noise(0.01, 0.55, 3, seed=0)
        c = optax.noisy_sgd(0.1, seed=1, key=2)
    """)
    assert "a = optax.add_noise(0.01, 0.55, key=0)" in fixed
    assert "b = optax.add_noise(0.01, 0.55, 3, seed=0)" in fixed
    assert "c = optax.noisy_sgd(0.1, seed=1, key=2)" in fixed


def test_private_names_without_public_counterpart_are_silent() -> None:
    findings = lint("""
        from optax._src.base import NO_PARAMS_MSG
        from optax._src import numerics
        x = numerics.abs_sq(y)
    """)
    assert findings == []


def test_private_import_split_by_public_module() -> None:
    fixed = fix("""
        from optax._src.base import NO_PARAMS_MSG, GradientTransformation
        from optax.contrib._muon import muon, MuonState
    """)
    assert fixed == textwrap.dedent("""
        from optax._src.base import NO_PARAMS_MSG
        from optax import GradientTransformation
        from optax.contrib import muon, MuonState
    """)


def test_removed_private_module_fix_is_unsafe() -> None:
    text = "from optax._src.clipping import clip_by_global_norm\n"
    [finding] = lint(text)
    assert finding.severity is Severity.ERROR
    assert fix(text) == text
    assert fix(text, unsafe=True) == "from optax import clip_by_global_norm\n"


def test_private_name_moved_is_an_error_with_safe_fix() -> None:
    text = "from optax._src.transform import OptState, GradientTransformation\n"
    [finding] = lint(text)
    assert finding.severity is Severity.ERROR
    assert finding.message == (
        "`from optax._src.transform import OptState, GradientTransformation` imports from "
        f"optax._src.transform, which no longer defines OptState, GradientTransformation "
        f"(ImportError in optax {TABLE['versions']['optax']}): use optax.OptState, "
        "optax.GradientTransformation (matched by name: the public name it moved to)")
    assert fix(text) == "from optax import OptState, GradientTransformation\n"


def test_private_name_moved_through_module_alias() -> None:
    text = """
        import optax
        import optax._src.transform as t
        state: t.OptState = None
    """
    [finding] = lint(text)
    assert finding.severity is Severity.ERROR
    assert finding.message.startswith(
        "t.OptState (optax._src.transform.OptState) reaches into optax._src.transform, which no "
        f"longer defines OptState (AttributeError in optax {TABLE['versions']['optax']})")
    assert "state: optax.OptState = None" in fix(text)


def test_private_name_still_defined_is_the_warning() -> None:
    text = "from optax._src.transform import ScaleByAdamState\n"
    [finding] = lint(text)
    assert finding.severity is Severity.WARNING
    assert "which is private optax API, free to move between releases" in finding.message
    assert fix(text) == "from optax import ScaleByAdamState\n"


def test_private_names_table_is_what_the_modules_define() -> None:
    _libraries()
    import importlib as il

    for module, names in TABLE["private_names"].items():
        defined = {a for a in vars(il.import_module(module)) if not a.startswith("_")}
        assert set(names) == defined, module
    assert "OptState" not in TABLE["private_names"]["optax._src.transform"]


@pytest.mark.parametrize("name", ["bad_private_name_moved", "bad_private_name_moved_module_alias"])
def test_fixed_moved_name_fixture_runs(name: str) -> None:
    _libraries()
    fixture = REPO / "fixtures" / "OPX702" / f"{name}.py"
    fixed = REPO / "fixtures" / "OPX702" / f"{name}.fixed.py"
    before = subprocess.run([sys.executable, str(fixture)], capture_output=True, text=True, timeout=300)
    assert before.returncode != 0 and ("ImportError" in before.stderr or "AttributeError" in before.stderr)
    after = subprocess.run([sys.executable, str(fixed)], capture_output=True, text=True, timeout=300)
    assert after.returncode == 0, after.stderr[-2000:]


def test_nnx_update_linked_through_call_sites_only() -> None:
    findings = lint("""
        import optax
        from flax import nnx

        def step(model, opt, grads):
            opt.update(grads)

        def other(model, opt, grads):
            opt.update(grads)

        model = Net(nnx.Rngs(0))
        legacy = nnx.ModelAndOptimizer(model, optax.sgd(0.1))
        current = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
        step(model, current, g)
        other(model, current, g)
        other(model, legacy, g)
    """)
    assert [(f.code, f.span.line) for f in findings] == [("OPX703", 6)]
    fixed = fix("""
        from flax import nnx
        model = Net(nnx.Rngs(0))
        optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)

        def train_step(net, optimizer, batch):
            optimizer.update(grads_of(net, batch))

        for batch in data:
            train_step(model, optimizer, batch)
    """)
    assert "optimizer.update(net, grads_of(net, batch))" in fixed


def test_nnx_annotated_parameter_and_no_fix_without_model() -> None:
    text = """
        from flax import nnx

        def train_step(optimizer: nnx.Optimizer, grads):
            optimizer.update(grads)
    """
    [finding] = lint(text)
    assert finding.code == "OPX703" and finding.span.line == 5
    assert fix(text) == textwrap.dedent(text)


def test_prefilter_skips_files_without_candidates() -> None:
    assert lint("import optax\ntx = optax.adamw(1e-3)\n") == []


def test_parenthesized_multiline_import_is_found() -> None:
    findings = lint("""
        from optax import (
            adam,
            dpsgd,  # moved to optax.contrib
        )
    """)
    assert [(f.code, f.span.line) for f in findings] == [("OPX701", 4)]
    assert "from optax.contrib import dpsgd" in fix("""
        from optax import (
            adam,
            dpsgd,
        )
    """)


def test_lint_path_imports_no_library() -> None:
    fixtures = sorted(str(p) for p in (REPO / "fixtures").glob("OPX70*/bad_*.py") if not p.name.endswith(".fixed.py"))
    code = (
        "import sys\n"
        "from optax_lint.engine import lint as engine\n"
        f"for path in {fixtures!r}:\n"
        "    run = engine.lint_text(open(path).read(), path, {'OPX701', 'OPX702', 'OPX703', 'OPX704'})\n"
        "    assert run.findings and run.internal_errors == 0, path\n"
        "print(sorted(m for m in ('jax', 'optax', 'flax', 'orbax') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_nnx_annotation_yields_to_a_model_and_optimizer_argument() -> None:
    findings = lint("""
        import optax
        from flax import nnx

        def train_step(optimizer: nnx.Optimizer, grads):
            optimizer.update(grads)
            return optimizer.model

        state = nnx.ModelAndOptimizer(Net(nnx.Rngs(0)), optax.sgd(0.1))
        train_step(state, g)
    """)
    assert findings == []


# --- the text prefilter ------------------------------------------------------------------

def _prefilter_oracle(leaves) -> "re.Pattern[str]":
    """The prefilter as one regex (what it was before it became scans for literals): the
    reference its fast form must agree with on every text."""
    import re

    alternation = "|".join(re.escape(leaf) for leaf in sorted(leaves))
    return re.compile(
        rf"\.(?:{alternation})\b|\bimport\b[^\n]*\b(?:{alternation})\b"
        rf"|\bimport\s*\([^)]*\b(?:{alternation})\b"
        r"|\boptax(?:\.\w+)*\._\w|\bfrom\s+optax(?:\.\w+)*\s+import\s*\(?[^\n]*\b_\w")


@pytest.mark.parametrize("text, expected", [
    ("tree = optax.tree_utils.tree_l2_norm(g)\n", True),
    ("tree = optax.tree_utils.tree_l2_normalize(g)\n", False),  # a longer name is another name
    ("x = a..dpsgd\n", True),
    ("x = a.2dpsgd\n", False),
    ("from optax import dpsgd\n", True),
    ("from optax import (\n    adam,\n    dpsgd,\n)\n", True),
    ("from optax import (\n    adam,\n)\nv = dpsgd\n", False),  # named outside the import's parentheses
    ("from optax import\\\n    dpsgd\n", False),  # a continuation line is another line
    ("reimport dpsgd\n", False),
    ("my_import dpsgd\n", False),
    ("import\t(\n dpsgd)", True),
    ("import jax\nx = 1  # dpsgd\n", False),
    ("s = optax._src.alias\n", True),
    ("s = xoptax._src.alias\n", False),
    ("s = my.optax._src\n", True),
    ("from  optax.contrib import  _private\n", True),
    ("notfrom optax import _private\n", False),
    ("from optax import (\n    _private)\n", False),  # the oracle reads one line after `import (`
    ("", False),
])
def test_prefilter_agrees_with_its_regex_form(text: str, expected: bool) -> None:
    from optax_lint.core.optax_api import load_api
    from optax_lint.facts.api_currency import load_currency_table

    table = load_currency_table(load_api())
    assert bool(_prefilter_oracle(table.leaves).search(text)) is expected
    assert table.may_be_mentioned(text) is expected
