"""`optax-lint schedule` and `--verify` as a user runs them (issue 11): what they say
when the verify extra is missing, several paths, syntax errors reported as `check`
reports them, --png, the horizon of a join_schedules, and measurements that a warmup
from 0 cannot fool. Everything goes through the real entry point.
"""

from __future__ import annotations

import importlib.util
import json
import re
import textwrap
from pathlib import Path

import pytest

from tests.test_cli_experience import process, run

# Its module fixtures are costly: one xdist worker computes them once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("schedule_verify_cli")

WARMUP_COSINE = textwrap.dedent(
    """\
    import optax

    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=1e-3, warmup_steps=100, decay_steps=1000, end_value=1e-4,
    )
    tx = optax.adamw(schedule)
    """
)
JOINED = textwrap.dedent(
    """\
    import optax

    warmup = optax.linear_schedule(0.0, 1e-3, transition_steps=1000)
    decay = optax.cosine_decay_schedule(1e-3, decay_steps=9000)
    schedule = optax.join_schedules([warmup, decay], boundaries=[1000])
    tx = optax.adamw(schedule)
    """
)
BROKEN = "import optax\nschedule = optax.linear_schedule(0.0, 1e-3, 100\n"


def _hide(monkeypatch, *names: str) -> None:
    """Make importlib report `names` as not installed, as in an environment without them."""
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        if name.split(".")[0] in names:
            return None
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


# --------------------------------------------------------------------------- without the extra


def test_schedule_without_the_verify_extra_says_what_it_needs(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "train.py").write_text(WARMUP_COSINE)
    _hide(monkeypatch, "jax", "optax")
    result = run(["schedule", "train.py"], tmp_path)
    assert result.exit_code == 2
    assert "`optax-lint schedule`" in result.stderr
    assert "needs jax and optax" in result.stderr
    assert "pip install '.[verify]'" in result.stderr  # not on PyPI: from a clone or from git
    assert "pip install 'optax-lint[verify] @ git+https://github.com/optax-lint/optax-lint@<rev>'" in result.stderr
    assert "--verify" not in result.stderr


def test_verify_without_the_extra_names_the_flag(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "train.py").write_text(WARMUP_COSINE)
    _hide(monkeypatch, "optax")
    result = run(["train.py", "--verify"], tmp_path)
    assert result.exit_code == 2
    assert result.stderr.startswith("optax-lint: error: --verify needs optax")
    assert "pip install '.[verify]'" in result.stderr  # not on PyPI: from a clone or from git
    assert "pip install 'optax-lint[verify] @ git+https://github.com/optax-lint/optax-lint@<rev>'" in result.stderr


def test_png_without_matplotlib_says_which_package_before_sampling(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("jax")
    (tmp_path / "train.py").write_text(WARMUP_COSINE)
    _hide(monkeypatch, "matplotlib")
    from optax_lint.verify import runner

    started = []
    monkeypatch.setattr(runner.Worker, "_start", lambda self: started.append(1))
    result = run(["schedule", "train.py", "--png", "lr.png"], tmp_path)
    assert result.exit_code == 2
    assert "--png needs matplotlib" in result.stderr and "pip install" in result.stderr
    assert started == []  # refused before any sampling
    assert not (tmp_path / "lr.png").exists()


# --------------------------------------------------------------------------- with jax and optax


needs_jax = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None or importlib.util.find_spec("optax") is None, reason="verify extra not installed"
)


