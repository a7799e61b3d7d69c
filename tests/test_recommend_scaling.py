"""Issue 22: recommendations nobody can get hurt by.

The peak learning rate is tied to the batch its base rate was tuned for, scaled
linearly (SGD-like) or by the square root (adaptive), and never past the stability
ceiling (GPT-3's published rates by size for Adam-family Transformers); the memory
verdict states whether params, grads and optimizer state fit one device, and what fits
when they do not. The rows the issue does not touch keep today's numbers.
"""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from optax_lint.cli import main
from optax_lint.core.catalogue import load_table
from optax_lint.core.lr_scaling import (
    device_scaled_code,
    lr_ceiling,
    scale_learning_rate,
    scaling_rule,
)
from optax_lint.recommend import codegen, memory, render
from optax_lint.recommend.decide import decide
from optax_lint.recommend.request import Request, validate

GPT3 = {125e6: 6.0e-4, 350e6: 3.0e-4, 760e6: 2.5e-4, 1.3e9: 2.0e-4, 2.7e9: 1.6e-4, 6.7e9: 1.2e-4, 13e9: 1.0e-4, 175e9: 0.6e-4}


def recommendation(**values):
    return decide(validate(Request(**values)))


def cli(*args):
    return CliRunner().invoke(main, ["recommend", *args])


def flat(rec) -> str:
    """The text output with its wrapping undone."""
    return " ".join(render.text(rec).split())


# ---------------------------------------------------------------------------
# The issue's case: 7B parameters, batch 4 on 256 devices


def test_7b_on_256_devices_stays_under_the_ceiling_and_says_both_numbers() -> None:
    rec = recommendation(arch="transformer", params=7_000_000_000, steps=500_000, batch=4, devices=256)
    exact = math.exp(math.log(1.2e-4) + math.log(7 / 6.7) / math.log(13 / 6.7) * math.log(1.0e-4 / 1.2e-4))
    assert rec.peak_lr == 1.18e-4 and rec.peak_lr <= exact  # was 3e-4 x 256 = 0.0768
    assert rec.linear_rule_lr == pytest.approx(0.0768) and rec.scaling.scaled == 3e-4  # 1,024 = the reference batch
    text = flat(rec)
    assert "would give 0.0768" in text and "capped at 1.18e-4" in text and "Brown et al. 2020, Table 2.1" in text
    assert "square-root" in text or "is not above it" in text
    code = codegen.configuration(rec)
    assert "LR_CEILING = 1.18e-4" in code
    assert "PEAK_LEARNING_RATE = min(BASE_LEARNING_RATE * max(GLOBAL_BATCH / REFERENCE_BATCH, 1.0) ** 0.5, LR_CEILING)" in code


def test_7b_on_256_devices_has_a_memory_verdict_with_what_fits() -> None:
    rec = recommendation(arch="transformer", params=7_000_000_000, steps=500_000, batch=4, devices=256)
    mem = memory.memory(rec)
    assert (mem.param_bytes, mem.grad_bytes, mem.state_bytes) == (28e9, 28e9, 56e9)  # 4 + 4 + 8 B per parameter
    assert not mem.fits and mem.device == "an 80 GB accelerator"
    fits = {a.what.split(" (")[0].split(":")[0]: (a.per_device, a.fits(mem.device_bytes)) for a in mem.alternatives}
    assert fits["shard the optimizer state across the 256 devices"] == (28e9 + 28e9 + 56e9 / 256, True)
    assert fits["shard params, grads and optimizer state across the 256 devices"] == (112e9 / 256, True)
    assert fits["optax.adafactor"][1] is True
    bf16 = [a for a in mem.alternatives if "mu_dtype=jnp.bfloat16" in a.what]
    assert [a.per_device for a in bf16] == [98e9, 28e9 + 28e9 + 42e9 / 256]  # alone it does not fit; sharded it does
    text = flat(rec)
    assert "112 GB: does not fit an 80 GB accelerator" in text
    assert "NamedSharding(mesh, P(" in text and "out_shardings=state_shardings" in text
    assert '"mu_dtype" to static_args' in text
    assert "# MEMORY:" in codegen.module(rec) and "does not fit an 80 GB accelerator" in codegen.module(rec)


def test_the_optax_adamw_in_use_takes_mu_dtype() -> None:
    """The advice names optax.adamw(..., mu_dtype=...): the installed optax must have it."""
    optax = pytest.importorskip("optax")
    import inspect

    for name, info in load_table("protocol")["optimizers"].items():
        assert ("mu_dtype" in inspect.signature(getattr(optax, name)).parameters) == bool(info.get("mu_dtype")), name


