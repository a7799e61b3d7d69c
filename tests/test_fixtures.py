"""Fixture-plus-snapshot tests, ruff style.

For every `fixtures/<CODE>/<name>.py`:
- the findings of rule CODE, as `line:col CODE` lines, equal `<name>.expected`;
- they are exactly the lines the fixture marks with `# expect: CODE` (an oracle
  written by hand, independent of the snapshot);
- `good_*` fixtures produce nothing;
- a fixture with a `# known-wrong: <why>` line (written before the change that makes it
  pass) is a strict xfail (its fix test a plain one): the line goes in the commit of
  that change;
- `--fix --unsafe-fixes` output equals `<name>.fixed.py`, re-parses, is idempotent,
  and leaves no fixable finding of the rule behind.

Regenerate snapshots with: OPTAX_LINT_UPDATE_SNAPSHOTS=1 pytest tests/test_fixtures.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import libcst as cst
import pytest

from optax_lint.core.catalogue import load_catalogue
from optax_lint.engine import lint as engine

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
UPDATE = os.environ.get("OPTAX_LINT_UPDATE_SNAPSHOTS") == "1"
_EXPECT = re.compile(r"#\s*expect:\s*((?:OPX\d+[,\s]*)+)")


def _fixture_files() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("OPX*/*.py") if not p.name.endswith(".fixed.py"))


_KNOWN_WRONG = re.compile(r"#\s*known-wrong:\s*(.+)")


def _marked(paths: list[Path], strict: bool = True) -> list:
    """A fixture committed before the change that makes it pass says so with a
    `# known-wrong: <why>` line: its findings test is a strict xfail until then (its fix
    test a plain one: a bad fixture the old code misses has no fix to compare)."""
    out = []
    for path in paths:
        match = _KNOWN_WRONG.search(path.read_text(encoding="utf-8"))
        marks = [pytest.mark.xfail(strict=strict, reason=match.group(1).strip())] if match else []
        out.append(pytest.param(path, marks=marks, id=f"{path.parent.name}/{path.name}"))
    return out


def _code_of(path: Path) -> str:
    return path.parent.name


def _context_codes(path: Path) -> set[str]:
    return {_code_of(path)}


def _snapshot(findings) -> str:
    return "".join(f"{f.span.line}:{f.span.column} {f.code}\n" for f in findings)


def _expected_lines(text: str, code: str) -> list[int]:
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = _EXPECT.search(line)
        if match and code in re.findall(r"OPX\d+", match.group(1)):
            lines.append(number)
    return lines


def _check_or_update(path: Path, actual: str) -> None:
    if UPDATE:
        if actual:
            path.write_text(actual, encoding="utf-8")
        elif path.exists():
            path.unlink()
        return
    expected = path.read_text(encoding="utf-8") if path.exists() else ""
    assert actual == expected, f"snapshot mismatch for {path.relative_to(ROOT)}"


@pytest.mark.parametrize("fixture", _marked(_fixture_files()))
def test_fixture_findings(fixture: Path) -> None:
    code = _code_of(fixture)
    text = fixture.read_text(encoding="utf-8")
    run = engine.lint_text(text, str(fixture), _context_codes(fixture))
    assert run.internal_errors == 0, [f.message for f in run.findings if f.code == "OPX900"]
    findings = [f for f in run.findings if f.code == code]
    marked = _expected_lines(text, code)
    assert [f.span.line for f in findings] == marked, "findings differ from the fixture's # expect markers"
    if fixture.name.startswith("good_"):
        assert findings == []
    else:
        assert findings, "a bad fixture must produce at least one finding"
    _check_or_update(fixture.with_suffix(".expected"), _snapshot(findings))


@pytest.mark.parametrize("fixture", _marked(_fixture_files(), strict=False))
def test_fixture_fix(fixture: Path) -> None:
    code = _code_of(fixture)
    text = fixture.read_text(encoding="utf-8")
    codes = _context_codes(fixture)
    fixed = engine.fix_text(text, str(fixture), codes, unsafe=True)
    assert fixed.dropped == []
    fixed_path = fixture.with_name(fixture.stem + ".fixed.py")
    _check_or_update(fixed_path, fixed.text if fixed.text != text else "")
    if fixed.text == text:
        return
    cst.parse_module(fixed.text)  # still parses
    compile(fixed.text, str(fixed_path), "exec")
    again = engine.fix_text(fixed.text, str(fixture), codes, unsafe=True)
    assert again.text == fixed.text, "fix is not idempotent"
    assert not [f for f in again.findings if f.code == code and f.fixable(True)], "fix left a fixable finding"


def test_every_rule_has_fixtures_and_docs() -> None:
    from optax_lint.core.catalogue import DOC_SECTIONS
    from optax_lint.rules import registry

    catalogue = load_catalogue()
    implemented = registry.load_all()
    for code, spec in catalogue.items():
        if spec.family == "meta":
            continue
        assert code in implemented, f"{code} has a catalogue entry but no implementation"
        folder = FIXTURES / code
        assert list(folder.glob("bad_*.py")), f"{code} has no bad fixture"
        assert list(folder.glob("good_*.py")), f"{code} has no good fixture"
        for key, title in DOC_SECTIONS:
            if key == "options" and not spec.options:
                continue
            assert spec.doc.get(key, "").strip(), f"{code} lacks the doc section '{title}'"
    for code in implemented:
        assert code in catalogue, f"{code} is implemented but missing from rules/"
