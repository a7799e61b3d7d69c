"""Runtime claims of the multi-device rules (OPX401-OPX407), shown with small real runs
against the installed jax/optax/flax/orbax on fake CPU devices.

Each group runs in its own subprocess with XLA_FLAGS=--xla_force_host_platform_device_count=N
and a timeout, blocking on every step's result: collectives on fake CPU devices can
deadlock when steps queue up unblocked (jax-ml/jax#25861), and a hang must fail the test,
not CI. The child prints one JSON line of measurements; the assertions live here. If a
library upgrade changes one of these numbers, the rule's doc must change with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

# Its module fixtures are costly: one xdist worker computes them once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("multi_device_runtime")

pytest.importorskip("jax")
pytest.importorskip("optax")
pytest.importorskip("flax")
pytest.importorskip("orbax.checkpoint")

TIMEOUT = 150


def _run(code: str, devices: int = 4, *args: str) -> dict:
    env = dict(
        os.environ,
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
        JAX_PLATFORMS="cpu",
        TF_CPP_MIN_LOG_LEVEL="3",
    )
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True, text=True, timeout=TIMEOUT, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(lines[-1])


_COMMON = """
import json, sys
import jax, jax.numpy as jnp, numpy as np, optax
from jax import lax

assert jax.device_count() == NDEV, jax.devices()
x = jnp.arange(NDEV * 8 * 3, dtype=jnp.float32).reshape(NDEV * 8, 3) / 50.0
y = jnp.sum(x, axis=1) + 0.5 * jnp.sin(jnp.arange(NDEV * 8, dtype=jnp.float32))
w = jnp.array([0.1, -0.2, 0.3])

def loss(w, x, y):
    return jnp.mean((x @ w - y) ** 2)

true_grad = np.asarray(jax.grad(loss)(w, x, y))
xs, ys = x.reshape(NDEV, 8, 3), y.reshape(NDEV, 8)
out = {}

def error(fn):
    try:
        jax.block_until_ready(fn())
        return None
    except Exception as exc:
        return [type(exc).__name__, str(exc)[:600]]
"""


# ---------------------------------------------------------------------------
# pmap: OPX401, OPX402, OPX403, OPX405


PMAP_CODE = _COMMON.replace("NDEV", "4") + """
from flax import jax_utils
from flax.training import train_state

# OPX402: a pmap without axis_name, and a pmap bound to another name.
def step_batch(w, x, y):
    return lax.pmean(jax.grad(loss)(w, x, y), axis_name="batch")

wr = jax_utils.replicate(w)
out["no_axis_name"] = error(lambda: jax.pmap(step_batch)(wr, xs, ys))
out["other_axis_name"] = error(lambda: jax.pmap(step_batch, axis_name="data")(wr, xs, ys))
out["bound_axis_name"] = error(lambda: jax.pmap(step_batch, axis_name="batch")(wr, xs, ys))

# OPX401: one SGD step with and without the pmean; replicas drift apart without it.
tx = optax.sgd(0.1)

def sgd_step(w, opt_state, x, y, reduce):
    g = jax.grad(loss)(w, x, y)
    if reduce == "pmean":
        g = lax.pmean(g, "batch")
    elif reduce == "psum_div":
        g = jax.tree.map(lambda t: lax.psum(t, "batch") / lax.psum(1, "batch"), g)
    updates, opt_state = tx.update(g, opt_state, w)
    return optax.apply_updates(w, updates)

def loss_pmean_step(w, opt_state, x, y):
    g = jax.grad(lambda w: lax.pmean(loss(w, x, y), "batch"))(w)
    updates, opt_state = tx.update(g, opt_state, w)
    return optax.apply_updates(w, updates)

opt_state = jax_utils.replicate(tx.init(w))
for reduce in ("none", "pmean", "psum_div"):
    f = jax.pmap(lambda a, b, c, d: sgd_step(a, b, c, d, reduce), axis_name="batch")
    new_w = np.asarray(jax.block_until_ready(f(wr, opt_state, xs, ys)))
    out["spread_" + reduce] = float(np.max(np.abs(new_w - new_w[0])))
    out["w_" + reduce] = new_w[0].tolist()
new_w = np.asarray(jax.block_until_ready(jax.pmap(loss_pmean_step, axis_name="batch")(wr, opt_state, xs, ys)))
out["spread_loss_pmean"] = float(np.max(np.abs(new_w - new_w[0])))
out["w_single_device_full_batch"] = np.asarray(optax.apply_updates(w, tx.update(jax.grad(loss)(w, x, y), tx.init(w), w)[0])).tolist()

# OPX403: the pmean of per-device gradients is the gradient of the N-times-larger batch.
g_dev = np.asarray(jax.block_until_ready(jax.pmap(step_batch, axis_name="batch")(wr, xs, ys)))[0]
out["pmean_vs_global_grad"] = float(np.max(np.abs(g_dev - true_grad)))
out["per_device_vs_global_grad"] = float(np.max(np.abs(np.asarray(jax.grad(loss)(w, xs[0], ys[0])) - true_grad)))

