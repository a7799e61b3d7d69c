"""Extraction for the schedule rules (optax_lint/facts/schedules/analysis.py) and the
rules' decisions (OPX301-OPX308) on small snippets, with the run context passed in
declared form (as `--context` / the pragma would). The lint path never imports optax:
these tests do not either (tests/test_schedule_rules_runtime.py runs optax)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from optax_lint.core.diagnostics import Severity
from optax_lint.engine import lint as engine
from optax_lint.facts.module import ModuleFacts
from optax_lint.facts.schedules.analysis import drive_sites
from optax_lint.syntax.values import Unknown

CODES = {f"OPX30{i}" for i in range(1, 9)}


def facts(src: str, **context) -> ModuleFacts:
    src = textwrap.dedent(src)
    declared = {k: (v, "cli") for k, v in context.items()}
    return ModuleFacts(cst.parse_module(src), "x.py", declared_context=declared, text=src)


def lint(src: str, codes=None, **context):
    src = textwrap.dedent(src)
    declared = {k: (v, "cli") for k, v in context.items()}
    run = engine.lint_text(src, "x.py", codes or CODES, context=declared)
    assert run.internal_errors == 0, [f.message for f in run.findings]
    return run.findings


def found(src: str, codes=None, **context) -> list[tuple[int, str]]:
    return [(f.span.line, f.code) for f in lint(src, codes, **context)]


def only_shape(src: str):
    f = facts(src)
    sf = f.schedule_analysis
    (use, schedule), = sf.lr_schedules()
    return use, sf.shapes.shape(schedule)


# ---------------------------------------------------------------------------
# Shapes


def test_warmup_cosine_shape_ends_at_decay_steps() -> None:
    use, shape = only_shape("""
        import optax
        W = 500
        tx = optax.adamw(optax.warmup_cosine_decay_schedule(0.0, 1e-3, W, 20_000, end_value=1e-5))
    """)
    assert (shape.kind, shape.warmup, shape.decay, shape.end_step) == ("warmup_cosine", 500, "cosine", 20_000)
    assert shape.peak == 1e-3 and shape.end_value == 1e-5
    assert use.param == "learning_rate" and use.adaptive and not use.constant


def test_join_shape_follows_pieces_and_boundaries() -> None:
    _, shape = only_shape("""
        import optax
        TOTAL, WARMUP, LR = 100_000, 2_000, 3e-4
        s = optax.join_schedules(
            [optax.linear_schedule(0, LR, WARMUP), optax.linear_schedule(LR, 0, TOTAL - WARMUP)], [WARMUP])
        tx = optax.sgd(s)
    """)
    assert (shape.kind, shape.warmup, shape.decay, shape.end_step) == ("join", 2_000, "linear", 100_000)
    assert cst.Module([]).code_for_node(shape.warmup_expr) == "WARMUP"


def test_join_hold_then_decay_and_fine_tune_shapes() -> None:
    _, wsd = only_shape("""
        import optax
        s = optax.join_schedules([optax.linear_schedule(0.0, 1.0, 10), optax.constant_schedule(1.0),
                                  optax.cosine_decay_schedule(1.0, 50)], [10, 100])
        tx = optax.adam(s)
    """)
    assert (wsd.warmup, wsd.decay, wsd.end_step) == (10, "cosine", 150)
    _, ft = only_shape("""
        import optax
        tx = optax.adamw(optax.join_schedules([optax.linear_schedule(0, 1e-5, 100), optax.constant_schedule(1e-5)], [100]))
    """)
    assert (ft.warmup, ft.decay, ft.end_step) == (100, "constant", None)


@pytest.mark.parametrize(
    "call,kind,decay,end",
    [
        ("optax.cosine_decay_schedule(1e-3, 1000)", "cosine", "cosine", 1000),
        ("optax.linear_schedule(1e-3, 0.0, 300, transition_begin=-5)", "linear", "linear", 300),
        ("optax.polynomial_schedule(1e-3, 0.0, 2, 300, 10)", "polynomial", "polynomial", 310),
        ("optax.linear_schedule(0.0, 1e-3, 300)", "ramp", "constant", None),
        ("optax.exponential_decay(1e-3, 100, 0.9)", "exponential", "exponential", None),
        ("optax.piecewise_constant_schedule(1e-3, {10: 0.1})", "step", "step", None),
        ("optax.constant_schedule(1e-3)", "constant", "constant", None),
        ("optax.cosine_onecycle_schedule(1000, 1e-3)", "onecycle", "onecycle", 1000),
    ],
)
def test_shape_kinds(call, kind, decay, end) -> None:
    _, shape = only_shape(f"import optax\ntx = optax.sgd({call})\n")
    assert (shape.kind, shape.decay, shape.end_step) == (kind, decay, end)


def test_unknown_values_stay_unknown() -> None:
    _, shape = only_shape("""
        import optax
        def make(cfg):
            return optax.adamw(optax.warmup_cosine_decay_schedule(0.0, cfg.lr, cfg.warmup, cfg.total))
    """)
    assert isinstance(shape.warmup, Unknown) and isinstance(shape.end_step, Unknown)


def test_dataclass_config_defaults_are_read() -> None:
    _, shape = only_shape("""
        import dataclasses
        import optax
        @dataclasses.dataclass
        class Config:
            warmup_steps: int = 300
            total_steps: int = 9_000
        cfg = Config(total_steps=12_000)
        tx = optax.adam(optax.warmup_cosine_decay_schedule(0.0, 1e-3, cfg.warmup_steps, cfg.total_steps))
    """)
    assert (shape.warmup, shape.end_step) == (300, 12_000)


def test_dataclass_field_assigned_later_is_unknown() -> None:
    _, shape = only_shape("""
        import dataclasses
        import optax
        @dataclasses.dataclass
        class Config:
            warmup_steps: int = 300
        cfg = Config()
        cfg.warmup_steps = 10
        tx = optax.adam(optax.warmup_cosine_decay_schedule(0.0, 1e-3, cfg.warmup_steps, 1000))
    """)
    assert isinstance(shape.warmup, Unknown)


def test_schedule_through_helper_function_and_names() -> None:
    f = facts("""
        import optax
        def create_learning_rate_fn(total):
            warmup = optax.linear_schedule(0.0, 0.1, 100)
            cosine = optax.cosine_decay_schedule(0.1, total - 100)
            return optax.join_schedules([warmup, cosine], [100])
        learning_rate_fn = create_learning_rate_fn(1000)
        tx = optax.sgd(learning_rate_fn, momentum=0.9)
    """)
    (use, schedule), = f.schedule_analysis.lr_schedules()
    assert schedule.key == "join_schedules" and len(schedule.pieces) == 2


# ---------------------------------------------------------------------------
# LR uses


def test_lr_uses_constant_multisteps_injected() -> None:
    f = facts("""
        import optax
        LR = 3e-4
        a = optax.adamw(LR)
        b = optax.MultiSteps(optax.sgd(0.1), every_k_schedule=4)
        c = optax.inject_hyperparams(optax.adam)(learning_rate=1e-3)
        d = optax.chain(optax.scale_by_adam(), optax.scale_by_learning_rate(1e-3))
        e = optax.contrib.prodigy()
    """)
    uses = {u.node.call.func.attr.value if isinstance(u.node.call.func, cst.Attribute) else "inject": u for u in f.schedule_analysis.lr_uses}
    assert uses["adamw"].constant and uses["adamw"].adaptive and uses["adamw"].constant_text == "LR"
    assert uses["sgd"].multisteps is not None and not uses["sgd"].adaptive
    assert uses["inject"].injected
    assert uses["scale_by_learning_rate"].adaptive  # hand-built Adam
    assert uses["prodigy"].self_scheduling


def test_config_attribute_lr_is_constant_only_without_schedules() -> None:
    plain = facts("import optax\ndef f(config):\n    return optax.adam(config.learning_rate)\n")
    assert plain.schedule_analysis.lr_uses[0].constant
    with_schedule = facts(
        "import optax\ns = optax.cosine_decay_schedule(1.0, 10)\ndef f(config):\n    return optax.adam(config.learning_rate)\n"
    )
    use = with_schedule.schedule_analysis.lr_uses[0]
    assert not use.constant and use.lr_field


# ---------------------------------------------------------------------------
# Loops


def test_drive_sites_follow_jitted_train_step() -> None:
    f = facts("""
        import jax
        import optax
        tx = optax.adam(1e-3)
        def train_step(params, opt_state, g):
            updates, opt_state = tx.update(g, opt_state)
            return optax.apply_updates(params, updates), opt_state
        p_step = jax.jit(train_step)
        def main(params, opt_state, g):
            for epoch in range(10):
                for step in range(STEPS):
                    params, opt_state = p_step(params, opt_state, g)
    """)
    sites = drive_sites(f)
    assert len(sites) == 1
    assert [l.value for l in sites[0].loops][0] == 10
    assert cst.Module([]).code_for_node(sites[0].loops[1].expr) == "STEPS"


# ---------------------------------------------------------------------------
# Rule decisions


TRANSFORMER_CONSTANT = """
    import optax
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(3e-4, weight_decay=0.1))
"""


def test_opx301_needs_arch_or_steps() -> None:
    assert found(TRANSFORMER_CONSTANT, {"OPX301"}) == []
    assert found(TRANSFORMER_CONSTANT, {"OPX301"}, arch="mlp", steps=5000) == []
    assert found(TRANSFORMER_CONSTANT, {"OPX301"}, arch="transformer") == [(3, "OPX301")]
    assert found(TRANSFORMER_CONSTANT, {"OPX301"}, steps=20_000) == [(3, "OPX301")]
    sgd = "import optax\ntx = optax.sgd(0.1)\n"
    assert found(sgd, {"OPX301"}, arch="transformer") == []  # not adaptive, length unknown
    assert found(sgd, {"OPX301"}, steps=10_000) == [(2, "OPX301")]


def test_opx301_adafactor_update_clipping_guards_the_first_steps() -> None:
    """Adafactor's update clip after its factored second moment stands in for a warmup,
    as an alias or hand-built; without the clip, or with Adam's moments, it does not."""
    alias = "import optax\ntx = optax.adafactor(1e-2)\n"
    assert found(alias, {"OPX301"}, arch="transformer") == []
    assert found(alias, {"OPX301"}, steps=50_000) == []
    off = "import optax\ntx = optax.adafactor(1e-2, clipping_threshold=None)\n"
    assert found(off, {"OPX301"}, arch="transformer") == [(2, "OPX301")]
    hand = """
        import optax
        tx = optax.chain(
            optax.scale_by_factored_rms(),
            optax.clip_by_block_rms(1.0),
            optax.scale_by_learning_rate(1e-2),
        )
    """
    assert found(hand, {"OPX301"}, arch="transformer") == []
    assert found(hand.replace("optax.scale_by_factored_rms()", "optax.scale_by_adam()"), {"OPX301"}, arch="transformer") == [(6, "OPX301")]
    reordered = hand.replace("optax.scale_by_factored_rms(),\n            optax.clip_by_block_rms(1.0),",
                             "optax.clip_by_block_rms(1.0),\n            optax.scale_by_factored_rms(),")
    assert found(reordered, {"OPX301"}, arch="transformer") == [(6, "OPX301")]  # a clip before the moments bounds the gradient only


