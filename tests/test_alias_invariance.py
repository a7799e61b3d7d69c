"""`import optax as ox` changes nothing the linter says: for every fixture that imports
optax plainly, the same rewritten under an alias gives the same findings (code and
line; columns move with the shorter spelling) and its fixes raise no internal error.

Rules judge facts, and the facts resolve names through imports; a rule that matched
the spelling `optax.` instead would go silent (or fire) under an alias.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from optax_lint.core.catalogue import load_catalogue
from optax_lint.engine import lint as engine

ROOT = Path(__file__).resolve().parent.parent
_PLAIN_IMPORT = re.compile(r"^import optax$", re.M)
# `optax.x` in code, not a module path of an import (`from optax.contrib import ...`)
_ATTRIBUTE = re.compile(r"(?<![\w.])(?<!from )(?<!import )optax\.")


def _eligible() -> list[Path]:
    out = []
    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        if path.name.endswith(".fixed.py"):
            continue
        text = path.read_text(encoding="utf-8")
        if _PLAIN_IMPORT.search(text) and not re.search(r"\box\b", text):
            out.append(path)
    return out


FIXTURES = _eligible()


def _aliased(text: str) -> str:
    return _ATTRIBUTE.sub("ox.", _PLAIN_IMPORT.sub("import optax as ox", text))


def test_the_rewrite_keeps_import_paths() -> None:
    assert _aliased("import optax\nfrom optax.contrib import muon\ntx = optax.adam(1e-3)\n") == (
        "import optax as ox\nfrom optax.contrib import muon\ntx = ox.adam(1e-3)\n")
    assert len(FIXTURES) > 200  # most fixtures qualify: the test is not vacuous


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: str(p.relative_to(ROOT / "fixtures")))
def test_an_alias_changes_no_finding(fixture: Path) -> None:
    codes = set(load_catalogue())
    text = fixture.read_text(encoding="utf-8")
    aliased = _aliased(text)
    assert aliased != text
    before = sorted((f.code, f.span.line) for f in engine.lint_text(text, str(fixture), codes).findings)
    after = sorted((f.code, f.span.line) for f in engine.lint_text(aliased, str(fixture), codes).findings)
    assert after == before
    assert "OPX900" not in {code for code, _ in after}
    assert engine.fix_text(aliased, str(fixture), codes, unsafe=True).internal_errors == 0
