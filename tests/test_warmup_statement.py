"""OPX302 makes one statement per finding: the help repeats the range the message gives
(a Transformer's minimum, 1-5% of the run, or a fine-tune's range), never another rule
of thumb; a fine-tune may warm up for 10% of its run."""

from __future__ import annotations

import textwrap

from optax_lint.engine import lint as engine

HEAD = textwrap.dedent(
    """
    import jax
    import optax
    from transformers import FlaxBertForSequenceClassification
    """
)


def _run(warmup: int, total: int, pretrained: bool, declared: str = ""):
    source = f"{declared}{HEAD}"
    if pretrained:
        source += "model = FlaxBertForSequenceClassification.from_pretrained('bert-base-uncased')\nparams = model.params\n"
    else:
        source += "params = init_params(jax.random.key(0))\n"
    source += textwrap.dedent(
        f"""
        tx = optax.adamw(optax.warmup_cosine_decay_schedule(0.0, 3e-5, WARMUP(), {total}), weight_decay=0.01)
        opt_state = tx.init(params)
        for step in range({total}):
            updates, opt_state = tx.update(grads_at(params), opt_state, params)
            params = optax.apply_updates(params, updates)
        """
    ).replace("WARMUP()", "warmup")
    source = f"warmup = {warmup}\n" + source
    run = engine.lint_text(source, "train.py", {"OPX302"})
    return [f for f in run.findings if f.code == "OPX302"]


def _range_of(message: str) -> str:
    return message.split("the recommended range is ", 1)[1].split("; ", 1)[0]


def test_fine_tune_accepts_ten_percent_and_states_one_range():
    assert _run(1_200, 12_000, pretrained=True) == []  # 10% of a fine-tune
    assert _run(100, 12_000, pretrained=True) == []  # the fine-tuning row's 100 steps
    [finding] = _run(4_000, 12_000, pretrained=True)
    stated = _range_of(finding.message)
    assert stated == "100-1200 steps (up to 10% of a fine-tuning run)"
    assert "fine_tune inferred from train.py" in finding.message
    assert "Transformer" not in finding.message and "1%-5%" not in finding.message


def test_help_repeats_the_message_range():
    [finding] = _run(20, 30_000, pretrained=False, declared="# optax-lint: context arch=transformer\n")
    stated = _range_of(finding.message)
    assert stated.startswith("at least 2000 steps on a Transformer")
    assert finding.help == f"Set the warmup to {stated}" or finding.fix is not None
    [plain] = _run(20, 50_000, pretrained=False)
    assert _range_of(plain.message) == "500-2500 steps (1%-5% of the run)"
