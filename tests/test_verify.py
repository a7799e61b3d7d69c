"""--verify: chains built under JAX from the extracted spec, never from the user's file.

One worker process serves the whole module (jax is imported once), as in a real run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

pytest.importorskip("jax")
pytest.importorskip("optax")

from optax_lint.core.catalogue import load_catalogue  # noqa: E402
from optax_lint.engine import lint as engine  # noqa: E402
from optax_lint.facts.module import ModuleFacts  # noqa: E402
from optax_lint.verify.gate import make_gate  # noqa: E402
from optax_lint.verify.plot import plot_text, render_chart  # noqa: E402
from optax_lint.verify.report import verify_text  # noqa: E402
from optax_lint.verify.runner import Worker  # noqa: E402
from optax_lint.verify.spec import NotVerifiable, SpecBuilder  # noqa: E402

# Its module fixtures are costly: one xdist worker computes them once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("verify")

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "fixtures" / "verify"


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    os.environ.setdefault("OPTAX_LINT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    with Worker(timeout=180) as w:
        yield w


def _report(worker, name: str):
    path = CASES / name
    reports = verify_text(path.read_text(), str(path), worker)
    assert len(reports) == 1, reports
    assert reports[0].verifiable, reports[0].reason
    return reports[0]


# rule -> (check, what the measurement must show before the fix)
@pytest.mark.parametrize(
    "code, check",
    [("OPX101", "clip"), ("OPX102", "decay"), ("OPX104", "descent"), ("OPX602", "hyperparams")],
)
def test_property_fails_on_bad_and_holds_on_fixed(worker, code: str, check: str) -> None:
    bad = _report(worker, f"{code}_bad.py").property(check)
    fixed = _report(worker, f"{code}_fixed.py").property(check)
    assert bad is not None and fixed is not None
    assert bad["ok"] is False, bad
    assert fixed["ok"] is True, fixed


def test_clip_after_adam_lets_the_spike_into_the_moments(worker) -> None:
    measured = _report(worker, "OPX101_bad.py").property("clip")["measured"]
    largest = float(measured.split("largest state value ")[1].split(" ")[0])
    assert largest > 1e6  # Adam's second moment holds the unclipped spike


def test_decay_after_adam_grows_the_weights(worker) -> None:
    report = _report(worker, "OPX102_bad.py")
    measured = report.property("decay")["measured"]
    assert measured.startswith("w: 1.0 -> 1.1 ")
    descent = report.property("descent")
    assert descent["ok"] is False  # the quadratic's loss rises


def test_double_decay_shows_more_than_the_declared_rate(worker) -> None:
    bad = _report(worker, "OPX103_bad.py")
    fixed = _report(worker, "OPX103_fixed.py")
    rate = [r for r in bad.results if r["property"] == "decay rate matches the declared value"][0]
    good = [r for r in fixed.results if r["property"] == "decay rate matches the declared value"][0]
    assert rate["ok"] is False and float(rate["measured"].split("(")[1].split("x")[0]) > 2.0
    assert good["ok"] is True and "(1.00x)" in good["measured"]


def test_update_without_params_raises_for_adamw_not_adam(worker) -> None:
    needs = _report(worker, "OPX601_bad.py").property("params")
    assert needs["ok"] is True and "requires the current value of parameters" in needs["measured"]
    fine = _report(worker, "OPX601_fixed.py").property("params")
    assert fine["measured"] == "works"


def test_multisteps_schedule_counts_real_updates(worker) -> None:
    report = _report(worker, "OPX307_bad.py")
    prop = report.property("multisteps")
    assert prop["ok"] is True
    assert prop["measured"] == "3 after 12 micro-steps"  # warmup of 400 lasts 1,600 micro-batches


def test_fix_verify_accepts_a_real_fix_and_refuses_a_wrong_one(worker, monkeypatch) -> None:
    text = (CASES / "OPX101_bad.py").read_text()
    gate = make_gate(worker, "OPX101_bad.py")
    good = engine.fix_text(text, "OPX101_bad.py", {"OPX101"}, gate=gate)
    assert good.applied == 1 and good.refused == []
    assert good.text == (CASES / "OPX101_fixed.py").read_text()

    # A deliberately wrong fix: it "fixes" by raising the clip threshold, leaving the
    # clip after the optimizer. Verification must refuse to write it.
    from optax_lint.rules.chain_order import clip_after_optimizer

    def wrong_report(self, ctx, pipeline, clip, lr_step):
        call = clip.origin.call
        bad_call = call.with_changes(args=[call.args[0].with_changes(value=cst.Float("2.0"))])
        ctx.report(call, clip="clip", optimizer="adamw", fix=lambda m: m.deep_replace(call, bad_call))

    monkeypatch.setattr(clip_after_optimizer.ClipAfterOptimizer, "_report", wrong_report)
    refused = engine.fix_text(text, "OPX101_bad.py", {"OPX101"}, gate=make_gate(worker, "OPX101_bad.py"))
    assert refused.applied == 0
    assert refused.text == text
    assert len(refused.refused) == 1
    assert refused.refused[0][1].startswith("fix refused by verification: a gradient of global norm 1e6")


def test_schedule_plot_snapshot(worker) -> None:
    text = textwrap.dedent(
        """\
        import optax
        schedule = optax.warmup_cosine_decay_schedule(
            init_value=0.0, peak_value=1e-3, warmup_steps=100, decay_steps=1000, end_value=1e-4,
        )
        """
    )
    series, problems = plot_text(text, "train.py", worker, total_steps=1000, points=101)
    assert problems == []
    chart = render_chart(series[0], width=40, height=6)
    snapshot = ROOT / "tests" / "snapshots" / "schedule_plot.txt"
    if os.environ.get("OPTAX_LINT_UPDATE_SNAPSHOTS") == "1":
        snapshot.parent.mkdir(exist_ok=True)
        snapshot.write_text(chart, encoding="utf-8")
    assert chart == snapshot.read_text(encoding="utf-8")


HOSTILE = textwrap.dedent(
    """\
    import optax

    def my_lr():
        open("{marker}-open", "w").write("x")
        return 1e-3

    tx1 = optax.chain(optax.clip(__import__("os").system("touch {marker}-system")), optax.adam(1e-3))
    tx2 = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(open("{marker}-open2", "w")))
    tx3 = optax.adam(my_lr())
    print("{marker}-printed")
    """
)


def test_sandbox_runs_no_user_code(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    script = tmp_path / "train.py"
    script.write_text(HOSTILE.format(marker=marker))
    proc = subprocess.run(
        [sys.executable, "-m", "optax_lint", str(script), "--verify", "--exit-zero"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "OPTAX_LINT_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp_path.glob("PWNED*")), "user code ran"
    assert f"{marker}-printed" not in proc.stdout.replace("print(", "")
    out = proc.stdout
    assert "tx1: not verifiable: __import__(\"os\").system(...) is not a whitelisted optax constructor" in out
    assert "tx2: not verifiable: open(...) is not a whitelisted optax constructor" in out
    assert "tx3: not verifiable: my_lr(...) is not a whitelisted optax constructor" in out


def test_spec_builder_whitelist_rejects_non_optax_calls() -> None:
    src = "import optax\nimport os\ntx = optax.chain(optax.adam(os.getcwd()))\n"
    facts = ModuleFacts(cst.parse_module(src), "x.py")
    with pytest.raises(NotVerifiable) as info:
        SpecBuilder(facts).build(facts.pipelines[0].call, facts.pipelines[0].record.scope)
    assert "os.getcwd(...) is not a whitelisted optax constructor" == info.value.reason


def test_worker_timeout_is_reported_not_hung(tmp_path: Path) -> None:
    # A schedule sampled at an absurd number of steps must hit the timeout, not hang.
    with Worker(timeout=120) as w:
        w.request({"op": "ping"})
        response = w.request(
            {"op": "schedule", "spec": {"call": "constant_schedule", "args": [{"lit": 1.0}], "kwargs": {}}, "steps": list(range(3_000_000))},
            timeout=0.5,
        )
        assert response["error"] == "timed out after 0.5 s"
        assert w.request({"op": "ping"}).get("ok") is True  # a fresh worker takes over


def test_lint_path_does_not_import_jax() -> None:
    code = (
        "import sys\n"
        "from optax_lint.engine import lint as engine\n"
        "from optax_lint.core.catalogue import load_catalogue\n"
        "engine.lint_text(open(sys.argv[1]).read(), 'x.py', set(load_catalogue()))\n"
        "print(sorted(m for m in ('jax', 'optax', 'jaxlib') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(CASES / "OPX101_bad.py")], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stderr


def test_every_gated_rule_exists() -> None:
    from optax_lint.verify.gate import GATED

    assert set(GATED) <= set(load_catalogue())