@needs_jax
def test_schedule_takes_files_and_directories(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(WARMUP_COSINE)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text(JOINED)
    (tmp_path / "sub" / "plain.py").write_text("x = 1\n")
    proc = process(["schedule", "a.py", "sub", "--height", "4"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "schedule = warmup_cosine_decay_schedule(...) at a.py:3" in proc.stdout
    assert "schedule = join_schedules(...) at sub/b.py:5" in proc.stdout


@needs_jax
def test_schedule_reports_a_syntax_error_exactly_as_check_does(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text(BROKEN)
    (tmp_path / "good.py").write_text(WARMUP_COSINE)
    checked = process(["broken.py", "--output-format", "concise"], tmp_path)
    check_line = checked.stdout.splitlines()[0]
    assert " OPX001 error SyntaxError" in check_line
    drawn = process(["schedule", "broken.py", "good.py", "--height", "4"], tmp_path)
    assert drawn.returncode == 1
    assert check_line in drawn.stdout.splitlines()
    assert "Traceback" not in drawn.stderr and "parser error" not in drawn.stdout
    assert "warmup_cosine_decay_schedule(...) at good.py:3" in drawn.stdout  # the other file is still drawn


@needs_jax
def test_schedule_missing_path_and_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    proc = process(["schedule", "missing.py"], tmp_path)
    assert proc.returncode == 2
    assert "missing.py: no such file or directory" in proc.stderr
    proc = process(["schedule", "empty"], tmp_path)
    assert proc.returncode == 0
    assert "no Python files found" in proc.stderr


@needs_jax
def test_schedule_png_writes_an_image(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    (tmp_path / "train.py").write_text(WARMUP_COSINE)
    proc = process(["schedule", "train.py", "--png", "lr.png"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "wrote lr.png" in proc.stdout
    assert (tmp_path / "lr.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@needs_jax
def test_join_schedules_without_a_training_loop_spans_the_sum_of_its_pieces(tmp_path: Path) -> None:
    (tmp_path / "join.py").write_text(JOINED)
    proc = process(["schedule", "join.py", "--height", "4"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # 1000 warmup + 9000 decay: the schedule ends at 10,000 and the chart runs 10% past it,
    # not to 1,100 (the first boundary plus 10%).
    assert "schedule end: step 10,000 (lr 0)" in out
    axis = [line for line in out.splitlines() if line.strip().startswith("0 ") and "," in line]
    assert axis and axis[0].split()[-1] == "11,000", out
    assert "boundary 1: step 1,000 (lr 0.001)" in out
    assert "end lr 0" in out


@needs_jax
def test_join_schedules_with_unknown_boundaries_uses_the_sum_of_the_pieces(tmp_path: Path) -> None:
    (tmp_path / "join.py").write_text(JOINED.replace("boundaries=[1000]", "boundaries=read_boundaries()"))
    import libcst as cst

    from optax_lint.facts.module import ModuleFacts
    from optax_lint.verify.plot import schedule_length, top_level_schedules

    text = (tmp_path / "join.py").read_text()
    facts = ModuleFacts(cst.parse_module(text), "join.py", text=text)
    (joined,) = top_level_schedules(facts)
    assert schedule_length(joined) == 10_000


# --------------------------------------------------------------------------- --verify behind a warmup

PIPELINES = textwrap.dedent(
    """\
    import optax

    warm = optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=1e-3, warmup_steps=2000, decay_steps=50000, end_value=1e-5
    )
    tx_good = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(warm, weight_decay=0.1))
    tx_bad = optax.chain(optax.adam(warm), optax.add_decayed_weights(0.1))
    tx_frozen = optax.adamw(optax.constant_schedule(0.0), weight_decay=0.1)
    tx_tiny = optax.adam(1e-9)
    tx_plain = optax.adamw(1e-3, weight_decay=0.1)
    """
)


@pytest.fixture(scope="module")
def verification(tmp_path_factory) -> dict:
    if importlib.util.find_spec("jax") is None or importlib.util.find_spec("optax") is None:
        pytest.skip("verify extra not installed")
    where = tmp_path_factory.mktemp("verify")
    (where / "train.py").write_text(PIPELINES)
    proc = process(["train.py", "--verify", "--output-format", "json", "--exit-zero"], where, timeout=600)
    assert proc.returncode == 0, proc.stderr
    reports = json.loads(proc.stdout)["verification"]
    return {r["pipeline"]: {row["property"]: row for row in r["results"]} for r in reports}


def _row(rows: dict, prefix: str) -> dict:
    (row,) = [row for name, row in rows.items() if name.startswith(prefix) or name.endswith(prefix)]
    return row


def test_warmup_from_zero_does_not_fake_a_decay_failure(verification) -> None:
    decay = _row(verification["tx_good"], "weights shrink")
    assert decay["ok"] is True, decay
    assert "near the learning-rate peak" in decay["measured"]


def test_warmup_from_zero_still_catches_growing_weights(verification) -> None:
    decay = _row(verification["tx_bad"], "weights shrink")
    assert decay["ok"] is False, decay
    factor = float(re.search(r"-> ([0-9.e+-]+)", decay["measured"]).group(1))
    assert factor > 1.0


def test_descent_is_measured_after_the_warmup(verification) -> None:
    descent = _row(verification["tx_good"], "steps on a convex quadratic")
    first, last = map(float, re.search(r"loss ([0-9.e+-]+) -> ([0-9.e+-]+)", descent["measured"]).groups())
    assert descent["ok"] is True
    assert last < 0.95 * first, descent  # a real fall, not rounding at the start of a warmup


def test_a_loss_that_does_not_fall_is_never_ticked(verification) -> None:
    frozen = _row(verification["tx_frozen"], "steps on a convex quadratic")
    assert frozen["ok"] is False, frozen
    first, last = re.search(r"loss ([0-9.e+-]+) -> ([0-9.e+-]+)", frozen["measured"]).groups()
    assert first == last
    assert _row(verification["tx_frozen"], "weights shrink")["ok"] is False
    # adam(1e-9): a change at the level of float32 rounding is not a fall either.
    assert _row(verification["tx_tiny"], "steps on a convex quadratic")["ok"] is False


def test_chains_without_a_schedule_are_measured_at_step_zero(verification) -> None:
    decay = _row(verification["tx_plain"], "weights shrink")
    assert decay["ok"] is True
    assert decay["measured"] == "w: 1.0 -> 0.9999 after one step"
    assert _row(verification["tx_plain"], "steps on a convex quadratic")["ok"] is True