def test_opx301_a_files_own_ppo_objective_bounds_the_early_steps() -> None:
    """A loss that clips the policy ratio to [1 - eps, 1 + eps] (or rlax's clipped
    surrogate) drops the Transformer premise; other clips do not."""
    base = """
        import jax.numpy as jnp
        import optax
        tx = optax.adam(3e-4)

        def loss(ratio, adv, eps):
            return -jnp.minimum(ratio * adv, {clip} * adv).mean()
    """
    assert found(base.format(clip="jnp.clip(ratio, 1 - eps, 1 + eps)"), {"OPX301"}, arch="transformer") == []
    assert found(base.format(clip="jnp.clip(ratio, 1.0 - 0.2, 1.0 + 0.2)"), {"OPX301"}, arch="transformer") == []
    assert found(base.format(clip="jnp.clip(ratio, 0.0, 1.0)"), {"OPX301"}, arch="transformer") == [(4, "OPX301")]
    assert found(base.format(clip="jnp.clip(ratio, 1 - eps, 1 + 2 * eps)"), {"OPX301"}, arch="transformer") == [(4, "OPX301")]
    rlax = "import optax\nimport rlax\ntx = optax.adam(3e-4)\nl = rlax.clipped_surrogate_pg_loss(r, a, 0.2)\n"
    assert found(rlax, {"OPX301"}, arch="transformer") == []
    assert found(rlax, {"OPX301"}, arch="transformer", steps=50_000) == [(3, "OPX301")]  # a declared long run still warms up


