"""Every runtime claim in the OPX201-OPX206 docs and the run-context docs, measured
against the installed jax/optax (small runs, jitted, CPU).

If an optax upgrade changes one of these numbers, the rule's doc (rules/OPX20x.toml)
and possibly the rule must change with it.
"""

from __future__ import annotations

import inspect
import textwrap

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
optax = pytest.importorskip("optax")


def _stall_ratio(tx, n: int = 1000, steps: int = 60, spike_at: int = 10) -> float:
    """Update norm 50 steps after one corrupted batch (gradient 1000x the usual),
    relative to the update norm before it."""
    params = {"w": jnp.ones(n)}
    state = tx.init(params)

    def body(carry, k):
        p, s = carry
        g = jnp.full(n, 0.01) * jnp.where(k == spike_at, 1e3, 1.0)
        u, s = tx.update({"w": g}, s, p)
        return (optax.apply_updates(p, u), s), optax.tree.norm(u)

    run = jax.jit(lambda p, s: jax.lax.scan(body, (p, s), jnp.arange(steps)))
    _, norms = run(params, state)
    return float(norms[-1] / norms[spike_at - 1])


def test_opx201_opx202_unclipped_spike_stalls_adam():
    base = lambda: optax.adamw(1e-3, weight_decay=0.0)  # noqa: E731
    unclipped = _stall_ratio(base())
    clip_1 = _stall_ratio(optax.chain(optax.clip_by_global_norm(1.0), base()))
    clip_100 = _stall_ratio(optax.chain(optax.clip_by_global_norm(100.0), base()))
    assert unclipped == pytest.approx(0.012, abs=0.003)  # OPX201: "1.2% of normal"
    assert clip_1 == pytest.approx(0.93, abs=0.02)  # OPX201/202: "93%"
    assert clip_100 == pytest.approx(0.03, abs=0.005)  # OPX202: "only 3%"


def test_opx203_adamw_default_decay_is_1e4_and_barely_decays():
    assert inspect.signature(optax.adamw).parameters["weight_decay"].default == 1e-4

    def decayed(tx, steps=1000):
        params = {"w": jnp.ones(4)}

        def body(carry, _):
            p, s = carry
            u, s = tx.update(jax.tree.map(jnp.zeros_like, p), s, p)
            return (optax.apply_updates(p, u), s), None

        (p, _), _ = jax.jit(lambda p, s: jax.lax.scan(body, (p, s), None, length=steps))(params, tx.init(params))
        return float(p["w"][0])

    assert decayed(optax.adamw(1e-3, weight_decay=0.1)) == pytest.approx(0.905, abs=1e-3)
    assert decayed(optax.adamw(1e-3)) == pytest.approx(0.99988, abs=2e-5)


def test_opx204_adam_steps_by_lr_whatever_the_gradient_and_schedule_peak():
    tx = optax.adam(1e-3)
    params = {"w": jnp.array([1.0, -2.0, 0.5])}
    updates, _ = tx.update({"w": jnp.array([1e-6, 5.0, -300.0])}, tx.init(params), params)
    assert [round(float(u), 5) for u in updates["w"]] == [-0.00099, -0.001, 0.001]
    schedule = optax.warmup_cosine_decay_schedule(0.0, 3e-4, 100, 1000)
    assert float(jnp.max(jax.vmap(schedule)(jnp.arange(1001)))) == pytest.approx(3e-4)
    assert float(schedule(100)) == pytest.approx(3e-4)


def test_opx205_lamb_scales_each_layer_by_its_weight_norm():
    import numpy as np

    params = {"a": jnp.full(10, 3.0), "b": jnp.full(5, 0.1)}
    grads = {
        "a": jnp.asarray(np.random.RandomState(0).randn(10), jnp.float32),
        "b": jnp.asarray(np.random.RandomState(1).randn(5) * 100, jnp.float32),
    }

    def ratios(tx):
        updates = jax.jit(lambda s: tx.update(grads, s, params)[0])(tx.init(params))
        return {k: float(jnp.linalg.norm(updates[k]) / jnp.linalg.norm(params[k])) for k in params}

    lamb = ratios(optax.lamb(1e-2))
    adam = ratios(optax.adam(1e-2))
    assert lamb["a"] == pytest.approx(0.01, rel=1e-4) and lamb["b"] == pytest.approx(0.01, rel=1e-4)
    assert adam["a"] == pytest.approx(0.0033, abs=2e-4) and adam["b"] == pytest.approx(0.1, abs=1e-3)
    assert hasattr(optax, "lars")


def test_opx206_coupled_l2_through_adam_ignores_the_decay_strength():
    def trajectory(tx, steps=3):
        p = {"w": jnp.ones(1)}
        s = tx.init(p)
        out = []
        for _ in range(steps):
            u, s = tx.update({"w": jnp.zeros(1)}, s, p)
            p = optax.apply_updates(p, u)
            out.append(round(float(p["w"][0]), 4))
        return out

    strong = trajectory(optax.chain(optax.add_decayed_weights(0.1), optax.adam(0.1)))
    weak = trajectory(optax.chain(optax.add_decayed_weights(0.001), optax.adam(0.1)))
    assert strong == weak == [0.9, 0.8004, 0.7016]
    assert trajectory(optax.adamw(0.1, weight_decay=0.1)) == [0.99, 0.9801, 0.9703]
    assert trajectory(optax.adamw(0.1, weight_decay=0.001)) == [0.9999, 0.9998, 0.9997]


def test_context_multisteps_updates_once_per_k_micro_batches():
    """Run context: loop iterations under MultiSteps(k) are micro-batches; steps = n // k."""
    ms = optax.MultiSteps(optax.sgd(0.1), every_k_schedule=4)
    params = {"w": jnp.ones(1)}
    update = jax.jit(lambda s: ms.update({"w": jnp.ones(1)}, s, params)[1])
    state = ms.init(params)
    for _ in range(12):
        state = update(state)
    assert int(state.gradient_step) == 3


@pytest.mark.parametrize(
    "expr, horizon",
    [
        ("optax.warmup_cosine_decay_schedule(0.0, 3e-4, 100, 1000)", 1000),
        ("optax.join_schedules([optax.linear_schedule(0.0, 5e-4, 300), optax.linear_schedule(5e-4, 0.0, 700)], [300])", 1000),
        ("optax.join_schedules([optax.linear_schedule(0.0, 2e-4, 100), optax.constant_schedule(2e-4)], [100])", 500),
        ("optax.piecewise_constant_schedule(1e-3, {100: 2.0, 200: 0.1})", 300),
        ("optax.exponential_decay(1e-3, 100, 0.5)", 500),
        ("optax.cosine_onecycle_schedule(1000, 3e-3)", 1000),
    ],
)
def test_opx204_schedule_peak_matches_optax(expr, horizon):
    """The peak OPX204 reads from a schedule's arguments is the schedule's real maximum."""
    import libcst as cst

    from optax_lint.facts.module import ModuleFacts
    from optax_lint.rules.protocol.fine_tune_learning_rate import schedule_peak

    source = textwrap.dedent(f"import optax\nschedule = {expr}\n")
    facts = ModuleFacts(cst.parse_module(source), "x.py")
    schedule = next(s for s in facts.schedules if s.name == "schedule")
    real = eval(expr, {"optax": optax})  # noqa: S307 - the test's own literal expressions
    measured = float(jnp.max(jax.jit(jax.vmap(real))(jnp.arange(horizon + 1))))
    assert schedule_peak(schedule) == pytest.approx(measured, rel=1e-5)
