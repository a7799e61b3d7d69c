"""`--verify` and `schedule` on the scripts people write (issue 22, section 2): the
learning rate and run length come from argparse, absl flags or an ml_collections config;
the defaults are assumed, and the output names each assumed value and where it was
written. Through the real entry point, one process per command for all three fixtures
(jax is imported once per process)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from tests.test_cli_experience import process

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "verify" / "assumed"
SCRIPTS = ["argparse_train.py", "absl_flags/train.py", "ml_config/train.py"]

pytestmark = [
    pytest.mark.xdist_group("verify_assumed"),
    pytest.mark.skipif(
        importlib.util.find_spec("jax") is None or importlib.util.find_spec("optax") is None,
        reason="verify extra not installed",
    ),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("assumed") / "project"
    shutil.copytree(FIXTURES, where)
    return where


@pytest.fixture(scope="module")
def verified(project: Path) -> str:
    proc = process(["check", *SCRIPTS, "--verify", "--exit-zero"], project, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def drawn(project: Path) -> str:
    proc = process(["schedule", *SCRIPTS], project, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _section(output: str, header: str) -> str:
    """The lines of one report: from its header to the next unindented line."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith(" ")), len(lines))
    return "\n".join(lines[start:end])


def _chart(output: str, header: str) -> str:
    """One chart of `schedule`: charts are separated by a blank line."""
    return next(block for block in output.split("\n\n") if block.startswith(header))


def test_verify_assumes_argparse_defaults_and_says_where(verified: str) -> None:
    report = _section(verified, "argparse_train.py:28:10: tx")
    assert "not verifiable" not in report
    assert "assumed: args.learning_rate = 0.0003, the default of --learning_rate at argparse_train.py:13" in report
    assert "assumed: args.num_train_steps = 10000, the default of --num_train_steps at argparse_train.py:15" in report
    assert "assumed: args.max_grad_norm = 1.0, the default of --max_grad_norm at argparse_train.py:17" in report
    assert "steps on a convex quadratic" in report and "✗" not in report


def test_verify_assumes_absl_flag_defaults(verified: str) -> None:
    report = _section(verified, "absl_flags/train.py:18:10: tx")
    assert "assumed: FLAGS.learning_rate = 0.001, the default of flag --learning_rate at absl_flags/train.py:9" in report
    assert "assumed: FLAGS.total_steps = 2000, the default of flag --total_steps at absl_flags/train.py:10" in report
    assert "assumed: FLAGS.momentum = 0.9, the default of flag --momentum at absl_flags/train.py:11" in report
    assert "builds" in report


def test_verify_reads_the_linked_config_module(verified: str) -> None:
    report = _section(verified, "ml_config/train.py:19:12: create_optimizer()")
    assert "assumed: config.learning_rate = 0.0002, set by get_config() at ml_config/configs/default.py:7" in report
    assert "assumed: config.num_train_steps = 5000, set by get_config() at ml_config/configs/default.py:9" in report
    assert "with zero gradients, weights shrink" in report


def test_schedule_draws_with_the_assumed_values(drawn: str) -> None:
    chart = _chart(drawn, "schedule = warmup_cosine_decay_schedule(...) at argparse_train.py:22")
    assert "assumed: args.learning_rate = 0.0003, the default of --learning_rate at argparse_train.py:13" in chart
    assert "assumed: args.warmup_steps = 500, the default of --warmup_steps at argparse_train.py:14" in drawn
    assert "┬ warmup end: step 500 (lr 3.00e-04)" in drawn
    # round y labels; the decay end and the training end share a step and one line
    assert [line.split("┤")[0].strip() for line in chart.splitlines() if "┤" in line and line.split("┤")[0].strip()] == [
        "3e-4", "2e-4", "1e-4", "0"
    ]
    assert "┬ decay end, training end: step 10,000 (lr 0)" in drawn
    assert "assumed: training end = 10,000 steps, the run context's steps, inferred from argparse_train.py:48" in chart
    flags = _chart(drawn, "schedule = cosine_decay_schedule(...) at absl_flags/train.py:17")
    assert "assumed: FLAGS.total_steps = 2000, the default of flag --total_steps at absl_flags/train.py:10" in flags
    config = _chart(drawn, "schedule = warmup_cosine_decay_schedule(...) at ml_config/train.py:13")
    assert "assumed: config.warmup_steps = 200, set by get_config() at ml_config/configs/default.py:8" in config
    assert "not drawable" not in drawn