# ---------------------------------------------------------------------------
# Unchanged: fine-tuning and small models (today's numbers, before issue 22)

TODAY = [  # (request, peak LR, warmup, schedule kind): the output of `recommend` before issue 22
    (dict(arch="mlp", params=1_000_000, steps=5_000, batch=128), 1e-3, 0, "constant"),
    (dict(arch="cnn", params=10_000_000, steps=5_000, batch=128), 1e-3, 0, "constant"),
    (dict(arch="cnn", params=25_000_000, steps=50_000, batch=256, issues=("gradient-explosion",)), 1e-3, 1000, "warmup_cosine"),
    (dict(arch="cnn", params=25_000_000, steps=30_000, batch=256, memory_constrained=True), 1e-2, 600, "warmup_cosine"),
    (dict(arch="mlp", params=100_000_000, steps=50_000, batch=256, sparse_gradients=True), 1e-3, 1000, "warmup_cosine"),
    (dict(arch="transformer", params=350_000_000, steps=20_000, batch=32, fine_tune=True), 1e-5, 200, "warmup_constant"),
    (dict(arch="transformer", params=100_000_000, steps=5_000, batch=32), 3e-4, 500, "warmup_constant"),
]


@pytest.mark.parametrize("values,peak,warmup,kind", TODAY)
def test_fine_tuning_and_small_model_rows_are_unchanged(values, peak, warmup, kind) -> None:
    rec = recommendation(**values)
    assert (rec.peak_lr, rec.warmup, rec.schedule_kind) == (peak, warmup, kind)
    assert rec.plain_lr and not any(d.table == "learning rate" for d in rec.trace)
    assert f"PEAK_LEARNING_RATE = {codegen.py_number(peak)}  # {rec.row['scenario']}\n" in codegen.configuration(rec)
    assert "# MEMORY:" not in codegen.module(rec)


# ---------------------------------------------------------------------------
# The rule and the ceiling (core/lr_scaling.py, shared with OPX403's fix)


def test_ceiling_is_gpt3_table_interpolated_in_log_space_and_held_at_the_ends() -> None:
    for params, rate in GPT3.items():
        assert lr_ceiling("adamw", "transformer", params).value == pytest.approx(rate, rel=1e-12)
    assert lr_ceiling("adam", "transformer", 50e6).value == 6.0e-4 and lr_ceiling("adamw", "transformer", 1e12).value == 0.6e-4
    sizes = sorted(GPT3)
    for lo, hi in zip(sizes, sizes[1:]):
        mid = math.sqrt(lo * hi)  # the log-space midpoint gets the geometric mean of the two rates
        value = lr_ceiling("adamw", "transformer", mid).value
        exact = math.sqrt(GPT3[lo] * GPT3[hi])
        assert value <= exact and value == pytest.approx(exact, rel=1e-2), (mid, value, exact)
    assert lr_ceiling("lamb", "transformer", 7e9) is None  # LAMB's rates do not transfer from Adam
    assert lr_ceiling("adamw", "cnn", 7e9) is None and lr_ceiling("sgd", "transformer", 7e9) is None


def test_ceiling_table_in_protocol_toml_matches_the_paper() -> None:
    rows = load_table("protocol")["lr_ceiling"]["rows"]
    assert {r["params"]: r["peak_learning_rate"] for r in rows} == GPT3


def test_linear_for_sgd_like_square_root_for_adaptive() -> None:
    assert [scaling_rule(o) for o in ("sgd", "lars", "adam", "adamw", "lamb", "adafactor", "unheard_of")] == \
        ["linear", "linear", "sqrt", "sqrt", "sqrt", "sqrt", "sqrt"]
    table = load_table("protocol")
    for name, info in table["optimizers"].items():  # the optimizers table agrees with the rule's lists
        assert (scaling_rule(name) == "sqrt") == info["adaptive"], name
    assert scale_learning_rate(0.1, 256, 1024, "sgd").peak == pytest.approx(0.4)
    assert scale_learning_rate(1e-3, 256, 1024, "adam").peak == pytest.approx(2e-3)
    assert scale_learning_rate(1e-3, 256, 64, "adam", up_only=True).peak == 1e-3  # a row's rate stands below its batch
    assert scale_learning_rate(1e-3, 256, 64, "adam").peak == pytest.approx(5e-4)  # a tuned rate scales both ways


