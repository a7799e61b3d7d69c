"""The generated modules run under JAX on the CPU: every snapshot module in
tests/snapshots/recommend/ is loaded and stepped in one subprocess (jax imported
once; 2 host devices so the pmap modules really map), the LR read back through
inject_hyperparams equals the schedule, and the checkpoint helpers round-trip
params and opt_state with orbax. `--verify` is exercised through the CLI.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("jax")
pytest.importorskip("optax")

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = ROOT / "tests" / "snapshots" / "recommend"

RUNNER = textwrap.dedent(
    """\
    import io, json, math, os, runpy, sys, tempfile, contextlib
    import jax
    import optax
    import orbax.checkpoint as ocp

    out = {}
    for path in sys.argv[1:]:
        ns = runpy.run_path(path, run_name="recommended")
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            ns["main"](3)
        lines = [l for l in buffer.getvalue().splitlines() if l.startswith("step ")]
        losses = [float(l.split("loss ")[1].split()[0]) for l in lines]
        lrs = [float(l.split("lr ")[1]) for l in lines]
        expected = [float(ns["schedule"](k)) for k in range(3)]
        params = ns["init_params"](jax.random.PRNGKey(1))
        opt_state = ns["optimizer"].init(params)
        ckpt = {}
        if path.endswith(("large_transformer.py", "pmap_scaling.py")):
            replicated = "jax_utils" in ns
            p, s = (ns["jax_utils"].replicate(params), ns["jax_utils"].replicate(opt_state)) if replicated else (params, opt_state)
            with tempfile.TemporaryDirectory() as tmp:
                manager = ocp.CheckpointManager(tmp)
                ns["save_checkpoint"](manager, 7, p, s)
                manager.wait_until_finished()
                rp, rs = ns["restore_checkpoint"](manager, params, opt_state)
                manager.close()
            if replicated:
                rp, rs = ns["jax_utils"].unreplicate(rp), ns["jax_utils"].unreplicate(rs)
            ckpt = {
                "same_structure": jax.tree.structure(rs) == jax.tree.structure(opt_state),
                "lr_readable": float(ns["current_learning_rate"](rs)) == float(ns["current_learning_rate"](opt_state)),
            }
        out[path] = {"losses": losses, "lrs": lrs, "expected": expected, "ckpt": ckpt}
        if path.endswith("large_transformer_7b_256_devices.py"):
            # The sharding code the memory advice prints, run as written on this module's
            # optimizer (NUM_DEVICES: the devices at hand), then one jitted step on it.
            scope = {"jax": jax, "NUM_DEVICES": jax.device_count(), "optimizer": ns["optimizer"], "params": params}
            exec(os.environ["SHARDING_SNIPPET"], scope)
            from jax.sharding import NamedSharding, PartitionSpec as P

            def step(p, s, batch):
                loss, grads = jax.value_and_grad(ns["loss_fn"])(p, batch)
                updates, s = ns["optimizer"].update(grads, s, p)
                return optax.apply_updates(p, updates), s, loss

            batch = jax.device_put(ns["make_batch"](jax.random.PRNGKey(2), (8,)), NamedSharding(scope["mesh"], P("data")))
            new_params, new_state, loss = jax.jit(step, donate_argnums=(0, 1))(scope["params"], scope["opt_state"], batch)
            arrays = [x for x in jax.tree.leaves(new_state) + jax.tree.leaves(new_params) if x.ndim]
            out["sharding"] = {"loss": float(loss), "specs": sorted({str(x.sharding.spec) for x in arrays}),
                               "devices": sorted({len(x.sharding.device_set) for x in arrays})}
    print(json.dumps(out))
    """
)


def test_generated_modules_run_a_few_steps_and_read_the_lr_back() -> None:
    modules = sorted(str(p) for p in SNAPSHOTS.glob("*.py"))
    assert len(modules) >= 11
    from optax_lint.recommend.memory import SHARDING_SNIPPET

    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2", TF_CPP_MIN_LOG_LEVEL="3",
               SHARDING_SNIPPET=SHARDING_SNIPPET)
    proc = subprocess.run([sys.executable, "-c", RUNNER, *modules], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    sharding = results.pop("sharding")
    # Every array of params and optimizer state ends the step split over both devices.
    assert math.isfinite(sharding["loss"]) and sharding["devices"] == [2], sharding
    assert all("data" in spec for spec in sharding["specs"]), sharding
    for path, r in results.items():
        name = Path(path).name
        assert len(r["losses"]) == 3 and all(loss == loss and abs(loss) < 1e6 for loss in r["losses"]), name
        # The LR read back after update k is schedule(k) (inject_hyperparams stores the LR it just used).
        assert r["lrs"] == pytest.approx(r["expected"], rel=1e-2, abs=1e-12), name
    for name in ("large_transformer.py", "pmap_scaling.py"):
        ckpt = next(r["ckpt"] for p, r in results.items() if p.endswith(name))
        assert ckpt["same_structure"] and ckpt["lr_readable"], (name, ckpt)


def test_verify_builds_steps_and_checks_the_schedule(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPTAX_LINT_CACHE_DIR=str(tmp_path))
    args = ["--arch", "transformer", "--params", "1.3e9", "--steps", "50000", "--batch", "512", "--devices", "8", "--verify", "--output-format", "json"]
    proc = subprocess.run([sys.executable, "-m", "optax_lint", "recommend", *args], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    verification = json.loads(proc.stdout)["verification"]
    rows = {r["property"]: r for r in verification["results"]}
    assert verification["ok"] is True
    assert rows["LR at step 2,500"]["measured"] == "2e-4"  # the peak (capped at GPT-3's 1.3B rate), at the end of the scaled warmup
    assert rows["LR at step 50,000"]["measured"] == "1e-6"
    assert rows["hyperparams sit where the code reads them"]["measured"] == "opt_state[1].hyperparams"
    assert rows["a gradient of global norm 1e6 reaches the optimizer clipped"]["ok"] is True


def test_every_protocol_row_verifies_under_jax() -> None:
    from test_recommend import CASES

    from optax_lint.recommend.decide import decide
    from optax_lint.recommend.request import Request, validate
    from optax_lint.recommend.verify import verify
    from optax_lint.verify.runner import Worker

    extra = [  # both clips, coupled L2 before sgd; adafactor's decay that follows the schedule
        dict(arch="cnn", params=10**7, steps=5000, batch=64, memory_constrained=True, issues=("overfitting", "gradient-noise", "gradient-explosion")),
        dict(arch="mlp", params=10**8, steps=50_000, batch=256, sparse_gradients=True, issues=("overfitting",)),
    ]
    failures = []
    with Worker() as worker:
        for values in [c[1] for c in CASES] + extra:
            result = verify(decide(validate(Request(**values))), worker)
            if not result.ok:
                failures.append((values, result.error, [r for r in result.rows if r.get("ok") is not True]))
    assert not failures, failures
