"""Extraction for the "Updates and state" rules: optimizer-state origins, layouts and
access sites (optax_lint/facts/state/), and the rules' silence where a value
or structure cannot be known."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from optax_lint.engine import lint as engine
from optax_lint.facts.module import ModuleFacts
from optax_lint.facts.state.paths import path_expr, path_text, split_state_expr

SEED = """\
import jax
import optax

def create_optimizer():
    schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-3, 10, 100, 0.0)
    return optax.chain(
        optax.clip_by_global_norm(1.0),
        optax.inject_hyperparams(optax.adamw)(learning_rate=schedule),
    )

optimizer = create_optimizer()
opt_state = optimizer.init(params)

@jax.jit
def train_step(params, opt_state, batch):
    grads = jax.grad(loss_fn)(params, batch)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

for batch in batches:
    params, opt_state = train_step(params, opt_state, *batch)
    lr = opt_state[1].hyperparams["learning_rate"]
"""


def facts_of(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    facts = ModuleFacts(module)
    return facts, facts.state


def code(node) -> str:
    return cst.Module([]).code_for_node(node)


def lines(source: str, code_: str) -> list[int]:
    run = engine.lint_text(textwrap.dedent(source), "snippet.py", {code_})
    assert run.internal_errors == 0, [f.message for f in run.findings]
    return [f.span.line for f in run.findings if f.code == code_]


def only_pipeline(facts):
    (pipeline,) = facts.pipelines
    return pipeline


# ---------------------------------------------------------------------------
# layouts


def test_seed_layout_is_a_tuple_with_the_injected_state_at_one() -> None:
    facts, sf = facts_of(SEED)
    layout = sf.layout(only_pipeline(facts))
    assert repr(layout).startswith("tuple(opaque(clip_by_global_norm), inject(")
    assert layout.complete
    ((path, inject),) = layout.injects()
    assert path == (("index", 1),)
    assert inject.hyper["learning_rate"] == "sched"
    assert inject.hyper["weight_decay"] == "const" and "mu_dtype" not in inject.hyper and "nesterov" not in inject.hyper
    assert inject.hyper_complete


def test_layout_follow_reports_failures_and_unknowns() -> None:
    facts, sf = facts_of(SEED)
    layout = sf.layout(only_pipeline(facts))
    assert layout.follow((("index", 1),))[0].kind == "inject"
    assert layout.follow((("index", 0),))[0].kind == "opaque"
    assert layout.follow((("index", 5),)) == (None, "index 5 is out of range for a chain of 2")
    assert layout.follow((("attr", "hyperparams"),)) == (None, "the chain's state is a tuple, it has no attribute 'hyperparams'")
    assert layout.follow((("index", -1), ("attr", "inner_state")))[0].kind == "opaque"


def test_conditional_elements_make_later_indexes_uncertain() -> None:
    facts, sf = facts_of(
        """
        import optax
        def make(cfg):
            parts = [optax.clip_by_global_norm(1.0)]
            if cfg.decay:
                parts.append(optax.add_decayed_weights(1e-4))
            parts.append(optax.inject_hyperparams(optax.adam)(learning_rate=1e-3))
            return optax.chain(*parts)
        tx = make(cfg)
        """
    )
    layout = sf.layout(only_pipeline(facts))
    assert layout.exact_upto == 1 and not layout.complete
    assert layout.injects() == [(None, layout.items[2])]
    assert layout.follow((("index", 2),)) == (None, "")


def test_named_chain_multisteps_partition_and_wrapped_factory_layouts() -> None:
    facts, sf = facts_of(
        """
        import optax
        a = optax.named_chain(("clip", optax.clip(1.0)), ("opt", optax.inject_hyperparams(optax.sgd)(learning_rate=0.1)))
        b = optax.MultiSteps(optax.inject_hyperparams(optax.adam)(learning_rate=lr), every_k_schedule=4)
        c = optax.multi_transform({"x": optax.inject_hyperparams(optax.adam)(learning_rate=1e-3), "z": optax.set_to_zero()}, labels)
        d = optax.inject_hyperparams(make_chain)(learning_rate=optax.linear_schedule(0.0, 1.0, 10), weight_decay=wd)
        e = optax.inject_hyperparams(optax.adafactor, static_args="min_dim_size_to_factor")(learning_rate=1e-2)
        """
    )
    layouts = {p.name: sf.layout(p) for p in facts.pipelines}
    assert [path for path, _ in layouts["a"].injects()] == [(("key", "opt"),)]
    assert [path for path, _ in layouts["b"].injects()] == [(("attr", "inner_opt_state"),)]
    assert layouts["b"].injects()[0][1].hyper["learning_rate"] == "unknown"
    assert [path for path, _ in layouts["c"].injects()] == [(("attr", "inner_states"), ("key", "x"), ("attr", "inner_state"))]
    d = layouts["d"]
    assert d.kind == "inject" and d.inner.kind == "unknown" and not d.hyper_complete
    assert d.hyper == {"learning_rate": "sched", "weight_decay": "unknown"}
    assert "min_dim_size_to_factor" not in layouts["e"].hyper and "decay_offset" in layouts["e"].hyper


# ---------------------------------------------------------------------------
# origins


def test_state_origins_through_init_update_and_a_jitted_step() -> None:
    facts, sf = facts_of(SEED)
    pipeline = only_pipeline(facts)
    (access,) = sf.hyperparams_accesses()
    assert access.key == "learning_rate" and not access.guarded
    assert access.held.pipeline is pipeline and access.held.path == (("index", 1),)
    assert not access.held.inferred and code(access.held.origin) == "optimizer.init(params)"
    assert code(access.base) == "opt_state" and access.steps == (("index", 1),)
    (site,) = [s for s in facts.update_sites if s.kind == "update"]
    state = sf.held(site.arg(1, "state").value, site.record.scope)
    assert state.kind == "state" and state.pipeline is pipeline and code(state.origin) == "optimizer.init(params)"
    assert sf.tx_of(site.receiver, site.record.scope) is pipeline


def test_functions_jit_detection_and_call_sites() -> None:
    facts, sf = facts_of(
        """
        import functools
        import jax
        from flax import nnx

        @functools.partial(jax.jit, static_argnames=("tx",))
        def a(params, opt_state, tx):
            return params

        def b(params, lr):
            return params

        b_fast = jax.jit(b, static_argnums=(1,))

        @nnx.jit
        def c(model):
            return model

        def d(carry, x):
            return carry, x

        a(p, s, tx=t)
        b_fast(p, 0.1)
        jax.lax.scan(d, init, xs)
        """
    )
    infos = {info.name: info for info in sf.functions.values()}
    assert infos["a"].jitted and infos["a"].static == {"tx"} and len(infos["a"].calls) == 1
    assert infos["b"].jitted and infos["b"].static == {"lr"} and len(infos["b"].calls) == 1
    assert infos["c"].jitted and infos["c"].static == set()
    assert infos["d"].escapes and not infos["d"].jitted


def test_train_state_nnx_and_state_tx_origins() -> None:
    facts, sf = facts_of(
        """
        import optax
        from flax import nnx
        from flax.training import train_state

        tx = optax.adamw(1e-3)
        state = train_state.TrainState.create(apply_fn=f, params=p, tx=tx)

        def step(state, grads):
            updates, new_opt_state = state.tx.update(grads, state.opt_state, state.params)
            return state.replace(opt_state=new_opt_state)

        state = step(state, g)
        optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
        optimizer.update(model, grads)
        """
    )
    adamw = next(p for p in facts.pipelines if p.name == "tx")
    sites = [s for s in facts.update_sites if s.kind == "update"]
    tx_site, nnx_site = sites
    assert sf.tx_of(tx_site.receiver, tx_site.record.scope) is adamw
    held = sf.held(tx_site.arg(1, "state").value, tx_site.record.scope)
    assert held.kind == "state" and held.pipeline is adamw and code(held.origin).startswith("train_state.TrainState.create(")
    nnx_held = sf.held(nnx_site.receiver, nnx_site.record.scope)
    assert nnx_held.kind == "nnx" and nnx_held.pipeline.root.key == "sgd"


def test_shadowing_keeps_the_init_pipeline_of_the_state() -> None:
    facts, sf = facts_of(
        """
        import optax
        optimizer = optax.adamw(1e-3)
        opt_state = optimizer.init(params)

        def train_step(params, opt_state, grads):
            optimizer = optax.adam(1e-3)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return params, opt_state

        for grads in stream:
            params, opt_state = train_step(params, opt_state, grads)
        """
    )
    (site,) = [s for s in facts.update_sites if s.kind == "update"]
    assert sf.tx_of(site.receiver, site.record.scope).root.key == "adam"
    state = sf.held(site.arg(1, "state").value, site.record.scope)
    assert state.pipeline.root.key == "adamw" and not state.inferred


def test_unknown_callers_give_an_inferred_state_and_conflicts_give_nothing() -> None:
    facts, sf = facts_of(
        """
        import optax
        tx = optax.adam(1e-3)

        def step(params, opt_state, grads):
            updates, new_state = tx.update(grads, opt_state, params)
            return new_state

        other = optax.sgd(0.1)
        if cfg.sgd:
            s = other.init(p)
        else:
            s = tx.init(p)
        lr = s.hyperparams["learning_rate"]
        """
    )
    step = next(info for info in sf.functions.values() if info.name == "step")
    returned = sf.held(step.scope.returns[0].node.value, step.scope)
    assert returned.inferred and returned.pipeline.root.key == "adam"
    (access,) = sf.hyperparams_accesses()
    assert access.held is None


def test_tree_accesses() -> None:
    facts, sf = facts_of(
        SEED
        + """
    a = optax.tree_utils.tree_get(opt_state, "learning_rate")
    b = optax.tree.get(opt_state, "learning_rate", filtering=lambda p, v: True)
    c = optax.tree_utils.tree_get(opt_state, "b1", None)
    opt_state = optax.tree_utils.tree_set(opt_state, learning_rate=0.1, b2=0.99)
