"""Precision on the judged corpus (issue 10): benchmarks/precision/corpus, judged in
benchmarks/precision/judged.toml.

Fails when a finding judged false comes back, a finding judged true disappears, or a
new finding appears that nobody judged (add it to judged.toml with a verdict).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

# Its module fixtures are costly: one xdist worker computes them once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("precision")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "precision" / "precision.py"


def _load():
    spec = importlib.util.spec_from_file_location("precision_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


precision = _load()
JUDGED = precision.load_judged()


@pytest.fixture(scope="module")
def found():
    return precision.current_findings()


def _ids(entries):
    return [f"{j.file}:{j.line}:{j.code}" for j in entries]


FALSE = [j for j in JUDGED.values() if j.verdict == "false"]
TRUE = [j for j in JUDGED.values() if j.verdict == "true"]


@pytest.mark.parametrize("judged", FALSE, ids=_ids(FALSE))
def test_judged_false_finding_stays_gone(judged, found) -> None:
    assert judged.key not in found, f"came back: {found.get(judged.key)} (judged false: {judged.reason})"


@pytest.mark.parametrize("judged", TRUE, ids=_ids(TRUE))
def test_judged_true_finding_is_still_found(judged, found) -> None:
    assert judged.key in found, f"disappeared (judged true: {judged.reason})"


def test_every_finding_is_judged(found) -> None:
    unjudged = [f"{k[0]}:{k[1]} {k[2]} {m}" for k, m in sorted(found.items()) if k not in JUDGED]
    assert unjudged == [], "judge these in benchmarks/precision/judged.toml"


def test_precision_at_least_90_percent(found) -> None:
    report = precision.evaluate(JUDGED, found)
    totals = {"true": 0, "false": 0, "debatable": 0, "unjudged": 0}
    for row in report.rows.values():
        for key in totals:
            totals[key] += row[key]
    assert precision.precision(totals) >= 0.9, precision.table(report)


def test_the_corpus_holds_judged_false_findings_for_each_issue_pattern() -> None:
    """The corpus keeps the shapes that misfired before issue 10 (a guard against
    the corpus being trimmed until it proves nothing)."""
    codes = {j.code for j in FALSE}
    assert {"OPX104", "OPX702", "OPX204", "OPX301", "OPX306", "OPX102", "OPX106", "OPX503", "OPX703"} <= codes
    assert len(TRUE) >= 20 and len(FALSE) >= 40


def test_the_judged_table_is_well_formed() -> None:
    for judged in JUDGED.values():
        assert (precision.CORPUS / judged.file).is_file(), judged.file
        assert judged.reason.strip()
