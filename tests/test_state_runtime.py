"""Real behaviour behind the "Updates and state" rules (OPX601-OPX611).

Every crash or number a rule's documentation claims is reproduced here with a minimal
case against the installed optax / jax / flax, so a library upgrade that changes the
behaviour shows up as a failing test. Where cheap, the same snippet is also linted, to
check that the rule fires exactly when the library fails.
"""

from __future__ import annotations

import functools
import inspect
import runpy
import textwrap
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import optax
import pytest
from flax import nnx
from flax.training.train_state import TrainState

from optax_lint.core.catalogue import load_table
from optax_lint.engine import lint as engine
from optax_lint.rules.state import optax_states as rules

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
PARAMS = {"w": jnp.ones((4, 3)), "b": jnp.ones((3,))}
GRADS = jax.tree.map(lambda x: 0.1 * x, PARAMS)
NO_PARAMS = "requires the current value of parameters"


def codes_found(source: str, code: str) -> list[int]:
    run = engine.lint_text(textwrap.dedent(source), "snippet.py", {code})
    assert run.internal_errors == 0, [f.message for f in run.findings]
    return [f.span.line for f in run.findings if f.code == code]


def seed_optimizer(schedule=True):
    lr = optax.warmup_cosine_decay_schedule(0.0, 1e-3, 10, 100, 0.0) if schedule else 1e-3
    return optax.chain(optax.clip_by_global_norm(1.0), optax.inject_hyperparams(optax.adamw)(learning_rate=lr))


# ---------------------------------------------------------------------------
# OPX601 update-without-params


WRAPPED_ADAMW = {
    "alias": lambda: optax.adamw(1e-3),
    "weight_decay=0": lambda: optax.adamw(1e-3, weight_decay=0.0),
    "chain": lambda: optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3)),
    "named_chain": lambda: optax.named_chain(("opt", optax.adamw(1e-3))),
    "inject_hyperparams": lambda: optax.inject_hyperparams(optax.adamw)(learning_rate=1e-3),
    "MultiSteps": lambda: optax.MultiSteps(optax.adamw(1e-3), 2),
    "masked": lambda: optax.masked(optax.adamw(1e-3), {"w": True, "b": True}),
    "apply_if_finite": lambda: optax.apply_if_finite(optax.adamw(1e-3), 3),
    "multi_transform": lambda: optax.multi_transform({"a": optax.adamw(1e-3), "b": optax.sgd(0.1)}, {"w": "a", "b": "b"}),
}


@pytest.mark.parametrize("kind", sorted(WRAPPED_ADAMW))
def test_adamw_and_its_wrappers_raise_without_params(kind: str) -> None:
    tx = WRAPPED_ADAMW[kind]()
    state = tx.init(PARAMS)
    with pytest.raises(ValueError, match=NO_PARAMS):
        tx.update(GRADS, state)
    tx.update(GRADS, state, PARAMS)  # and passing params is the cure


def test_update_without_params_raises_under_jit_and_bare_primitive_raises_type_error() -> None:
    tx = optax.adamw(1e-3, weight_decay=0.0)
    state = tx.init(PARAMS)
    with pytest.raises(ValueError, match=NO_PARAMS):
        jax.jit(lambda g, s: tx.update(g, s))(GRADS, state)
    bare = optax.add_decayed_weights(1e-4)
    with pytest.raises(TypeError, match="params"):
        bare.update(GRADS, bare.init(PARAMS))
    adam = optax.adam(1e-3)  # the near-miss: adam needs no params
    adam.update(GRADS, adam.init(PARAMS))


