"""Runtime claims of the checkpointing rules (OPX501-OPX505), shown against the
installed jax/optax/flax/orbax on CPU in temporary directories. If a library upgrade
changes one of these behaviours, the rule's doc must change with it."""

from __future__ import annotations

import logging
import warnings

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
optax = pytest.importorskip("optax")
ocp = pytest.importorskip("orbax.checkpoint")
flax = pytest.importorskip("flax")

from absl import logging as absl_logging  # noqa: E402
from flax import nnx, serialization  # noqa: E402
from flax.training import checkpoints as flax_checkpoints  # noqa: E402
from flax.training.train_state import TrainState  # noqa: E402

LEGACY_EVENT = "/jax/orbax/deprecation/checkpointer_legacy_args"


def test_installed_versions():
    import importlib.metadata as md

    assert md.version("orbax-checkpoint") == "0.12.8"
    assert md.version("flax") == "0.12.8"


@pytest.fixture
def events():
    seen: list[str] = []

    def listener(event, **kwargs):
        seen.append(event)

    jax.monitoring.register_event_listener(listener)
    yield seen
    jax.monitoring.unregister_event_listener(listener)


def _params():
    return {"w": jnp.ones((3,)), "b": jnp.zeros((2,))}


def _grads(params):
    return jax.tree.map(jnp.ones_like, params)


# -- OPX503: restore without a target ----------------------------------------------------


def test_restore_without_target_gives_dicts_and_update_crashes(tmp_path):
    params = _params()
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))
    opt_state = tx.init(params)
    mngr = ocp.CheckpointManager(tmp_path / "mngr")
    mngr.save(0, args=ocp.args.StandardSave({"params": params, "opt_state": opt_state}))
    mngr.wait_until_finished()

    restored = mngr.restore(0)  # no target
    assert isinstance(restored, dict)
    # NamedTuples -> dicts, tuples -> lists, EmptyState -> None.
    assert restored["opt_state"][0] is None
    assert isinstance(restored["opt_state"][1], list)
    assert set(restored["opt_state"][1][0]) == {"count", "mu", "nu"}
    with pytest.raises(AttributeError, match="'dict' object has no attribute 'mu'"):
        tx.update(_grads(params), restored["opt_state"], restored["params"])

    # With an abstract target the structure matches exactly and training continues.
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, {"params": params, "opt_state": opt_state})
    typed = mngr.restore(0, args=ocp.args.StandardRestore(abstract))
    assert jax.tree.structure(typed["opt_state"]) == jax.tree.structure(opt_state)
    updates, _ = tx.update(_grads(params), typed["opt_state"], typed["params"])
    assert jax.tree.structure(updates) == jax.tree.structure(params)
    mngr.close()


def test_restored_train_state_without_target_is_a_dict(tmp_path):
    tx = optax.adam(1e-3)
    state = TrainState.create(apply_fn=lambda v, x: x, params=_params(), tx=tx)
    ckptr = ocp.StandardCheckpointer()
    ckptr.save(tmp_path / "state", state)
    ckptr.wait_until_finished()

    restored = ckptr.restore(tmp_path / "state")
    assert isinstance(restored, dict) and set(restored) == {"params", "opt_state", "step"}
    with pytest.raises(AttributeError, match="'dict' object has no attribute 'apply_gradients'"):
        restored.apply_gradients(grads=_grads(state.params))

    def train_step(state, batch):  # what a pmapped/jitted step does first
        return state.apply_fn({"params": state.params}, batch)

    with pytest.raises(AttributeError, match="'dict' object has no attribute"):
        train_step(restored, jnp.ones(3))
    # The restored opt_state put back into a TrainState fails at the first update.
    with pytest.raises(AttributeError, match="'dict' object has no attribute 'mu'"):
        state.replace(opt_state=restored["opt_state"]).apply_gradients(grads=_grads(state.params))

    typed = ckptr.restore(tmp_path / "state", jax.tree.map(ocp.utils.to_shape_dtype_struct, state))
    assert isinstance(typed, TrainState)
    assert jax.tree.structure(typed.opt_state) == jax.tree.structure(state.opt_state)