# OPX405: a host-side TrainState / optax state passed on a mapped axis.
state = train_state.TrainState.create(apply_fn=None, params={"w": w}, tx=optax.adam(1e-2))

def ts_step(state, x, y):
    g = lax.pmean(jax.grad(lambda p: loss(p["w"], x, y))(state.params), "batch")
    return state.apply_gradients(grads=g)

p_ts = jax.pmap(ts_step, axis_name="batch")
out["unreplicated_train_state"] = error(lambda: p_ts(state, xs, ys))
out["replicated_train_state"] = error(lambda: p_ts(jax_utils.replicate(state), xs, ys))
adam = optax.adam(1e-2)

def adam_step(params, opt_state, x, y):
    g = lax.pmean(jax.grad(lambda p: loss(p["w"], x, y))(params), "batch")
    updates, opt_state = adam.update(g, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

p_adam = jax.pmap(adam_step, axis_name="batch")
params_r = jax_utils.replicate({"w": w})
out["unreplicated_opt_state"] = error(lambda: p_adam(params_r, adam.init({"w": w}), xs, ys))
out["replicated_opt_state"] = error(lambda: p_adam(params_r, jax_utils.replicate(adam.init({"w": w})), xs, ys))
# Nothing else has a device axis to split: the size cannot even be inferred.
out["only_host_state"] = error(lambda: jax.pmap(lambda s: s, axis_name="batch")(adam.init({"w": w})))
"""


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("multi_device_ckpt")


@pytest.fixture(scope="module")
def four_devices(checkpoint_dir) -> dict:
    """One child on 4 fake devices runs every 4-device measurement (one jax start-up)."""
    code = PMAP_CODE + SHARD_MAP_CODE + ORBAX_SAVE_CODE + "\nprint(json.dumps(out))\n"
    return _run(code, 4, str(checkpoint_dir))


@pytest.fixture(scope="module")
def pmap_results(four_devices) -> dict:
    return four_devices


def test_unbound_axis_name_raises_name_error(pmap_results):
    # OPX402: no axis_name at all, and a different axis_name, both fail at trace time.
    for key in ("no_axis_name", "other_axis_name"):
        kind, message = pmap_results[key]
        assert kind == "NameError"
        assert "unbound axis name: batch" in message
    assert pmap_results["bound_axis_name"] is None


def test_replicas_diverge_without_pmean(pmap_results):
    # OPX401: without the pmean the replicas differ after a single step (doc: "up to 1.5").
    assert pmap_results["spread_none"] > 1.0
    assert pmap_results["spread_pmean"] == 0.0
    assert pmap_results["spread_psum_div"] == 0.0
    # With the pmean every replica took the single-device full-batch step.
    assert pmap_results["w_pmean"] == pytest.approx(pmap_results["w_single_device_full_batch"], rel=1e-5)
    assert pmap_results["w_psum_div"] == pytest.approx(pmap_results["w_single_device_full_batch"], rel=1e-5)


def test_grad_of_pmean_loss_does_not_average_under_pmap(pmap_results):
    # OPX401's detail: a pmean of the loss is no substitute for a pmean of the grads.
    assert pmap_results["spread_loss_pmean"] > 1.0


def test_pmean_of_device_grads_is_the_global_batch_grad(pmap_results):
    # OPX403: effective batch = per-device batch x device count.
    assert pmap_results["pmean_vs_global_grad"] < 1e-5
    assert pmap_results["per_device_vs_global_grad"] > 0.1


def test_unreplicated_state_raises_rank_error(pmap_results):
    # OPX405: scalar leaves (TrainState.step, optax count) cannot be split across devices.
    for key in ("unreplicated_train_state", "unreplicated_opt_state"):
        kind, message = pmap_results[key]
        assert kind == "ValueError"
        assert "rank at least 1" in message and "rank 0" in message
    assert pmap_results["replicated_train_state"] is None
    assert pmap_results["replicated_opt_state"] is None
    # When no argument has a device axis at all, pmap fails earlier, with an IndexError.
    assert pmap_results["only_host_state"][0] == "IndexError"


# ---------------------------------------------------------------------------
# shard_map: OPX407


SHARD_MAP_CODE = """
from functools import partial
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((4,), ("data",))
data = NamedSharding(mesh, P("data"))
xs_, ys_, ws_ = jax.device_put(x, data), jax.device_put(y, data), jax.device_put(w, NamedSharding(mesh, P()))

def sm(body, check_vma=True):
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=P(), check_vma=check_vma))