# The issue's list (plus the wrappers' inheritance) checked against the installed optax.
NEEDS_PARAMS_SAMPLE = {
    "adamw": lambda: optax.adamw(0.1),
    "adamaxw": lambda: optax.adamaxw(0.1),
    "nadamw": lambda: optax.nadamw(0.1),
    "lamb": lambda: optax.lamb(0.1),
    "lars": lambda: optax.lars(0.1),
    "lion": lambda: optax.lion(0.1, weight_decay=0.0),
    "adafactor": lambda: optax.adafactor(0.1),
    "adadelta": lambda: optax.adadelta(0.1),
    "adan": lambda: optax.adan(0.1),
    "novograd": lambda: optax.novograd(0.1),
    "add_decayed_weights": lambda: optax.add_decayed_weights(1e-4),
    "adaptive_grad_clip": lambda: optax.adaptive_grad_clip(0.1),
    "scale_by_trust_ratio": lambda: optax.scale_by_trust_ratio(),
    "contrib.prodigy": lambda: optax.contrib.prodigy(),
    "contrib.schedule_free_adamw": lambda: optax.contrib.schedule_free_adamw(),
    "contrib.muon": lambda: optax.contrib.muon(0.1),
    # and some that do not need them
    "adam": lambda: optax.adam(0.1),
    "sgd": lambda: optax.sgd(0.1, momentum=0.9),
    "rmsprop": lambda: optax.rmsprop(0.1),
    "contrib.adopt": lambda: optax.contrib.adopt(0.1),
    "clip_by_global_norm": lambda: optax.clip_by_global_norm(1.0),
}


@pytest.mark.parametrize("key", sorted(NEEDS_PARAMS_SAMPLE))
def test_needs_params_table_matches_installed_optax(key: str) -> None:
    row = load_table("optax_api")["callables"][key]
    tx = NEEDS_PARAMS_SAMPLE[key]()
    params = {"w": jnp.ones((3, 2)), "b": jnp.ones((2,))}
    state = tx.init(params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tx.update(jax.tree.map(lambda x: 0.5 * x, params), state)
            raised = False
        except (ValueError, TypeError):
            raised = True
    assert raised == row["needs_params"], key


RULE_VS_RUNTIME = [
    "optax.adamw(1e-3)",
    "optax.adamw(1e-3, weight_decay=0.0)",
    "optax.lamb(1e-3)",
    "optax.chain(optax.clip_by_global_norm(1.0), optax.lion(1e-4, weight_decay=0))",
    "optax.MultiSteps(optax.adamw(1e-3), every_k_schedule=2)",
    "optax.inject_hyperparams(optax.adamw)(learning_rate=1e-3)",
    "optax.masked(optax.add_decayed_weights(1e-4), {'w': True, 'b': False})",
    "optax.apply_if_finite(optax.chain(optax.adam(1e-3), optax.add_decayed_weights(1e-4)), 3)",
    "optax.adam(1e-3)",
    "optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(1e-2, momentum=0.9))",
    "optax.inject_hyperparams(optax.rmsprop)(learning_rate=1e-3)",
]


@pytest.mark.parametrize("construction", RULE_VS_RUNTIME)
def test_opx601_fires_exactly_when_optax_raises(construction: str) -> None:
    source = f"""\
        import jax.numpy as jnp
        import optax
        params = {{"w": jnp.ones((4, 3)), "b": jnp.ones((3,))}}
        tx = {construction}
        opt_state = tx.init(params)
        updates, opt_state = tx.update(params, opt_state)
        """
    fired = codes_found(source, "OPX601") == [6]
    try:
        exec(textwrap.dedent(source), {})
        raised = False
    except (ValueError, TypeError):
        raised = True
    assert fired == raised, construction


# ---------------------------------------------------------------------------
# OPX602 hyperparams-wrong-index


def test_seed002_state_layout() -> None:
    state = seed_optimizer().init(PARAMS)
    assert isinstance(state, tuple) and len(state) == 2
    assert float(state[1].hyperparams["learning_rate"]) == 0.0  # schedule(0)
    with pytest.raises(AttributeError, match="'EmptyState' object has no attribute 'hyperparams'"):
        state[0].hyperparams
    with pytest.raises(AttributeError, match="'tuple' object has no attribute 'hyperparams'"):
        state.hyperparams


def test_multisteps_and_named_chain_layouts() -> None:
    ms = optax.MultiSteps(seed_optimizer(schedule=False), 4)
    state = ms.init(PARAMS)
    with pytest.raises(AttributeError, match="MultiStepsState"):
        state.hyperparams
    assert float(state.inner_opt_state[1].hyperparams["learning_rate"]) == pytest.approx(1e-3)
    named = optax.named_chain(("clip", optax.clip_by_global_norm(1.0)), ("adamw", optax.inject_hyperparams(optax.adamw)(learning_rate=1e-3)))
    nstate = named.init(PARAMS)
    with pytest.raises(KeyError):
        nstate[1]
    assert float(nstate["adamw"].hyperparams["learning_rate"]) == pytest.approx(1e-3)
    partition = optax.multi_transform({"a": optax.inject_hyperparams(optax.adam)(learning_rate=1e-3), "z": optax.set_to_zero()}, {"w": "a", "b": "z"})
    pstate = partition.init(PARAMS)
    assert float(pstate.inner_states["a"].inner_state.hyperparams["learning_rate"]) == pytest.approx(1e-3)


# ---------------------------------------------------------------------------
# OPX603 hyperparams-not-injected


def test_tree_get_returns_none_without_inject_and_hyperparams_raises() -> None:
    schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-3, 10, 100)
    state = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule)).init(PARAMS)
    assert optax.tree_utils.tree_get(state, "learning_rate") is None
    assert optax.tree.get(state, "learning_rate") is None
    with pytest.raises(AttributeError, match="'tuple' object has no attribute 'hyperparams'"):
        state[1].hyperparams
    with pytest.raises(AttributeError):
        optax.adam(1e-3).init(PARAMS).hyperparams