def test_flax_restore_checkpoint_without_target_gives_dicts(tmp_path):
    params = _params()
    state = TrainState.create(apply_fn=None, params=params, tx=optax.adam(1e-3))
    flax_checkpoints.save_checkpoint(tmp_path / "state", state, step=1)
    restored = flax_checkpoints.restore_checkpoint(tmp_path / "state", None)
    assert set(restored["opt_state"]) == {"0", "1"}  # tuples come back as {'0': ..., '1': ...}
    with pytest.raises(AttributeError, match="'str' object has no attribute 'mu'"):
        state.replace(opt_state=restored["opt_state"]).apply_gradients(grads=_grads(params))

    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))
    flax_checkpoints.save_checkpoint(tmp_path / "dict", {"params": params, "opt_state": tx.init(params)}, step=1)
    restored = flax_checkpoints.restore_checkpoint(tmp_path / "dict", None)
    with pytest.raises(ValueError, match="The number of updates and states has to be the same in chain"):
        tx.update(_grads(params), restored["opt_state"], restored["params"])


# -- OPX501 / OPX502: resuming with a fresh optimizer ------------------------------------


def test_resume_with_fresh_optimizer_state_differs(tmp_path):
    x = jax.random.normal(jax.random.PRNGKey(0), (32, 4))
    y = x @ jnp.array([1.0, -2.0, 3.0, 0.5]) + 1.0

    def loss(p):
        return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    schedule = optax.warmup_cosine_decay_schedule(0.0, 0.1, 5, 20)
    tx = optax.adam(schedule)

    @jax.jit
    def step(state):
        return state.apply_gradients(grads=jax.grad(loss)(state.params))

    state = TrainState.create(apply_fn=None, params={"w": jnp.zeros(4), "b": jnp.zeros(())}, tx=tx)
    for _ in range(10):
        state = step(state)

    mngr = ocp.CheckpointManager(tmp_path / "run")
    mngr.save(10, args=ocp.args.StandardSave({"params": state.params}))  # params only (OPX501)
    mngr.wait_until_finished()

    uninterrupted = state
    for _ in range(10):
        uninterrupted = step(uninterrupted)

    abstract = {"params": jax.tree.map(ocp.utils.to_shape_dtype_struct, state.params)}
    restored = mngr.restore(10, args=ocp.args.StandardRestore(abstract))
    resumed = TrainState.create(apply_fn=None, params=restored["params"], tx=tx)  # OPX502
    mngr.close()

    assert int(resumed.step) == 0
    assert float(jnp.abs(resumed.opt_state[0].mu["w"]).sum()) == 0.0  # Adam's first moment is gone
    assert float(jnp.abs(state.opt_state[0].mu["w"]).sum()) > 0.0
    assert float(schedule(resumed.step)) == 0.0  # warmup starts again ...
    assert float(schedule(state.step)) == pytest.approx(0.075)  # ... instead of continuing at step 10
    for _ in range(10):
        resumed = step(resumed)
    assert int(resumed.step) == 10 and int(uninterrupted.step) == 20
    gap = float(jnp.max(jnp.abs(resumed.params["w"] - uninterrupted.params["w"])))
    assert gap == pytest.approx(0.42, abs=0.05)


# -- OPX504: discarded functional updates ----------------------------------------------------


def test_discarded_functional_updates_are_no_ops():
    params = {"w": jnp.ones((3,))}
    grads = {"w": jnp.ones((3,))}
    state = TrainState.create(apply_fn=None, params=params, tx=optax.adam(0.1))
    state.apply_gradients(grads=grads)  # discarded
    assert int(state.step) == 0 and bool(jnp.all(state.params["w"] == 1.0))
    state.replace(params={"w": jnp.zeros((3,))})  # discarded
    assert bool(jnp.all(state.params["w"] == 1.0))

    tx = optax.sgd(0.1)
    opt_state = tx.init(params)
    updates, _ = tx.update(grads, opt_state, params)
    optax.apply_updates(params, updates)  # discarded
    assert bool(jnp.all(params["w"] == 1.0))

    saved = serialization.to_bytes({"w": jnp.full((3,), 7.0)})
    target = {"w": jnp.zeros((3,))}
    serialization.from_bytes(target, saved)  # discarded
    assert bool(jnp.all(target["w"] == 0.0))
    assert bool(jnp.all(serialization.from_bytes(target, saved)["w"] == 7.0))


def test_discarded_flax_restore_checkpoint_restores_nothing(tmp_path):
    # flax.training.checkpoints.restore_checkpoint returns the restored target and
    # leaves the one it is given untouched: a discarded result resumes nothing.
    tx = optax.adam(0.1)
    saved = TrainState.create(apply_fn=None, params={"w": jnp.full((3,), 7.0)}, tx=tx).replace(step=5)
    flax_checkpoints.save_checkpoint(tmp_path / "ckpt", saved, step=5)
    target = TrainState.create(apply_fn=None, params={"w": jnp.zeros((3,))}, tx=tx)
    flax_checkpoints.restore_checkpoint(tmp_path / "ckpt", target)  # discarded
    assert int(target.step) == 0 and bool(jnp.all(target.params["w"] == 0.0))
    restored = flax_checkpoints.restore_checkpoint(tmp_path / "ckpt", target)
    assert int(restored.step) == 5 and bool(jnp.all(restored.params["w"] == 7.0))


