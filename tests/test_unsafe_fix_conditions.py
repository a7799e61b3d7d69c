"""When OPX405 and OPX609 offer their unsafe fixes, and when they stay display-only:
a fix uses only what the file already has (a loss computed once, an imported
flax.jax_utils), never an invented name."""

from __future__ import annotations

import textwrap

from optax_lint.engine import lint as engine

PLATEAU = textwrap.dedent('''\
    import jax
    import optax

    tx = optax.chain(optax.sgd(0.1), optax.contrib.reduce_on_plateau(patience=5))


    def step(params, opt_state, x):
        {body}
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state
    ''')


def _plateau(body: str) -> str:
    return PLATEAU.replace("{body}", body.replace("\n", "\n    "))


def _fixed(text: str, code: str) -> tuple[list, str]:
    lint = engine.lint_text(text, "train.py", {code})
    return [(f.code, f.span.line, f.span.column) for f in lint.findings], engine.fix_text(text, "train.py", {code}, unsafe=True).text


def test_opx609_passes_the_one_loss_with_aux() -> None:
    text = _plateau("(loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, x)")
    findings, fixed = _fixed(text, "OPX609")
    assert findings == [("OPX609", 9, 26)]
    assert fixed == text.replace("tx.update(grads, opt_state, params)", "tx.update(grads, opt_state, params, value=loss)")


def test_opx609_no_fix_without_a_single_loss() -> None:
    two = "loss, grads = jax.value_and_grad(loss_fn)(params, x)\nloss, grads = jax.value_and_grad(other_fn)(params, x)"
    plain_grad = "grads = jax.grad(loss_fn)(params, x)"
    unknown_aux = "loss, grads = jax.value_and_grad(loss_fn, has_aux=aux)(params, x)"
    for body in (two, plain_grad, unknown_aux):
        text = _plateau(body)
        findings, fixed = _fixed(text, "OPX609")
        assert [code for code, *_ in findings] == ["OPX609"], body
        assert fixed == text, body


PMAP = textwrap.dedent('''\
    import jax
    {imports}
    from flax.training import train_state


    def main(create, p_step, batches):
        state = create()
        start = int(state.step)
        {extra}
        for batch in batches:
            state = p_step(state, batch)
        return start
    ''')


def _pmap(imports: str, extra: str = "") -> str:
    return PMAP.replace("{imports}", imports).replace("{extra}", extra)


def test_opx405_replicates_before_the_loop_when_jax_utils_is_imported() -> None:
    text = _pmap("from flax import jax_utils").replace("p_step, batches", "batches").replace(
        "    state = create()", "    state = train_state.TrainState.create(apply_fn=None, params={}, tx=None)\n"
        "    p_step = jax.pmap(lambda s, b: s)")
    findings, fixed = _fixed(text, "OPX405")
    assert findings == [("OPX405", 12, 24)]
    assert fixed == text.replace("\n    for batch", "\n    state = jax_utils.replicate(state)\n    for batch")


def test_opx405_no_fix_without_the_import_or_with_a_second_binding() -> None:
    base = _pmap("import numpy as np").replace("p_step, batches", "batches").replace(
        "    state = create()", "    state = train_state.TrainState.create(apply_fn=None, params={}, tx=None)\n"
        "    p_step = jax.pmap(lambda s, b: s)")
    rebound = base.replace("from flax.training import train_state", "from flax import jax_utils\nfrom flax.training import train_state").replace(
        "start = int(state.step)", "start = int(state.step)\n    state = train_state.TrainState.create(apply_fn=None, params={}, tx=None)")
    for text in (base, rebound):
        findings, fixed = _fixed(text, "OPX405")
        assert [code for code, *_ in findings] == ["OPX405"], text
        assert fixed == text, text


ASCENT = textwrap.dedent('''\
    import optax

    LR = 0.1
    SCHED = optax.constant_schedule(LR)
    tx = optax.chain(optax.scale_by_adam(), {last})


    def step(params, grads, state):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state
    ''')


def test_opx104_negates_the_last_step_size() -> None:
    for last, fixed_last in (("optax.scale(LR)", "optax.scale(-LR)"),
                             ("optax.scale(LR * 2)", "optax.scale(-(LR * 2))"),
                             ("optax.scale_by_schedule(SCHED)", "optax.scale_by_learning_rate(SCHED)")):
        text = ASCENT.replace("{last}", last)
        findings, fixed = _fixed(text, "OPX104")
        assert findings == [("OPX104", 5, 6)], last
        assert fixed == ASCENT.replace("{last}", fixed_last), last


def test_opx104_no_fix_when_the_last_step_is_not_a_scale() -> None:
    text = ASCENT.replace("{last}", "optax.scale(LR), optax.clip(1.0)")
    findings, fixed = _fixed(text, "OPX104")
    assert [code for code, *_ in findings] == ["OPX104"]
    assert fixed == text