def test_state_field_holders_cover_every_colliding_name() -> None:
    """Names that are both a factory parameter and a field of some optax state: tree_get
    finds those without inject_hyperparams, so OPX603 must know them all."""
    fields: set[str] = set()
    for module in (optax, optax.contrib, optax.transforms, optax.schedules):
        for name in dir(module):
            obj = getattr(module, name, None)
            if isinstance(obj, type) and issubclass(obj, tuple) and hasattr(obj, "_fields"):
                fields |= set(obj._fields)
    params: set[str] = set()
    for module in (optax, optax.contrib, optax.transforms):
        for name in dir(module):
            obj = getattr(module, name, None)
            if callable(obj) and not isinstance(obj, type):
                try:
                    params |= set(inspect.signature(obj).parameters)
                except (TypeError, ValueError):
                    pass
    colliding = (fields & params) - {"mini_step", "inner_opt_state", "acc_grads", "skip_state"}
    assert colliding <= set(rules.STATE_FIELD_HOLDERS), colliding - set(rules.STATE_FIELD_HOLDERS)


def test_linesearch_state_holds_learning_rate() -> None:
    params = {"x": jnp.ones(3)}
    state = optax.lbfgs().init(params)
    assert optax.tree_utils.tree_get(state, "learning_rate") is not None


# ---------------------------------------------------------------------------
# OPX604 ambiguous-tree-get


def test_seed002_method1_raises_key_error() -> None:
    """Seed 002's "method 1" applied to seed 002's own complete example."""
    state = seed_optimizer(schedule=True).init(PARAMS)
    with pytest.raises(KeyError, match="Found multiple values for 'learning_rate'"):
        optax.tree_utils.tree_get(state, "learning_rate")
    # the fixes: the direct path, or a filter selecting the array leaf
    direct = state[1].hyperparams["learning_rate"]
    filtered = optax.tree_utils.tree_get(state, "learning_rate", filtering=lambda path, value: hasattr(value, "dtype"))
    assert float(direct) == float(filtered) == 0.0
    # constant learning rate: exactly one match
    assert float(optax.tree_utils.tree_get(seed_optimizer(schedule=False).init(PARAMS), "learning_rate")) == pytest.approx(1e-3)


def test_two_injected_learning_rates_are_ambiguous() -> None:
    tx = optax.chain(
        optax.inject_hyperparams(optax.adamw)(learning_rate=1e-3),
        optax.inject_hyperparams(optax.scale_by_learning_rate)(1.0),
    )
    with pytest.raises(KeyError, match="Found multiple values"):
        optax.tree_utils.tree_get(tx.init(PARAMS), "learning_rate")
    assert codes_found(
        """\
        import optax
        tx = optax.chain(
            optax.inject_hyperparams(optax.adamw)(learning_rate=1e-3),
            optax.inject_hyperparams(optax.scale_by_learning_rate)(1.0),
        )
        state = tx.init({})
        lr = optax.tree_utils.tree_get(state, "learning_rate")
        """,
        "OPX604",
    ) == [7]