def test_nnx_optimizer_updates_in_place_but_nnx_train_state_does_not():
    class Model(nnx.Module):
        def __init__(self, rngs):
            self.linear = nnx.Linear(2, 1, rngs=rngs)

        def __call__(self, x):
            return self.linear(x)

    model = Model(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
    before = jnp.array(model.linear.kernel[...])
    grads = nnx.grad(lambda m: jnp.sum(m(jnp.ones((1, 2)))))(model)
    optimizer.update(model, grads)  # discarded on purpose: mutates in place
    assert bool(jnp.any(model.linear.kernel[...] != before))
    assert int(optimizer.step[...]) == 1

    graphdef, param_state = nnx.split(model, nnx.Param)
    train_state = nnx.TrainState.create(graphdef, params=param_state, tx=optax.sgd(0.1))
    train_state.apply_gradients(grads=grads)  # discarded: nnx.TrainState is functional
    assert int(train_state.step) == 0


# -- OPX505: what the installed versions consider legacy --------------------------------------


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_legacy_checkpoint_manager_constructor_logs_deprecation(tmp_path):
    handler = _Capture()
    absl_logging.get_absl_logger().addHandler(handler)
    try:
        legacy = ocp.CheckpointManager(tmp_path / "legacy", ocp.PyTreeCheckpointer())
        legacy.close()
        modern = ocp.CheckpointManager(tmp_path / "modern", options=ocp.CheckpointManagerOptions(max_to_keep=1))
        modern.close()
    finally:
        absl_logging.get_absl_logger().removeHandler(handler)
    deprecations = [m for m in handler.messages if "deprecated legacy API" in m]
    assert len(deprecations) == 1
    assert "Configured `CheckpointManager` using deprecated legacy API" in deprecations[0]


def test_checkpointer_without_args_is_the_legacy_path(tmp_path, events):
    tree = {"params": _params()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ocp.PyTreeCheckpointer().save(tmp_path / "legacy", tree)
    assert LEGACY_EVENT in events
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning)]  # silent to the user

    events.clear()
    ocp.PyTreeCheckpointer().save(tmp_path / "args", args=ocp.args.PyTreeSave(tree))
    ocp.StandardCheckpointer().save(tmp_path / "standard", tree)  # current API: not flagged
    assert LEGACY_EVENT not in events

    ocp.PyTreeCheckpointer().restore(tmp_path / "legacy")
    assert LEGACY_EVENT in events


def test_pytree_args_fix_is_equivalent(tmp_path, events):
    """OPX505's safe fix: save(path, tree) -> save(path, args=PyTreeSave(tree)) and
    restore(path[, item]) -> restore(path, args=PyTreeRestore([item]))."""
    tx = optax.adam(1e-3)
    params = _params()
    tree = {"params": params, "opt_state": tx.init(params)}
    checkpointer = ocp.PyTreeCheckpointer()
    checkpointer.save(tmp_path / "legacy", tree)
    checkpointer.save(tmp_path / "fixed", args=ocp.args.PyTreeSave(tree))
    events.clear()
    for legacy, fixed in (
        (checkpointer.restore(tmp_path / "legacy"), checkpointer.restore(tmp_path / "fixed", args=ocp.args.PyTreeRestore())),
        (checkpointer.restore(tmp_path / "legacy", item=tree), checkpointer.restore(tmp_path / "fixed", args=ocp.args.PyTreeRestore(tree))),
    ):
        assert jax.tree.structure(legacy) == jax.tree.structure(fixed)
        assert all(bool(jnp.all(a == b)) for a, b in zip(jax.tree.leaves(legacy), jax.tree.leaves(fixed)))
    assert events.count(LEGACY_EVENT) == 2  # only the two legacy restores


def test_flax_checkpoints_forward_to_orbax_legacy_form(tmp_path, events):
    tree = {"params": _params()}
    assert flax.config.flax_use_orbax_checkpointing is True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flax_checkpoints.save_checkpoint(tmp_path / "orbax_backend", tree, step=1)
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert LEGACY_EVENT in events

    flax.config.update("flax_use_orbax_checkpointing", False)
    try:
        with pytest.warns(DeprecationWarning, match="Flax Checkpointing will soon be deprecated in favor of Orbax"):
            flax_checkpoints.save_checkpoint(tmp_path / "flax_backend", tree, step=1)
    finally:
        flax.config.update("flax_use_orbax_checkpointing", True)