def test_opx301_fix_builds_the_protocol_schedule() -> None:
    src = textwrap.dedent(TRANSFORMER_CONSTANT)
    fixed = engine.fix_text(src, "x.py", {"OPX301"}, unsafe=True, context={"arch": ("transformer", "cli"), "steps": (50_000, "cli")})
    flat = "".join(fixed.text.split())
    assert "optax.warmup_cosine_decay_schedule(init_value=0.0,peak_value=3e-4,warmup_steps=2000,decay_steps=50_000,)" in flat
    compile(fixed.text, "x.py", "exec")
    no_steps = engine.fix_text(src, "x.py", {"OPX301"}, unsafe=True, context={"arch": ("transformer", "cli")})
    assert no_steps.text == src  # no fix without steps
    short = engine.fix_text(src, "x.py", {"OPX301"}, unsafe=True, context={"arch": ("transformer", "cli"), "steps": (5000, "cli")})
    assert short.text == src  # under 10K steps from scratch: the protocol's constant-rate row, nothing to fix
    fine = engine.fix_text(
        src, "x.py", {"OPX301"}, unsafe=True, context={"arch": ("transformer", "cli"), "steps": (5000, "cli"), "fine_tune": (True, "cli")}
    )
    assert "optax.warmup_constant_schedule(init_value=0.0,peak_value=3e-4,warmup_steps=100," in "".join(fine.text.split())