def test_tree_set_on_scheduled_learning_rate_breaks_the_next_update() -> None:
    tx = seed_optimizer(schedule=True)
    state = optax.tree_utils.tree_set(tx.init(PARAMS), learning_rate=jnp.asarray(0.5))
    with pytest.raises(AttributeError, match="count"):
        tx.update(GRADS, state, PARAMS)
    with pytest.raises(AttributeError, match="count"):
        jax.jit(tx.update)(GRADS, state, PARAMS)
    constant = seed_optimizer(schedule=False)
    state = optax.tree_utils.tree_set(constant.init(PARAMS), learning_rate=jnp.asarray(0.5))
    _, state = constant.update(GRADS, state, PARAMS)
    assert float(state[1].hyperparams["learning_rate"]) == 0.5


def test_seed002_method1_fixture_raises_key_error() -> None:
    """The OPX604 fixture (seed 002's complete example with its "method 1") run as is."""
    with pytest.raises(KeyError, match="Found multiple values"):
        runpy.run_path(str(FIXTURES / "OPX604" / "bad_seed002_method1.py"), run_name="__main__")


# ---------------------------------------------------------------------------
# OPX605 inject-hyperparams-static-args


def _jitted_update(tx, params=PARAMS, **extra):
    state = tx.init(params)
    return jax.jit(lambda g, s, p: tx.update(g, s, p, **extra))(jax.tree.map(lambda x: 0.1 * x, params), state, params)


def test_inject_adafactor_fails_only_under_jit_and_static_args_cure_it() -> None:
    tx = optax.inject_hyperparams(optax.adafactor)(learning_rate=1e-2)
    tx.update(GRADS, tx.init(PARAMS), PARAMS)  # eagerly fine
    with pytest.raises(jax.errors.TracerBoolConversionError):
        _jitted_update(tx)
    params = rules.INJECT_NEEDS_STATIC["adafactor"]
    _jitted_update(optax.inject_hyperparams(optax.adafactor, static_args=tuple(params))(learning_rate=1e-2))


def test_inject_lookahead_and_adopt_need_static_args() -> None:
    lookahead = functools.partial(optax.inject_hyperparams(optax.lookahead), fast_optimizer=optax.sgd(0.1), sync_period=2, slow_step_size=0.5)
    with pytest.raises(jax.errors.TracerBoolConversionError):
        _jitted_update(lookahead())
    fixed = optax.inject_hyperparams(optax.lookahead, static_args=tuple(rules.INJECT_NEEDS_STATIC["lookahead"]))
    lp = optax.LookaheadParams(PARAMS, PARAMS)
    state = fixed(fast_optimizer=optax.sgd(0.1), sync_period=2, slow_step_size=0.5).init(lp)
    assert state is not None
    adopt = optax.inject_hyperparams(optax.contrib.adopt)(learning_rate=1e-2)
    with pytest.raises(TypeError, match="not callable"):
        adopt.update(GRADS, adopt.init(PARAMS), PARAMS)
    _jitted_update(optax.inject_hyperparams(optax.contrib.adopt, static_args=tuple(rules.INJECT_NEEDS_STATIC["contrib.adopt"]))(learning_rate=1e-2))


def test_inject_with_a_dtype_argument_fails_at_init() -> None:
    tx = optax.inject_hyperparams(optax.adamw)(learning_rate=1e-3, mu_dtype=jnp.bfloat16)
    with pytest.raises(TypeError, match="unhashable"):
        tx.init(PARAMS)
    optax.inject_hyperparams(optax.adamw, static_args="mu_dtype")(learning_rate=1e-3, mu_dtype=jnp.bfloat16).init(PARAMS)
    optax.inject_hyperparams(optax.adamw)(learning_rate=1e-3, mu_dtype="bfloat16").init(PARAMS)


