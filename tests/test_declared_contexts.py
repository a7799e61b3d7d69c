"""Every fixture, under run contexts its author did not write, lints and fixes without an
internal error.

A fixture exercises the branches its own context reaches; a user's pragma or pyproject
can declare any other (a Transformer, a run of two million steps, 64 devices). Two
crashes of OPX301's fix hid in such branches: a decaying schedule on a Transformer with
a known run length (NameError), and a declared run far longer than the file's loop (a
negative literal). Here each fixture is linted and fixed (unsafe fixes included, every
rule selected) under contexts chosen to reach the rules' other branches.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from optax_lint.core.catalogue import load_catalogue
from optax_lint.engine import lint as engine

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(p for p in (ROOT / "fixtures").glob("OPX*/*.py") if not p.name.endswith(".fixed.py"))

CONTEXTS = (
    "arch=transformer steps=100_000",  # a Transformer on a long run: warmup, clipping, masks
    "arch=mlp steps=2_000_000",  # past the long-run threshold: the join_schedules fix
    "arch=transformer steps=300",  # a run shorter than any warmup the protocol suggests
    "fine_tune=true arch=transformer steps=50_000",  # the fine-tuning rows
    "devices=8 batch_per_device=32 arch=transformer",  # the linear scaling rule
    "devices=64 batch_global=4096 grad_accum=4 steps=200_000",  # accumulation and a global batch
    "params=7_000_000_000 arch=transformer steps=1",  # a one-step run of a large model
)


def _with_context(text: str, context: str) -> str:
    kept = "".join(line for line in text.splitlines(keepends=True) if "optax-lint: context" not in line)
    return f"# optax-lint: context {context}\n{kept}"


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_internal_error_under_declared_contexts(fixture: Path) -> None:
    codes = set(load_catalogue())
    text = fixture.read_text(encoding="utf-8")
    failures = []
    for context in CONTEXTS:
        fixed = engine.fix_text(_with_context(text, context), str(fixture), codes, unsafe=True)
        errors = [f.message for f in fixed.findings if f.code == "OPX900"]
        if errors or fixed.internal_errors:
            failures.append((context, errors[:1]))
    assert failures == []


def test_the_contexts_reach_the_branches_that_crashed() -> None:
    """The two crashes, rebuilt from fixtures that never declared these contexts: had
    the fixes not been made, the test above would fail on them."""
    codes = {"OPX301"}
    vit = (ROOT / "fixtures/OPX301/bad_transformer_cosine_decay_without_warmup.py").read_text(encoding="utf-8")
    fixed = engine.fix_text(_with_context(vit, CONTEXTS[0]), "vit.py", codes, unsafe=True)
    assert "warmup_cosine_decay_schedule" in fixed.text  # the cold-decay fix ran on a Transformer
    smoke = (ROOT / "fixtures/OPX703/good_nnx_current_api.py").read_text(encoding="utf-8")
    run = engine.lint_text(_with_context(smoke, CONTEXTS[1]), "smoke.py", codes)
    # Its three optimizers are reported; none gets a fix: their loops run 5 steps.
    assert [(f.code, f.span.line, f.fixable(True)) for f in run.findings] == [
        ("OPX301", 67, False), ("OPX301", 74, False), ("OPX301", 81, False)]
