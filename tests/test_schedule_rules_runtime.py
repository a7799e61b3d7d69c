"""Every optax behaviour the schedule rules (OPX301-OPX308) rely on, measured against
the installed optax (0.2.8 when written). If an optax upgrade changes one of them,
the test names the rule whose documentation must change with it.

Also checks that the linter's own schedule arithmetic (facts/schedules/analysis.py:
end steps and values over time) agrees with optax's real schedules.
"""

from __future__ import annotations

import logging
import textwrap
import warnings

import libcst as cst
import numpy as np
import pytest

optax = pytest.importorskip("optax")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from optax_lint.facts.module import ModuleFacts  # noqa: E402


def values(schedule, steps):
    """The schedule at several steps in one call (eager jax ops compile per shape)."""
    out = np.broadcast_to(np.asarray(jax.jit(schedule)(jnp.asarray(steps))), (len(steps),))
    return [float(v) for v in out]


# ---------------------------------------------------------------------------
# warmup_cosine_decay_schedule (OPX301 fix, OPX303, OPX305)


def test_warmup_cosine_decay_steps_include_the_warmup() -> None:
    s = optax.warmup_cosine_decay_schedule(0.0, 1.0, warmup_steps=10, decay_steps=100, end_value=0.1)
    got = values(s, [0, 5, 10, 55, 99, 100, 150])
    assert got[:3] == pytest.approx([0.0, 0.5, 1.0])  # peak exactly at warmup_steps
    assert got[3] == pytest.approx(0.55)  # cosine midpoint at (10 + 100) / 2
    assert got[4] > 0.1 and got[5] == pytest.approx(0.1) and got[6] == pytest.approx(0.1)  # end exactly at decay_steps


def test_decay_steps_minus_warmup_ends_a_warmup_early() -> None:
    total, warmup = 1000, 50
    misread = optax.warmup_cosine_decay_schedule(0.0, 1.0, warmup, total - warmup)
    right = optax.warmup_cosine_decay_schedule(0.0, 1.0, warmup, total)
    assert float(misread(total - warmup)) == pytest.approx(0.0, abs=1e-7)
    assert float(right(total - warmup)) > 1e-3
    assert float(right(total)) == pytest.approx(0.0, abs=1e-7)


@pytest.mark.parametrize("decay", [10, 5])
def test_decay_steps_not_above_warmup_raises(decay) -> None:
    with pytest.raises(ValueError, match=rf"positive decay_steps, got decay_steps={decay - 10}"):
        optax.warmup_cosine_decay_schedule(0.0, 1.0, warmup_steps=10, decay_steps=decay)


def test_cosine_decay_non_positive_steps_raises() -> None:
    with pytest.raises(ValueError, match="positive decay_steps"):
        optax.cosine_decay_schedule(1.0, 0)