@pytest.mark.parametrize("name", ["adam", "adamw", "sgd", "lion", "lamb", "rmsprop", "adagrad", "nadamw"])
def test_common_optimizers_inject_cleanly(name: str) -> None:
    assert name not in rules.INJECT_NEEDS_STATIC
    _jitted_update(optax.inject_hyperparams(getattr(optax, name))(learning_rate=1e-2))


# ---------------------------------------------------------------------------
# OPX606 optimizer-rebuilt-in-loop


def test_jitted_step_keeps_the_optimizer_it_was_traced_with() -> None:
    traces = []
    params, grads = {"w": jnp.ones(())}, {"w": jnp.ones(())}
    optimizer = optax.sgd(0.1)

    @jax.jit
    def step(p, s, g):
        traces.append(1)
        u, s = optimizer.update(g, s, p)
        return optax.apply_updates(p, u), s

    deltas = []
    for lr in (0.1, 0.0):
        optimizer = optax.sgd(lr)  # noqa: F841 - rebound as the rule describes
        state = optimizer.init(params)
        new, _ = step(params, state, grads)
        deltas.append(float(new["w"] - params["w"]))
    assert len(traces) == 1
    assert deltas == pytest.approx([-0.1, -0.1])  # the lr=0.0 optimizer was ignored


def test_optimizer_as_static_argument_recompiles_every_time() -> None:
    @functools.partial(jax.jit, static_argnums=0)
    def step(tx, p, s, g):
        u, s = tx.update(g, s, p)
        return optax.apply_updates(p, u), s

    params, grads = {"w": jnp.ones(())}, {"w": jnp.ones(())}
    for epoch in range(5):
        tx = optax.sgd(0.1 / (epoch + 1))
        params, _ = step(tx, params, tx.init(params), grads)
    assert step._cache_size() == 5


def test_init_in_the_loop_resets_the_moments() -> None:
    tx = optax.sgd(0.1, momentum=0.9)
    state = tx.init(PARAMS)
    for _ in range(3):
        _, state = tx.update(GRADS, state, PARAMS)
    assert float(jnp.abs(state[0].trace["w"]).sum()) > 0
    fresh = optax.sgd(0.1, momentum=0.9).init(PARAMS)
    assert float(jnp.abs(fresh[0].trace["w"]).sum()) == 0


# ---------------------------------------------------------------------------
# OPX607 opt-state-not-threaded


def _quadratic(p):
    return jnp.sum((p["w"] - 3.0) ** 2)


def test_initial_state_every_step_freezes_count_and_warmup() -> None:
    params = {"w": jnp.zeros((3,))}
    schedule = optax.warmup_cosine_decay_schedule(0.0, 0.1, 5, 50)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.inject_hyperparams(optax.adamw)(learning_rate=schedule))
    initial = tx.init(params)

    @jax.jit
    def step(p, s):
        u, new_s = tx.update(jax.grad(_quadratic)(p), s, p)
        return optax.apply_updates(p, u), new_s

    p = params
    for _ in range(20):
        p, last = step(p, initial)
    assert int(last[1].count) == 1
    assert float(last[1].hyperparams["learning_rate"]) == 0.0
    assert float(_quadratic(p)) == pytest.approx(27.0)  # the warmup never leaves 0: no training


def test_stateless_primitives_have_empty_states() -> None:
    factories = {
        "clip_by_global_norm": lambda: optax.clip_by_global_norm(1.0),
        "clip": lambda: optax.clip(1.0),
        "clip_by_block_rms": lambda: optax.clip_by_block_rms(1.0),
        "scale": lambda: optax.scale(-0.1),
        "add_decayed_weights": lambda: optax.add_decayed_weights(1e-4),
        "identity": lambda: optax.identity(),
        "keep_params_nonnegative": lambda: optax.keep_params_nonnegative(),
        "centralize": lambda: optax.centralize(),
        "set_to_zero": lambda: optax.set_to_zero(),
        "scale_by_trust_ratio": lambda: optax.scale_by_trust_ratio(),
        "adaptive_grad_clip": lambda: optax.adaptive_grad_clip(0.1),
        "normalize_by_update_norm": lambda: optax.normalize_by_update_norm(),
        "scale_by_param_block_norm": lambda: optax.scale_by_param_block_norm(),
        "scale_by_param_block_rms": lambda: optax.scale_by_param_block_rms(),
    }
    assert set(factories) == set(rules.STATELESS_PRIMITIVES)
    for name, factory in factories.items():
        assert jax.tree.leaves(factory().init(PARAMS)) == [], name
    assert jax.tree.leaves(optax.sgd(0.1).init(PARAMS)) == []  # constant-rate sgd: no state