def test_declared_context_comes_before_the_default(project: Path, tmp_path: Path) -> None:
    shutil.copy(project / "argparse_train.py", tmp_path / "train.py")
    proc = process(["schedule", "train.py"], tmp_path)  # no context: the default
    assert "args.num_train_steps = 10000" in proc.stdout
    (tmp_path / "pyproject.toml").write_text("[tool.optax-lint.context]\nsteps = 4000\n")
    proc = process(["schedule", "train.py"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "assumed: args.num_train_steps = 4000, steps declared in pyproject.toml" in proc.stdout
    assert "decay end" in proc.stdout and "step 4,000" in proc.stdout


def test_a_value_that_is_no_setting_stays_not_verifiable(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import optax\n\n\ndef lr_of(model):\n    return model.lr\n\n\ntx = optax.adam(lr_of(object()))\n"
    )
    proc = process(["check", "train.py", "--verify", "--exit-zero"], tmp_path)
    assert "tx: not verifiable: lr_of(...) is not a whitelisted optax constructor" in proc.stdout
    assert "assumed" not in proc.stdout


def test_fix_verify_prints_the_verification_of_the_fixed_chain(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import optax\n\ntx = optax.chain(optax.adamw(1e-3, weight_decay=0.01), optax.clip_by_global_norm(1.0))\n"
    )
    proc = process(["check", "train.py", "--fix", "--verify"], tmp_path, timeout=600)
    assert "1 fixed" in proc.stdout, proc.stdout + proc.stderr
    assert "Verification of the fixed code" in proc.stdout
    clipped = next(line for line in proc.stdout.splitlines() if "reaches the optimizer clipped" in line)
    assert clipped.rstrip().endswith("✓"), proc.stdout


def test_axis_ticks_are_round_even_for_float32_samples() -> None:
    from optax_lint.verify.plot import nice_ticks

    assert nice_ticks(0.0, 0.0003000000142492354) == [0.0, 0.0001, 0.0002, 0.0003]
    assert nice_ticks(0.0, 0.000287) == [0.0, 0.0001, 0.0002, 0.0003]
    assert nice_ticks(0.0, 0.0010000000474974513) == [0.0, 0.0005, 0.001]


def test_a_constant_of_a_project_module_is_assumed_with_its_place(tmp_path: Path) -> None:
    import libcst as cst

    from optax_lint.facts.module import ModuleFacts
    from optax_lint.verify.spec import SpecBuilder

    (tmp_path / "settings.py").write_text("LR = 3e-4\nSTEPS = 1000\n")
    text = "import optax\nfrom settings import LR\nimport settings\n\ntx = optax.adamw(optax.cosine_decay_schedule(LR, settings.STEPS))\n"
    (tmp_path / "train.py").write_text(text)
    facts = ModuleFacts(cst.parse_module(text), str(tmp_path / "train.py"), text=text, root=str(tmp_path))
    builder = SpecBuilder(facts)
    spec = builder.build(facts.pipelines[0].call, facts.pipelines[0].record.scope)
    assert spec["args"][0]["args"] == [{"lit": 0.0003}, {"lit": 1000}]
    assumed = [str(a) for a in builder.assumed]
    assert [a.split(",")[0] for a in assumed] == ["LR = 0.0003", "settings.STEPS = 1000"]
    assert assumed[0].endswith("settings.py:1") and assumed[1].endswith("settings.py:2")