def test_warmup_zero_is_fine_and_negative_warmup_is_silent() -> None:
    assert values(optax.warmup_cosine_decay_schedule(0.0, 1.0, 0, 100), [0, 50, 100]) == pytest.approx([1.0, 0.5, 0.0], abs=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = optax.warmup_cosine_decay_schedule(0.0, 1.0, -5, 100)
    assert float(s(0)) > 0.99  # no warmup at all, starts part-way down the cosine


def test_rising_decays() -> None:
    assert values(optax.warmup_cosine_decay_schedule(0.0, 1.0, 10, 100, end_value=2.0), [10, 55, 100]) == pytest.approx([1.0, 1.5, 2.0])
    assert values(optax.cosine_decay_schedule(1.0, 100, alpha=2.0), [0, 50, 100]) == pytest.approx([1.0, 1.5, 2.0])
    assert values(optax.exponential_decay(1.0, 10, 0.5, end_value=2.0), [0, 1, 10, 100]) == pytest.approx([2.0] * 4)


# ---------------------------------------------------------------------------
# Silent constants (OPX305)


def test_warmup_constant_with_zero_warmup_is_zero_forever(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="absl"), warnings.catch_warnings():
        warnings.simplefilter("error")  # no Python warning is raised
        s = optax.warmup_constant_schedule(0.0, 1e-3, 0)
    assert values(s, [0, 10, 1000, 10**6]) == [0.0, 0.0, 0.0, 0.0]
    records = [r for r in caplog.records if "non-positive `transition_steps`" in r.getMessage()]
    assert records and all(r.levelno == logging.INFO for r in records)  # absl INFO is the only trace


def test_linear_and_polynomial_without_transition_stay_at_init() -> None:
    assert values(optax.linear_schedule(1.0, 0.0, 0), [0, 10, 1000]) == [1.0, 1.0, 1.0]
    assert values(optax.linear_schedule(1.0, 0.0, -3), [0, 10]) == [1.0, 1.0]
    assert values(optax.polynomial_schedule(1.0, 0.0, 2, 0), [0, 10]) == [1.0, 1.0]


def test_exponential_degenerate_arguments_give_a_constant() -> None:
    assert values(optax.exponential_decay(1.0, 0, 0.5), [0, 10, 100]) == [1.0, 1.0, 1.0]
    assert values(optax.exponential_decay(1.0, 10, 0.0), [0, 10, 100]) == [1.0, 1.0, 1.0]
    s = optax.warmup_exponential_decay_schedule(0.0, 1.0, 10, 0, 0.5)
    assert values(s, [0, 5, 10, 20, 100]) == pytest.approx([0.0, 0.5, 1.0, 1.0, 1.0])


def test_schedules_that_raise_on_bad_arguments() -> None:
    with pytest.raises(ValueError, match="non-positive `transition_steps`"):
        optax.cosine_onecycle_schedule(0, 1.0)
    with pytest.raises(ValueError, match="non-positive `transition_steps`"):
        optax.linear_onecycle_schedule(0, 1.0)
    with pytest.raises(ValueError, match="non-negative scale factors"):
        optax.piecewise_constant_schedule(1.0, {10: 0.1, 20: -0.1})
    with pytest.raises(ValueError, match="non-negative scale factors"):
        optax.piecewise_interpolate_schedule("linear", 1.0, {10: -0.1})
    with pytest.raises(ValueError, match="'cosine' or 'linear'"):
        optax.piecewise_interpolate_schedule("step", 1.0, {10: 0.5})


# ---------------------------------------------------------------------------
# join_schedules (OPX306, OPX303)


def const(v):
    return optax.constant_schedule(v)


def test_join_later_pieces_see_step_minus_boundary() -> None:
    s = optax.join_schedules([const(7.0), lambda t: 100.0 + t, lambda t: 1000.0 + t], [5, 8])
    assert values(s, [4, 5, 7, 8, 9]) == [7.0, 100.0, 102.0, 1000.0, 1001.0]


def test_join_validates_nothing() -> None:
    too_few = optax.join_schedules([const(1.0), const(2.0), const(3.0)], [5])
    assert values(too_few, [0, 5, 10, 10**6]) == [1.0, 2.0, 2.0, 2.0]  # the third piece never runs
    too_many = optax.join_schedules([const(1.0), const(2.0)], [5, 8])
    assert values(too_many, [0, 5, 10]) == [1.0, 2.0, 2.0]
    unsorted = optax.join_schedules([const(1.0), const(2.0), const(3.0)], [8, 5])
    assert values(unsorted, [0, 5, 7, 8, 10]) == [1.0, 3.0, 3.0, 3.0, 3.0]  # the middle piece is skipped


def test_join_transition_begin_equal_to_boundary_waits_twice() -> None:
    s = optax.join_schedules(
        [optax.linear_schedule(0.0, 1.0, 10), optax.linear_schedule(1.0, 0.0, 90, transition_begin=10)], [10]
    )
    assert values(s, [10, 15, 20]) == pytest.approx([1.0, 1.0, 1.0])  # holds until step 20, not 10
    assert float(s(110)) == pytest.approx(0.0, abs=1e-7)


def test_join_total_minus_warmup_ends_at_total() -> None:
    total, warmup = 1000, 100
    s = optax.join_schedules(
        [optax.linear_schedule(0.0, 1.0, warmup), optax.cosine_decay_schedule(1.0, total - warmup)], [warmup]
    )
    assert float(s(warmup)) == pytest.approx(1.0)
    assert float(s(total - 1)) > 0 and float(s(total)) == pytest.approx(0.0, abs=1e-7)


def test_join_boundary_cutting_the_warmup_jumps() -> None:
    s = optax.join_schedules([optax.linear_schedule(0.0, 1.0, 20), optax.constant_schedule(1.0)], [10])
    assert values(s, [9, 10]) == pytest.approx([0.45, 1.0])


# ---------------------------------------------------------------------------
# MultiSteps (OPX307)


def test_multisteps_inner_schedule_counts_real_updates() -> None:
    ms = optax.MultiSteps(optax.sgd(lambda count: 1.0 / (count + 1)), every_k_schedule=3)
    params = jnp.zeros(())
    state = ms.init(params)
    out = []
    update_fn = jax.jit(ms.update)
    for _ in range(9):
        update, state = update_fn(jnp.ones(()), state, params)
        out.append(float(update))
    assert out == pytest.approx([0, 0, -1.0, 0, 0, -0.5, 0, 0, -1 / 3])
    assert int(state.gradient_step) == 3 and int(state.mini_step) == 0


def test_schedule_sized_in_micro_batches_barely_moves() -> None:
    k, updates = 4, 25
    lr = optax.linear_schedule(1.0, 0.0, updates * k)  # sized in micro-batches
    ms = optax.MultiSteps(optax.sgd(lr), every_k_schedule=k)
    params = jnp.zeros(())
    state = ms.init(params)
    last = None
    update_fn = jax.jit(ms.update)
    for _ in range(updates * k):
        update, state = update_fn(jnp.ones(()), state, params)
        if float(update) != 0:
            last = -float(update)
    assert last == pytest.approx(1 - (updates - 1) / (updates * k))  # ~0.76 of the peak at the very end


# ---------------------------------------------------------------------------
# The linter's schedule arithmetic agrees with optax


CASES = [
    ("optax.warmup_cosine_decay_schedule(0.0, 1e-3, 100, 1000, end_value=1e-5)", "optax.warmup_cosine_decay_schedule(0.0, 1e-3, 100, 1000, end_value=1e-5)", 1000),
    ("optax.cosine_decay_schedule(2.0, 500, alpha=0.1, exponent=2.0)", None, 500),
    ("optax.linear_schedule(1.0, 0.1, 300, transition_begin=50)", None, 350),
    ("optax.polynomial_schedule(1.0, 0.0, 2.0, 400)", None, 400),
    ("optax.warmup_constant_schedule(0.0, 1.0, 40)", None, None),
    (
        "optax.join_schedules([optax.linear_schedule(0.0, 1.0, 100), optax.cosine_decay_schedule(1.0, 900)], [100])",
        None,
        1000,
    ),
    (
        "optax.join_schedules([optax.linear_schedule(0.0, 1.0, 50), optax.constant_schedule(1.0), optax.linear_schedule(1.0, 0.0, 200)], [50, 300])",
        None,
        500,
    ),
]


def _linted_schedule(expr: str):
    src = textwrap.dedent(f"""
    import optax
    schedule = {expr}
    tx = optax.adamw(schedule)
    """)
    facts = ModuleFacts(cst.parse_module(src), "x.py", text=src)
    sf = facts.schedule_analysis
    (use, schedule), = sf.lr_schedules()
    return sf, schedule


@pytest.mark.parametrize("expr,_unused,end_step", CASES, ids=[c[0].split("(")[0] + str(i) for i, c in enumerate(CASES)])
def test_linter_values_and_end_steps_match_optax(expr, _unused, end_step) -> None:
    real = eval(expr, {"optax": optax})  # noqa: S307 - a fixed test expression
    sf, schedule = _linted_schedule(expr)
    steps = [0, 1, 25, 49, 50, 99, 100, 101, 250, 349, 350, 499, 500, 999, 1000, 2000]
    expected = values(real, steps)
    ours = [sf.shapes.value_at(schedule, t) for t in steps]
    assert ours == pytest.approx(expected, rel=1e-5, abs=1e-7)
    shape = sf.shapes.shape(schedule)
    assert shape.end_step == end_step
    if end_step is not None:
        before, end, *after = values(real, [int(end_step * 0.9), end_step, end_step + 1, end_step + 10, end_step + 1000])
        assert before != pytest.approx(end, rel=1e-3)  # not there earlier
        assert after == pytest.approx([end] * 3)  # and stays there