def test_discarded_apply_gradients_changes_nothing() -> None:
    state = TrainState.create(apply_fn=None, params=PARAMS, tx=optax.adam(0.1))
    state.apply_gradients(grads=GRADS)
    assert int(state.step) == 0 and float(state.params["w"][0, 0]) == 1.0


# ---------------------------------------------------------------------------
# OPX608 init-update-different-optimizers


def test_state_of_one_optimizer_in_another() -> None:
    adam_state = optax.adam(1e-3).init(PARAMS)
    with pytest.raises(ValueError, match="The number of updates and states has to be the same in chain"):
        optax.adamw(1e-3).update(GRADS, adam_state, PARAMS)
    with pytest.raises(AttributeError, match="'ScaleByAdamState' object has no attribute 'trace'"):
        optax.sgd(1e-3, momentum=0.9).update(GRADS, adam_state, PARAMS)
    optax.adam(1e-2).update(GRADS, adam_state, PARAMS)  # same layout: runs silently


# ---------------------------------------------------------------------------
# OPX609 reduce-on-plateau-without-value


def test_reduce_on_plateau_needs_value_everywhere_but_nnx() -> None:
    tx = optax.chain(optax.adam(1e-3), optax.contrib.reduce_on_plateau(patience=2))
    state = tx.init(PARAMS)
    with pytest.raises(TypeError, match="required keyword-only argument: 'value'"):
        tx.update(GRADS, state, PARAMS)
    with pytest.raises(TypeError, match="required keyword-only argument: 'value'"):
        jax.jit(lambda g, s, p: tx.update(g, s, p))(GRADS, state, PARAMS)
    tx.update(GRADS, state, PARAMS, value=jnp.asarray(1.0))
    train_state = TrainState.create(apply_fn=None, params=PARAMS, tx=tx)
    with pytest.raises(TypeError, match="'value'"):
        train_state.apply_gradients(grads=GRADS, value=jnp.asarray(1.0))

    class Model(nnx.Module):
        def __init__(self, rngs):
            self.linear = nnx.Linear(2, 1, rngs=rngs)

    model = Model(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    grads = jax.tree.map(jnp.ones_like, nnx.state(model, nnx.Param))
    optimizer.update(model, grads, value=jnp.asarray(1.0))


# ---------------------------------------------------------------------------
# OPX610 manual-update-sign


def test_subtracting_optax_updates_climbs_the_loss() -> None:
    def run(apply):
        tx = optax.adam(0.1)
        p = {"w": jnp.zeros((3,))}
        s = tx.init(p)
        for _ in range(20):
            u, s = tx.update(jax.grad(_quadratic)(p), s, p)
            p = apply(p, u)
        return float(_quadratic(p))

    assert float(_quadratic({"w": jnp.zeros((3,))})) == 27.0
    assert run(lambda p, u: jax.tree.map(lambda a, b: a - b, p, u)) == pytest.approx(76.68, abs=0.05)
    assert run(optax.apply_updates) == pytest.approx(3.76, abs=0.05)


# ---------------------------------------------------------------------------
# OPX611 schedule-not-observable


def test_schedule_inside_plain_adamw_cannot_be_read_back() -> None:
    schedule = optax.warmup_cosine_decay_schedule(0.0, 3e-4, 10, 100)
    state = optax.adamw(schedule, weight_decay=0.1).init(PARAMS)
    assert optax.tree_utils.tree_get(state, "learning_rate") is None
    injected = optax.inject_hyperparams(optax.adamw)(learning_rate=schedule, weight_decay=0.1).init(PARAMS)
    assert float(injected.hyperparams["learning_rate"]) == float(schedule(0))
