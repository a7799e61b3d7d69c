"""What `--fix --unsafe-fixes` leaves behind, on every fixture and with every rule on:
a clean state (no finding the fixes introduced, a second run changes nothing), code
formatted like its surroundings, constants edited where they are written, and no JAX
call inserted at import time."""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import libcst as cst
import pytest

from optax_lint.core.catalogue import load_catalogue
from optax_lint.engine import lint as engine

# Its module fixtures are costly: one xdist worker computes them once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("fix_outcomes")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(p for p in (ROOT / "fixtures").glob("OPX*/*.py") if not p.name.endswith(".fixed.py"))
ALL = {code for code, spec in load_catalogue().items() if spec.default_enabled and spec.family != "meta"}
# A fix that turns code the linter could not analyse into valid code may reveal findings
# that were there all along: removing OPX107's comma makes the tuple an optimizer again.
UNMASKING = {"OPX107"}


def _fix_all(text: str, path: Path):
    return engine.fix_text(text, str(path), ALL, unsafe=True)


@pytest.fixture(scope="module")
def fixed_fixtures() -> dict[Path, tuple[str, object, object]]:
    out = {}
    for path in FIXTURES:
        text = path.read_text(encoding="utf-8")
        out[path] = (text, engine.lint_text(text, str(path), ALL), _fix_all(text, path))
    return out


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixing_twice_reaches_a_clean_state_without_new_findings(path: Path, fixed_fixtures) -> None:
    text, before, first = fixed_fixtures[path]
    assert first.dropped == []
    second = _fix_all(first.text, path)
    assert second.text == first.text, "a second --fix run still changes the file"
    assert not [f for f in second.findings if f.fixable(True)], "fixable findings remain after fixing"
    applied = {f.code for f in before.findings if f.fixable(True)}
    if applied & UNMASKING:
        return
    added = Counter(f.code for f in second.findings) - Counter(f.code for f in before.findings)
    assert not added, f"the fixes introduced {dict(added)}"


def _changes(before: str, after: str) -> tuple[list[str], list[str]]:
    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    return [l[2:] for l in diff if l.startswith("- ")], [l[2:] for l in diff if l.startswith("+ ")]


def _code_width(line: str) -> int:
    return len(line.split("  #", 1)[0].rstrip())


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_inserted_code_is_formatted_like_its_surroundings(path: Path, fixed_fixtures) -> None:
    text, _, fixed = fixed_fixtures[path]
    if fixed.text == text:
        return
    removed, added = _changes(text, fixed.text)
    width = max(88, min(max(_code_width(l) for l in text.splitlines()), 118))
    too_long = [l for l in added if _code_width(l) > width]
    assert too_long == [], f"lines wider than the file's own ({width})"
    assert not [l for l in added if re.search(r"\)\s*,\s*#\s*TODO|#\s*TODO", l) and l not in text]
    # A multi-line call is never collapsed: no added line holds two removed lines' code.
    pieces = [l.strip().rstrip(",") for l in removed if len(l.strip()) > 12 and "#" not in l]
    for line in added:
        assert sum(1 for p in pieces if p in line) < 2, f"lines joined into one: {line!r}"


def test_reflow_splits_a_grown_call_and_keeps_short_ones() -> None:
    src = textwrap.dedent(
        """\
        # optax-lint: context arch=transformer
        import optax

        def make(schedule):
            tx = optax.adamw(learning_rate=schedule, weight_decay=0.1, b1=0.9, b2=0.95)
            return tx
        """
    )
    fixed = engine.fix_text(src, "x.py", {"OPX201"}, unsafe=True)
    assert "    tx = optax.chain(\n        optax.clip_by_global_norm(1.0),\n        optax.adamw(" in fixed.text
    assert max(len(l) for l in fixed.text.splitlines()) <= max(88, max(len(l) for l in src.splitlines()))
    short = "# optax-lint: context arch=transformer\nimport optax\ntx = optax.adamw(3e-4)\n"
    assert engine.fix_text(short, "x.py", {"OPX201"}, unsafe=True).text.count("\n") == short.count("\n")


def test_multi_line_schedule_stays_multi_line() -> None:
    src = textwrap.dedent(
        """\
        # optax-lint: context steps=50_000
        import optax
        schedule = optax.cosine_decay_schedule(
            init_value=3e-4,
            decay_steps=50_000,
        )
        tx = optax.adamw(schedule)
        """
    )
    fixed = engine.fix_text(src, "x.py", {"OPX301"}, unsafe=True).text
    assert "schedule = optax.warmup_cosine_decay_schedule(\n    init_value=0.0,\n    peak_value=3e-4,\n" in fixed
    assert fixed.rstrip().endswith(")\ntx = optax.adamw(schedule)")