variants = {
    "grad_only": lambda w, x, y: jax.grad(loss)(w, x, y),
    "grad_pmean": lambda w, x, y: lax.pmean(jax.grad(loss)(w, x, y), "data"),
    "grad_psum_div": lambda w, x, y: lax.psum(jax.grad(loss)(w, x, y), "data") / lax.psum(1, "data"),
    "grad_psum": lambda w, x, y: lax.psum(jax.grad(loss)(w, x, y), "data"),
    "pmean_loss_grad": lambda w, x, y: jax.grad(lambda w: lax.pmean(loss(w, x, y), "data"))(w),
    "pmean_loss_grad_then_pmean": lambda w, x, y: lax.pmean(jax.grad(lambda w: lax.pmean(loss(w, x, y), "data"))(w), "data"),
    "pcast_grad_pmean": lambda w, x, y: lax.pmean(jax.grad(loss)(lax.pcast(w, "data", to="varying"), x, y), "data"),
}
for name, body in variants.items():
    g = np.asarray(jax.block_until_ready(sm(body)(ws_, xs_, ys_)))
    out[name] = (g / true_grad).tolist()
g = np.asarray(jax.block_until_ready(sm(variants["grad_pmean"], check_vma=False)(ws_, xs_, ys_)))
out["unchecked_grad_pmean"] = (g / true_grad).tolist()
# The SPMD-jit idiom (good fixture of OPX401): plain jit over sharded data, no pmean.
g = np.asarray(jax.block_until_ready(jax.jit(jax.grad(loss))(ws_, xs_, ys_)))
out["spmd_jit"] = (g / true_grad).tolist()
"""


@pytest.fixture(scope="module")
def shard_map_results(four_devices) -> dict:
    return four_devices


def test_shard_map_grad_then_pmean_is_n_times_too_large(shard_map_results):
    # OPX407: measured 4.0x on 4 devices for the ported pmap idiom.
    assert shard_map_results["grad_pmean"] == pytest.approx([4.0] * 3, rel=1e-5)
    assert shard_map_results["grad_only"] == pytest.approx([4.0] * 3, rel=1e-5)
    assert shard_map_results["grad_psum_div"] == pytest.approx([4.0] * 3, rel=1e-5)
    assert shard_map_results["grad_psum"] == pytest.approx([16.0] * 3, rel=1e-5)


def test_shard_map_repairs_give_the_true_gradient(shard_map_results):
    for key in ("pmean_loss_grad", "pmean_loss_grad_then_pmean", "pcast_grad_pmean", "unchecked_grad_pmean", "spmd_jit"):
        assert shard_map_results[key] == pytest.approx([1.0] * 3, rel=1e-5), key


# ---------------------------------------------------------------------------
# orbax: OPX406


ORBAX_SAVE_CODE = """
import orbax.checkpoint as ocp
from flax import jax_utils

params = {"w": jnp.array([0.1, -0.2, 0.3])}
replicated = jax_utils.replicate(params)
for name, tree in (("replicated", replicated), ("single", jax_utils.unreplicate(replicated))):
    mngr = ocp.CheckpointManager(sys.argv[1] + "/" + name)
    mngr.save(0, args=ocp.args.StandardSave({"params": tree}))
    mngr.wait_until_finished()
    out[name + "_stored_shape"] = list(mngr.item_metadata(0).tree["params"]["w"].shape)
    mngr.close()
mngr = ocp.CheckpointManager(sys.argv[1] + "/replicated")
# The usual abstract target: built from a single (unreplicated) copy of the state.
abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, {"params": jax_utils.unreplicate(replicated)})
try:
    mngr.restore(0, args=ocp.args.StandardRestore(abstract))
    out["restore_single_target"] = None
except Exception as exc:
    out["restore_single_target"] = [type(exc).__name__, str(exc)[:300]]
mngr.close()
"""

ORBAX_RESTORE_CODE = """
import json, sys
import jax
import orbax.checkpoint as ocp


out = {"devices": jax.device_count()}
for name in ("replicated", "single"):
    mngr = ocp.CheckpointManager(sys.argv[1] + "/" + name)
    try:
        restored = mngr.restore(0)
        out[name] = list(restored["params"]["w"].shape)
    except Exception as exc:
        out[name] = [type(exc).__name__, str(exc)[:300]]
    mngr.close()
print(json.dumps(out))
"""


def test_replicated_checkpoint_stores_copies_and_breaks_restore(four_devices, checkpoint_dir):
    saved = four_devices
    # OPX406: N copies are stored, silently.
    assert saved["replicated_stored_shape"] == [4, 3]
    assert saved["single_stored_shape"] == [3]
    kind, message = saved["restore_single_target"]
    assert kind == "ValueError" and "is not compatible with the stored shape: (4, 3)" in message

    restored = _run(ORBAX_RESTORE_CODE, 2, str(checkpoint_dir))
    assert restored["devices"] == 2
    kind, message = restored["replicated"]
    assert kind == "ValueError" and "Topology mismatch" in message
    assert restored["single"] == [3]


def test_pmap_docstring_points_to_shard_map():
    # OPX407's doc: pmap's own docstring recommends the shard_map migration.
    import jax

    doc = jax.pmap.__doc__ or ""
    assert "Use `jax.shard_map` instead" in doc or "jax.shard_map" in doc
    assert "implemented in terms of" in doc and "shard_map" in doc
