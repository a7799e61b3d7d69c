"""The issue's rule and fix points, each through the real command line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from test_fix_outcomes import (
    PMAP_STEP,  # the same data-parallel step, judged through the CLI
)

ROOT = Path(__file__).resolve().parent.parent


def _write(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def _run(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optax_lint", str(path), *args], cwd=path.parent,
                          capture_output=True, text=True, timeout=120)


def _json(path: Path, *args: str) -> list[dict]:
    proc = _run(path, "--output-format", "json", "--exit-zero", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_decay_without_warmup_is_opx301_and_opinions_are_info(tmp_path: Path) -> None:
    path = _write(tmp_path, """\
        # optax-lint: context steps=50_000
        import optax
        cold = optax.adamw(optax.cosine_decay_schedule(1e-3, 50_000))
        resnet = optax.sgd(optax.join_schedules([optax.linear_schedule(0.0, 0.1, 1000), optax.piecewise_constant_schedule(0.1, {30_000: 0.1})], [1000]), momentum=0.9)
        """)
    found = {(f["line"], f["code"]): f for f in _json(path, "--select", "OPX301,OPX304")}
    assert (3, "OPX301") in found and (3, "OPX304") not in found
    assert found[(3, "OPX301")]["severity"] == "warning"
    step = found[(4, "OPX304")]
    assert step["severity"] == "info" and "classic recipe for CNNs trained with SGD" in step["message"]


def test_device_scaling_is_info_says_when_it_does_not_apply_and_fixes_at_call_time(tmp_path: Path) -> None:
    source = PMAP_STEP.format(definition="LEARNING_RATE = 1e-3", use="LEARNING_RATE")
    path = tmp_path / "train.py"
    path.write_text(source, encoding="utf-8")
    (finding,) = _json(path, "--select", "OPX403")
    assert finding["severity"] == "info"
    assert "Adam often wants a smaller factor" in finding["message"] and "does not apply" in finding["message"]
    _run(path, "--fix", "--unsafe-fixes", "--select", "OPX403")
    fixed = path.read_text(encoding="utf-8")
    assert "LEARNING_RATE = 1e-3\n" in fixed and "optax.sgd(LEARNING_RATE * jax.device_count(), momentum=0.9)" in fixed


def test_warmup_constant_fixed_at_its_definition(tmp_path: Path) -> None:
    path = _write(tmp_path, """\
        # optax-lint: context steps=100_000
        import optax
        WARMUP_STEPS = 300
        schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-3, WARMUP_STEPS, 100_000)
        tx = optax.adam(schedule)
        print(f"warmup: {WARMUP_STEPS} steps")
        """)
    _run(path, "--fix", "--unsafe-fixes", "--select", "OPX302")
    fixed = path.read_text(encoding="utf-8")
    assert "WARMUP_STEPS = 2000\n" in fixed and "warmup_cosine_decay_schedule(0.0, 1e-3, WARMUP_STEPS, 100_000)" in fixed
    assert _json(path, "--select", "OPX302") == []


def test_checkpoint_content_fix_needs_unsafe_fixes(tmp_path: Path) -> None:
    source = """\
        import optax
        import orbax.checkpoint as ocp
        tx = optax.adam(1e-3)
        opt_state = tx.init(params)
        with ocp.CheckpointManager("/tmp/ckpt") as mngr:
            for step in range(100):
                params, opt_state = train_step(params, opt_state)
                mngr.save(step, args=ocp.args.StandardSave({"params": params}))
        """
    path = _write(tmp_path, source)
    (finding,) = _json(path, "--select", "OPX501")
    assert finding["fix"]["applicability"] == "unsafe"
    _run(path, "--fix", "--select", "OPX501")
    assert path.read_text(encoding="utf-8") == textwrap.dedent(source)
    _run(path, "--fix", "--unsafe-fixes", "--select", "OPX501")
    assert '"opt_state": opt_state' in path.read_text(encoding="utf-8")


def test_missing_warmup_fix_is_formatted_and_clean_through_cli(tmp_path: Path) -> None:
    path = _write(tmp_path, """\
        # optax-lint: context arch=transformer steps=50_000
        import optax

        def train(params, batches, loss_grad):
            tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(3e-4, weight_decay=0.1))
            opt_state = tx.init(params)
            for batch in batches:
                updates, opt_state = tx.update(loss_grad(params, batch), opt_state, params)
                params = optax.apply_updates(params, updates)
            return params
        """)
    before = {f["code"] for f in _json(path)}
    _run(path, "--fix", "--unsafe-fixes")
    fixed = path.read_text(encoding="utf-8")
    assert "    lr_schedule = optax.warmup_cosine_decay_schedule(\n        init_value=0.0,\n" in fixed
    assert "optax.adamw(lr_schedule, weight_decay=0.1)" in fixed
    assert max(len(line) for line in fixed.splitlines()) <= 88
    after = {f["code"] for f in _json(path)}
    assert "OPX301" in before and not (after - before)