def test_warmup_constant_is_edited_where_it_is_defined() -> None:
    src = textwrap.dedent(
        """\
        # optax-lint: context steps=100_000
        import optax
        WARMUP_STEPS = 300
        s = optax.warmup_cosine_decay_schedule(0.0, 1e-3, warmup_steps=WARMUP_STEPS, decay_steps=100_000)
        tx = optax.adam(s)
        print("warmup", WARMUP_STEPS)
        """
    )
    fixed = engine.fix_text(src, "x.py", {"OPX302"}, unsafe=True).text
    assert "WARMUP_STEPS = 2000\n" in fixed and "warmup_steps=WARMUP_STEPS" in fixed
    spelled = src.replace("steps=100_000\n", "steps=1_000_000\n").replace("WARMUP_STEPS = 300", "WARMUP_STEPS = 1_000")
    assert "WARMUP_STEPS = 20_000\n" in engine.fix_text(spelled, "x.py", {"OPX302"}, unsafe=True).text  # the user's spelling
    computed = src.replace("WARMUP_STEPS = 300", "WARMUP_STEPS = int(0.003 * 100_000)")
    assert engine.fix_text(computed, "x.py", {"OPX302"}, unsafe=True).text == computed  # no guess


PMAP_STEP = textwrap.dedent(
    """\
    import functools
    import jax
    import optax

    per_device_batch_size = 64
    {definition}

    def make_optimizer():
        return optax.sgd({use}, momentum=0.9)

    tx = make_optimizer()

    @functools.partial(jax.pmap, axis_name="batch")
    def train_step(params, opt_state, batch):
        grads = jax.grad(lambda p: ((batch @ p) ** 2).mean())(params)
        grads = jax.lax.pmean(grads, axis_name="batch")
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    def train(params, opt_state, batches):
        for batch in batches:
            params, opt_state = train_step(params, opt_state, batch)
        return params
    """
)


def _module_level_jax_calls(text: str) -> list[str]:
    module = cst.parse_module(text)
    calls = []
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            code = module.code_for_node(stmt)
            calls += re.findall(r"jax\.(?:device_count|local_device_count|devices)\(", code)
    return calls


def test_lr_scaling_fix_never_calls_jax_at_import_time() -> None:
    once = PMAP_STEP.format(definition="LEARNING_RATE = 0.1", use="LEARNING_RATE")
    fixed = engine.fix_text(once, "x.py", {"OPX403"}, unsafe=True).text
    assert "LEARNING_RATE = 0.1\n" in fixed  # the module constant is not touched
    assert "optax.sgd(LEARNING_RATE * jax.device_count(), momentum=0.9)" in fixed  # scaled at its one use, at call time
    assert _module_level_jax_calls(fixed) == []
    twice = once + "print(LEARNING_RATE)\n"
    assert engine.fix_text(twice, "x.py", {"OPX403"}, unsafe=True).text == twice  # two uses: no fix that would split them
    (finding,) = engine.lint_text(twice, "x.py", {"OPX403"}).findings
    assert finding.severity.value == "info" and "does not apply" in finding.message and finding.help_text


def test_cli_fix_unsafe_twice_is_clean(tmp_path: Path) -> None:
    target = tmp_path / "train.py"
    target.write_text((ROOT / "fixtures/OPX301/bad_transformer_adamw_constant_lr.py").read_text(encoding="utf-8"), encoding="utf-8")
    run = lambda *a: subprocess.run([sys.executable, "-m", "optax_lint", str(target), *a], cwd=ROOT, capture_output=True, text=True, timeout=120)  # noqa: E731
    before = run("--output-format", "json", "--exit-zero").stdout
    run("--fix", "--unsafe-fixes")
    once = target.read_text(encoding="utf-8")
    run("--fix", "--unsafe-fixes")
    assert target.read_text(encoding="utf-8") == once
    after = run("--output-format", "json", "--exit-zero").stdout
    codes = lambda out: Counter(re.findall(r'"code": "(OPX\d+)"', out))  # noqa: E731
    assert not (codes(after) - codes(before))
    assert "OPX301" not in codes(after)