def test_opx302_range_and_message() -> None:
    src = """
        import optax
        s = optax.warmup_cosine_decay_schedule(0.0, 1e-3, warmup_steps=WARMUP, decay_steps=100_000)
        tx = optax.adam(s)
    """
    for warmup, expect in [(500, True), (1000, False), (5000, False), (6000, True)]:
        got = lint(src.replace("WARMUP", str(warmup)), {"OPX302"}, steps=100_000)
        assert bool(got) is expect, warmup
    (finding,) = lint(src.replace("WARMUP", "1500"), {"OPX302"}, steps=50_000, arch="transformer")
    assert "2000-2500 steps" in finding.message
    assert lint(src.replace("WARMUP", "1500"), {"OPX302"}, steps=50_000, arch="transformer", fine_tune=True) == []
    assert lint(src.replace("WARMUP", "10"), {"OPX302"}) == []  # nothing known
    assert lint(src.replace("WARMUP", "10"), {"OPX302"}, steps=5_000, arch="transformer") == []  # a short run: constant-LR regime
    (conflict,) = lint(src.replace("WARMUP", "1000"), {"OPX302"}, steps=20_000, arch="transformer")
    assert "at least 2000 steps on a Transformer" in conflict.message  # 5% of 20k is under the minimum: no upper bound
    assert lint(src.replace("WARMUP", "3000"), {"OPX302"}, steps=20_000, arch="transformer") == []


def test_opx303_decay_minus_warmup_and_exact_run() -> None:
    src = """
        import optax
        TOTAL, WARMUP = 10_000, 500
        s = optax.warmup_cosine_decay_schedule(0.0, 1e-3, WARMUP, TOTAL - WARMUP)
        tx = optax.adam(s)
        for g in gradients:
            updates, opt_state = tx.update(g, opt_state)
    """
    assert found(src, {"OPX303"}) == [(4, "OPX303")]
    assert found(src, {"OPX303"}, steps=10_000) == [(4, "OPX303")]
    assert found(src, {"OPX303"}, steps=9_500) == []  # the run really is total - warmup long


