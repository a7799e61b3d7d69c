"""Fixes that change the optimizer state's structure (a transform moved, added or removed,
a decay mask added, a constant learning rate turned into a schedule) say so in their
title, keep their applicability (adding a transform or a mask stays unsafe), and are not
offered in a test file or a test function, where the state layout is asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from optax_lint.core.diagnostics import Applicability
from optax_lint.engine import lint as engine
from optax_lint.rules.base import STATE_LAYOUT_NOTE

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

CHANGES_STATE = [
    ("OPX101", "bad_clip_after_adamw.py", Applicability.SAFE),  # reorder
    ("OPX102", "bad_decay_after_adam.py", Applicability.UNSAFE),  # two transforms become adamw
    ("OPX108", "bad_flax_transformer_adamw_no_mask.py", Applicability.UNSAFE),  # a mask
    ("OPX112", "bad_clip_before_partition.py", Applicability.UNSAFE),  # the clip moves into branches
    ("OPX201", "bad_flax_lm_bare_adamw.py", Applicability.UNSAFE),  # a clip is added
    ("OPX301", "bad_transformer_adamw_constant_lr.py", Applicability.UNSAFE),  # constant LR -> schedule
    ("OPX308", "bad_schedule_never_passed.py", Applicability.UNSAFE),
    ("OPX603", "bad_hyperparams_plain_adam.py", Applicability.UNSAFE),  # inject_hyperparams wraps it
]


def _fixed_findings(path: Path, code: str, as_path: str | None = None):
    run = engine.lint_text(path.read_text(encoding="utf-8"), as_path or str(path), {code})
    return [f for f in run.findings if f.code == code]


@pytest.mark.parametrize("code, name, applicability", CHANGES_STATE, ids=[c for c, _, _ in CHANGES_STATE])
def test_title_says_the_old_state_will_not_restore(code, name, applicability):
    findings = [f for f in _fixed_findings(FIXTURES / code / name, code) if f.fix is not None and f.fix.apply is not None]
    assert findings
    for finding in findings:
        assert finding.fix.title.endswith(STATE_LAYOUT_NOTE)
        assert finding.fix.applicability == applicability


@pytest.mark.parametrize("code, name, applicability", CHANGES_STATE, ids=[c for c, _, _ in CHANGES_STATE])
def test_not_offered_in_a_test_file(code, name, applicability):
    findings = _fixed_findings(FIXTURES / code / name, code, as_path=f"tests/test_{name}")
    assert all(f.fix is None for f in findings)  # advice rules say nothing in tests at all
    if code in ("OPX101", "OPX102", "OPX112", "OPX603"):
        assert findings, "a defect is still reported in a test file, without the fix"


def test_not_offered_in_a_test_function():
    source = (
        "import optax\n\n\ndef test_chain():\n"
        "    tx = optax.chain(optax.adamw(1e-3), optax.clip_by_global_norm(1.0))\n"
        "    updates, _ = tx.update(grads, tx.init(params), params)\n"
        "    return updates\n\n\n"
        "tx = optax.chain(optax.adamw(1e-3), optax.clip_by_global_norm(1.0))\n"
    )
    # The test function steps the optimizer, so the defect is reported there too (a test
    # that never steps one is silent); the fix, which changes the state layout, is not.
    findings = [f for f in engine.lint_text(source, "train.py", {"OPX101"}).findings if f.code == "OPX101"]
    assert [(f.span.line, f.fix is not None) for f in findings] == [(5, False), (10, True)]


def test_a_cold_schedule_fix_keeps_the_layout():
    """cosine_decay_schedule -> warmup_cosine_decay_schedule: both are schedules, the
    state keeps its structure, and the title says nothing about checkpoints."""
    findings = _fixed_findings(FIXTURES / "OPX301" / "bad_cosine_decay_without_warmup_declared.py", "OPX301")
    assert findings and all(STATE_LAYOUT_NOTE not in f.fix.title for f in findings if f.fix is not None)