"""
    )
    gets = [t for t in sf.tree_accesses() if t.kind == "get"]
    (tree_set,) = [t for t in sf.tree_accesses() if t.kind == "set"]
    assert [(t.key, t.filtered) for t in gets] == [("learning_rate", False), ("learning_rate", True), ("b1", False)]
    assert all(t.held is not None and t.held.path == () for t in gets)
    assert tree_set.names == ("learning_rate", "b2") and not tree_set.filtered


def test_guarded_reads() -> None:
    facts, sf = facts_of(
        SEED
        + """
    if hasattr(opt_state[0], "hyperparams"):
        x = opt_state[0].hyperparams
    try:
        y = opt_state[0].hyperparams["learning_rate"]
    except AttributeError:
        y = None
"""
    )
    guarded = [a.guarded for a in sf.hyperparams_accesses()]
    assert guarded == [False, True, True]


def test_path_helpers() -> None:
    expr = cst.parse_expression('opt_state.inner_opt_state[1]["adam"]')
    base, steps = split_state_expr(expr)
    assert code(base) == "opt_state"
    assert steps == (("attr", "inner_opt_state"), ("index", 1), ("key", "adam"))
    assert code(path_expr(base, steps)) == 'opt_state.inner_opt_state[1]["adam"]'
    assert path_text("s", (("index", -1), ("attr", "hyperparams"))) == "s[-1].hyperparams"


# ---------------------------------------------------------------------------
# rules stay silent where the structure is not known


@pytest.mark.parametrize(
    "snippet",
    [
        # element appended under a condition before the injected one
        """
        import optax
        parts = [optax.clip(1.0)]
        if cfg.decay:
            parts.append(optax.add_decayed_weights(1e-4))
        parts.append(optax.inject_hyperparams(optax.adam)(learning_rate=1e-3))
        tx = optax.chain(*parts)
        s = tx.init(p)
        lr = s[1].hyperparams["learning_rate"]
        """,
        # the state may come from a checkpoint
        """
        import optax
        tx = optax.chain(optax.clip(1.0), optax.inject_hyperparams(optax.adam)(learning_rate=1e-3))
        s = tx.init(p)
        if resume:
            s = restore(path)
        lr = s[0].hyperparams["learning_rate"]
        """,
        # an optimizer chosen by name from config
        """
        import optax
        tx = optax.chain(optax.clip(1.0), getattr(optax, cfg.name)(1e-3))
        s = tx.init(p)
        lr = s[1].hyperparams["learning_rate"]
        """,
    ],
)
def test_hyperparams_rules_silent_on_unknown_structure(snippet: str) -> None:
    assert lines(snippet, "OPX602") == [] and lines(snippet, "OPX603") == []


def test_opx602_on_index_and_tuple_reads() -> None:
    source = SEED + '    a = opt_state.hyperparams["learning_rate"]\n    b = opt_state[-1].hyperparams["learning_rate"]\n'
    assert lines(source, "OPX602") == [23]  # opt_state[-1] is the injected state: fine
    assert lines(SEED.replace("opt_state[1].hyperparams", "opt_state[0].hyperparams"), "OPX602") == [22]


def test_opx601_ignores_conditional_params_needers_and_unknown_receivers() -> None:
    conditional = """
        import optax
        parts = [optax.clip(1.0)]
        if cfg.decay:
            parts.append(optax.add_decayed_weights(1e-4))
        parts.append(optax.adam(1e-3))
        tx = optax.chain(*parts)
        s = tx.init(p)
        u, s = tx.update(g, s)
        """
    assert lines(conditional, "OPX601") == []
    unknown = """
        import optax
        tx = build_optimizer(cfg)
        s = tx.init(p)
        u, s = tx.update(g, s)
        """
    assert lines(unknown, "OPX601") == []
    via_param = """
        import jax
        import optax

        @jax.jit
        def step(tx, params, s, g):
            return tx.update(g, s)

        tx = optax.lamb(1e-3)
        step(tx, params, tx.init(params), grads)
        """
    assert lines(via_param, "OPX601") == [7]


def test_opx603_tree_get_judgement() -> None:
    plain = """
        import optax
        tx = optax.adamw(1e-3)
        s = tx.init(p)
        lr = optax.tree_utils.tree_get(s, "learning_rate")
        mu = optax.tree_utils.tree_get(s, "mu")
        c = optax.tree_utils.tree_get(s, "count")
        """
    assert lines(plain, "OPX603") == [5]
    assert lines(plain.replace("optax.adamw(1e-3)", "optax.lbfgs()"), "OPX603") == []
    assert lines(plain.replace("optax.adamw(1e-3)", "optax.inject_hyperparams(optax.adamw)(learning_rate=1e-3)"), "OPX603") == []


def test_opx604_counts_holders() -> None:
    constant = SEED.replace("learning_rate=schedule", "learning_rate=1e-3") + '    lr2 = optax.tree_utils.tree_get(opt_state, "learning_rate")\n'
    assert lines(constant, "OPX604") == []
    scheduled = SEED + '    lr2 = optax.tree_utils.tree_get(opt_state, "learning_rate")\n'
    assert lines(scheduled, "OPX604") == [23]
    unknown = SEED.replace("learning_rate=schedule", "learning_rate=cfg.lr") + '    lr2 = optax.tree_utils.tree_get(opt_state, "learning_rate")\n'
    assert lines(unknown, "OPX604") == []
    tree_set = SEED + "    opt_state = optax.tree_utils.tree_set(opt_state, weight_decay=0.0, learning_rate=1e-4)\n"
    assert lines(tree_set, "OPX604") == [23]
    assert lines(tree_set.replace("learning_rate=1e-4", "b1=0.8"), "OPX604") == []


def test_opx605_needs_jit_for_traced_ints_but_not_for_dtypes() -> None:
    eager = """
        import optax
        tx = optax.inject_hyperparams(optax.adafactor)(learning_rate=1e-2)
        s = tx.init(p)
        """
    assert lines(eager, "OPX605") == []
    assert lines("import jax\n" + textwrap.dedent(eager) + "step = jax.jit(lambda p: p)\n", "OPX605") == [4]
    dtype = """
        import jax.numpy as jnp
        import optax
        tx = optax.inject_hyperparams(optax.lion)(learning_rate=1e-4, mu_dtype=jnp.bfloat16)
        """
    assert lines(dtype, "OPX605") == [4]
    assert lines(dtype.replace("jnp.bfloat16", "cfg.mu_dtype"), "OPX605") == []


def test_opx606_leaves_single_traced_factories_alone() -> None:
    once = """
        import jax
        import optax

        @jax.jit
        def step(params, opt_state, grads):
            tx = optax.adam(1e-3)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state
        """
    assert lines(once, "OPX606") == []
    static = """
        import functools
        import jax
        import optax

        @functools.partial(jax.jit, static_argnums=(3,))
        def step(params, opt_state, grads, lr):
            tx = optax.adam(lr)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state

        for epoch in range(10):
            params, opt_state = step(params, opt_state, grads, {lr})
        """
    assert lines(static.format(lr="1e-3 * 0.9 ** epoch"), "OPX606") == [8]
    assert lines(static.format(lr="cfg.lr"), "OPX606") == []  # one value: compiled once
    sweep = """
        import optax
        for lr in (1e-3, 3e-4):
            params = init_params(key)
            tx = optax.adam(lr)
            opt_state = tx.init(params)
            for batch in batches:
                params, opt_state = train_step(params, opt_state, batch, tx)
        """
    assert lines(sweep, "OPX606") == []  # a fresh optimizer per trial is the point of a sweep
    reinit = once.replace("            updates, opt_state", "            opt_state = tx.init(params)\n            updates, opt_state")
    assert lines(reinit, "OPX606") == [7]


def test_opx606_a_jitted_function_that_runs_the_whole_training_may_init_its_optimizer() -> None:
    """init inside jit starts one training run per call when the function steps the
    optimizer many times itself (a Python loop, or a body it hands to lax.fori_loop)."""
    python_loop = """
        import jax
        import optax

        @jax.jit
        def fit(params, batches):
            tx = optax.adam(1e-3)
            opt_state = tx.init(params)
            for batch in batches:
                updates, opt_state = tx.update(jax.grad(loss)(params, batch), opt_state, params)
                params = optax.apply_updates(params, updates)
            return params
        """
    assert lines(python_loop, "OPX606") == []
    scanned = """
        import jax
        import optax

        @jax.jit
        def fit(params, xs):
            tx = optax.adam(1e-3)
            opt_state = tx.init(params)

            def body(carry, x):
                params, opt_state = carry
                updates, opt_state = tx.update(jax.grad(loss)(params, x), opt_state, params)
                return (optax.apply_updates(params, updates), opt_state), None

            (params, _), _ = jax.lax.scan(body, (params, opt_state), xs)
            return params
        """
    assert lines(scanned, "OPX606") == []
    # a nested function that steps once, with no lax loop handing it the steps: still one step per call
    assert lines(scanned.replace("jax.lax.scan(body, (params, opt_state), xs)", "body((params, opt_state), xs)"), "OPX606") == [7]


def test_opx610_respects_the_pipeline_sign() -> None:
    source = """
        import jax
        import optax
        tx = {tx}
        u, s = tx.update(g, s, p)
        p = jax.tree.map(lambda a, b: a - b, p, u)
        """
    assert lines(source.format(tx="optax.sgd(0.1)"), "OPX610") == [6]
    assert lines(source.format(tx="optax.chain(optax.scale_by_adam(), optax.scale(1e-3))"), "OPX610") == []
    assert lines(source.format(tx="make_tx()"), "OPX610") == []
    negated = source.format(tx="optax.sgd(0.1)").replace("tx.update(g, s, p)", "tx.update(jax.tree.map(lambda x: -x, g), s, p)")
    assert lines(negated, "OPX610") == []


def test_opx611_only_for_used_pipelines_and_unobserved_schedules() -> None:
    source = """
        import optax
        schedule = optax.cosine_decay_schedule(1e-3, 1000)
        tx = optax.adam(schedule)
        {use}
        """
    assert lines(source.format(use=""), "OPX611") == []  # built but never used here
    trains = "s = tx.init(p)\n        for g in grads:\n            u, s = tx.update(g, s)"
    assert lines(source.format(use=trains), "OPX611") == []  # a named schedule: schedule(step) reads it
    inline = source.replace("tx = optax.adam(schedule)", "tx = optax.adam(optax.cosine_decay_schedule(1e-3, 1000))")
    assert lines(inline.format(use=trains), "OPX611") == [4]
    assert lines(inline.format(use="s = tx.init(p)"), "OPX611") == []  # never stepped: no training run to log
    injected = inline.replace("optax.adam(optax", "optax.inject_hyperparams(optax.adam)(optax")
    assert lines(injected.format(use=trains), "OPX611") == []