def test_opx303_against_steps_reports_left_over_lr() -> None:
    src = "import optax\ntx = optax.adamw(optax.cosine_decay_schedule(1e-3, 100_000))\n"
    (finding,) = lint(src, {"OPX303"}, steps=50_000)
    assert "never reaches its end value" in finding.message and "5e-04 (50% of its peak)" in finding.message.replace("0.0005", "5e-04")
    assert lint(src, {"OPX303"}, steps=98_000) == []  # within the 5% tolerance
    (early,) = lint(src, {"OPX303"}, steps=200_000)
    assert "the last 100000 updates (50%)" in early.message


def test_opx304_info_is_downgraded() -> None:
    src = "import optax\ntx = optax.adamw(optax.warmup_cosine_decay_schedule(0.0, 1e-3, 4000, 300_000))\n"
    (finding,) = lint(src, {"OPX304"}, steps=300_000)
    assert finding.severity is Severity.INFO and "advice" in finding.message
    assert "cosine decay is also common on long runs" in finding.message  # says when the advice does not apply
    step = "import optax\ntx = optax.sgd(optax.join_schedules([optax.linear_schedule(0.0, 0.1, 500), optax.piecewise_constant_schedule(0.1, {30_000: 0.1})], [500]), momentum=0.9)\n"
    (advice,) = lint(step, {"OPX304"}, steps=50_000)
    assert advice.severity is Severity.INFO and "classic recipe for CNNs" in advice.message
    never_decays = "import optax\ntx = optax.adamw(optax.warmup_constant_schedule(0.0, 1e-3, 1000))\n"
    (warn,) = lint(never_decays, {"OPX304"}, steps=50_000)
    assert warn.severity is Severity.WARNING


def test_decay_without_warmup_is_missing_warmup_not_schedule_kind() -> None:
    nowarm = "import optax\ntx = optax.adamw(optax.cosine_decay_schedule(1e-3, 50_000))\n"
    assert lint(nowarm, {"OPX304"}, steps=50_000) == []
    (warn,) = lint(nowarm, {"OPX301"}, steps=50_000)
    assert warn.severity is Severity.WARNING and "a decay that starts at its peak" in warn.message
    assert lint(nowarm, {"OPX301"}) == []  # neither arch nor steps known
    sgd = "import optax\ntx = optax.sgd(optax.cosine_decay_schedule(0.1, 50_000), momentum=0.9)\n"
    (advice,) = lint(sgd, {"OPX301"}, steps=50_000)
    assert advice.severity is Severity.INFO and "often has none" in advice.message
    fixed = engine.fix_text(nowarm, "x.py", {"OPX301"}, unsafe=True, context={"steps": (50_000, "cli")})
    assert "optax.warmup_cosine_decay_schedule(init_value=0.0,peak_value=1e-3,warmup_steps=1000,decay_steps=50_000,)" in "".join(fixed.text.split())
    assert max(len(line) for line in fixed.text.splitlines()) <= 88
    assert lint(fixed.text, {"OPX301", "OPX302", "OPX303", "OPX304", "OPX305"}, steps=50_000) == []


def test_opx305_zero_warmup_in_warmup_cosine_is_fine() -> None:
    assert found("import optax\ns = optax.warmup_cosine_decay_schedule(0.0, 1e-3, 0, 1000)\n", {"OPX305"}) == []
    assert found("import optax\ns = optax.warmup_constant_schedule(0.0, 1e-3, 0)\n", {"OPX305"}) == [(2, "OPX305")]


def test_opx307_division_by_k_is_right() -> None:
    src = """
        import optax
        K = 4
        MICRO = 40_000
        tx = optax.MultiSteps(optax.adam(optax.cosine_decay_schedule(1e-3, MICRO // K)), every_k_schedule=K)
        for g in gradients:
            updates, opt_state = tx.update(g, opt_state)
    """
    assert found(src, {"OPX307"}) == []
    assert found(src.replace("MICRO // K", "MICRO * K"), {"OPX307"}) == [(5, "OPX307")]
    assert found(src.replace("MICRO // K", "MICRO * K").replace("K = 4", "K = 1"), {"OPX307"}) == []