def test_recommendations_scale_from_the_reference_batch() -> None:
    adam = recommendation(arch="mlp", params=1e6, steps=50_000, batch=1024)  # 4 x the default row's 256
    assert adam.peak_lr == pytest.approx(2e-3) and "BASE_LEARNING_RATE * (BATCH_SIZE / REFERENCE_BATCH) ** 0.5" in codegen.configuration(adam)
    sgd = recommendation(arch="cnn", params=1e6, steps=50_000, batch=256, devices=8, memory_constrained=True)
    assert sgd.peak_lr == pytest.approx(8e-2) and "linear scaling" in flat(sgd)
    small = recommendation(arch="cnn", params=1e6, steps=50_000, batch=16, devices=4, memory_constrained=True)
    assert small.peak_lr == 1e-2  # 64 examples per step: below the reference batch, the rate stands
    assert "max(GLOBAL_BATCH / REFERENCE_BATCH, 1.0)" in codegen.configuration(small)  # and still follows the device count


def test_opx403_fix_text_follows_the_same_rule() -> None:
    assert device_scaled_code("0.1", "sgd") == "0.1 * jax.device_count()"
    assert device_scaled_code("3e-4", "adamw") == "3e-4 * jax.device_count() ** 0.5"
    assert device_scaled_code("LR", "adamw", "jnp_jax.device_count()", arch="transformer", params=7e9) == \
        "min(LR * jnp_jax.device_count() ** 0.5, 1.18e-4)"
    assert device_scaled_code("base + 1e-5", "sgd") == "(base + 1e-5) * jax.device_count()"


# ---------------------------------------------------------------------------
# --base-lr / --base-batch and --device-memory


def test_base_lr_and_base_batch_replace_the_rows_rate_and_scale_both_ways() -> None:
    rec = recommendation(arch="mlp", params=1e6, steps=50_000, batch=256, devices=4, base_lr=4e-3, base_batch=4096)
    assert rec.peak_lr == pytest.approx(2e-3)  # adam: 4e-3 x sqrt(1024 / 4096)
    assert any(d.row == "Your tuned rate" for d in rec.trace)
    capped = recommendation(arch="transformer", params=7e9, steps=50_000, batch=8, devices=64, base_lr=6e-4, base_batch=512)
    assert capped.peak_lr == 1.18e-4  # the user's rate is still held to the ceiling
    data = json.loads(cli("--arch", "mlp", "--params", "1e6", "--steps", "50000", "--batch", "256", "--devices", "4",
                          "--base-lr", "4e-3", "--base-batch", "4096", "--output-format", "json").output)
    assert data["learning_rate"]["peak"] == pytest.approx(2e-3) and data["learning_rate"]["reference_batch"] == 4096
    assert data["learning_rate"]["rule"] == "sqrt" and data["learning_rate"]["scaled_only_above_reference"] is False


@pytest.mark.parametrize("args,message", [
    (["--base-lr", "3e-4"], "--base-lr needs --base-batch"),
    (["--base-batch", "512"], "--base-batch needs --base-lr"),
    (["--base-lr", "fast", "--base-batch", "512"], "--base-lr: expected a positive number"),
    (["--device-memory", "-1"], "--device-memory: expected a positive number"),
])
def test_new_flags_name_themselves_in_errors(args, message) -> None:
    result = cli("--arch", "mlp", "--params", "1e6", "--steps", "1000", "--batch", "8", *args)
    assert result.exit_code == 2 and message in result.output, result.output


def test_device_memory_sets_the_verdict() -> None:
    at_limit = memory.memory(recommendation(arch="transformer", params=1e9, steps=50_000, batch=8, device_memory_gb=16))
    assert at_limit.total == 16e9 and at_limit.fits and at_limit.device == "a 16 GB accelerator"  # 16 B x 1B
    assert not memory.memory(recommendation(arch="transformer", params=1e9, steps=50_000, batch=8, device_memory_gb=15.5)).fits
    text = flat(recommendation(arch="transformer", params=2e9, steps=50_000, batch=8, device_memory_gb=16))
    assert "32 GB: does not fit a 16 GB accelerator" in text
    assert "shard params, grads and optimizer state across 2 or more devices" in text
    data = json.loads(cli("--arch", "mlp", "--params", "1e6", "--steps", "1000", "--batch", "8", "--device-memory", "40",
                          "--output-format", "json").output)
    assert data["expected"]["memory"]["fits"] is True and data["expected"]["memory"]["device_memory_bytes"] == 40e9