def test_opx308_logged_lr_variable() -> None:
    src = """
        import optax
        sched = optax.cosine_decay_schedule(1e-3, 1000)
        tx = optax.adam(1e-3)
        for step in range(1000):
            lr = float(sched(step))
            print("lr", lr)
            updates, opt_state = tx.update(next(gradients), opt_state)
    """
    assert found(src, {"OPX308"}) == [(3, "OPX308")]
    used = src.replace('print("lr", lr)', "tx = optax.adam(lr)")
    assert found(used, {"OPX308"}) == []


def test_opx308_module_level_schedule_only_in_scripts() -> None:
    library = """
        import optax
        warmup_cosine = optax.warmup_cosine_decay_schedule(0.0, 1e-3, 100, 10_000)
        default_tx = optax.adam(1e-3)
    """
    assert found(library, {"OPX308"}) == []  # another module may import the schedule
    script = textwrap.dedent(library) + "for step in range(10_000):\n    updates, opt_state = default_tx.update(next(gradients), opt_state)\n"
    assert found(script, {"OPX308"}) == [(3, "OPX308")]


def test_opx303_one_epoch_schedule_rebuilt_per_epoch_is_silent() -> None:
    src = """
        import jax
        import optax
        def make_state(params):
            tx = optax.adam(optax.cosine_decay_schedule(1e-3, STEPS_PER_EPOCH))
            return tx, tx.init(params)
        def train_step(tx, params, opt_state, g):
            updates, opt_state = tx.update(g, opt_state)
            return optax.apply_updates(params, updates), opt_state
        def main(params, g):
            for epoch in range(NUM_EPOCHS):
                tx, opt_state = make_state(params)
                for step in range(STEPS_PER_EPOCH):
                    params, opt_state = train_step(tx, params, opt_state, g)
    """
    assert found(src, {"OPX303"}) == []
    once = src.replace("        def main(params, g):\n", "        def main(params, g):\n            tx, opt_state = make_state(params)\n")
    once = once.replace("                tx, opt_state = make_state(params)\n", "")
    assert found(once, {"OPX303"}) == [(5, "OPX303")]


def test_opx303_one_epoch_schedule_with_state_reset_per_trial_is_silent() -> None:
    src = """
        import optax
        tx = optax.adam(optax.cosine_decay_schedule(1e-3, STEPS))
        def run(make_params, g):
            for trial in range(5):
                params = make_params(trial)
                opt_state = tx.init(params)
                for step in range(STEPS):
                    updates, opt_state = tx.update(g, opt_state)
                    params = optax.apply_updates(params, updates)
    """
    assert found(src, {"OPX303"}) == []
    assert found(src.replace("opt_state = tx.init(params)", "pass"), {"OPX303"}) == [(3, "OPX303")]


def test_opx303_inferred_run_length_speaks_for_the_optimizers_the_file_steps() -> None:
    """With two optimizers, a loop's length is compared with a schedule only when the file
    ties that schedule's optimizer to its updates (here, a TrainState holds it)."""
    src = """
        import optax
        from flax.training import train_state
        g_tx = optax.adam(optax.cosine_decay_schedule(1e-3, 5_000))
        d_tx = optax.adam(1e-3)
        g_state = train_state.TrainState.create(apply_fn=None, params=gp, tx=g_tx)
        d_state = train_state.TrainState.create(apply_fn=None, params=dp, tx=d_tx)
        for step in range(20_000):
            g_state = g_state.apply_gradients(grads=gg)
            d_state = d_state.apply_gradients(grads=dg)
    """
    assert found(src, {"OPX303"}) == [(4, "OPX303")]
    # the scheduled optimizer is handed to a solver that runs its own iterations
    handed = src.replace("g_state = train_state.TrainState.create(apply_fn=None, params=gp, tx=g_tx)", "potentials = Solver(optimizer=g_tx)(problem)")
    handed = handed.replace("            g_state = g_state.apply_gradients(grads=gg)\n", "")
    assert found(handed, {"OPX303"}) == []
