"""A file's line endings and indentation style change nothing the linter says, and its
fixes write in that style.

Every fixture is also linted as CRLF and as tab-indented (where that is still valid
Python): the findings (code, line) are the fixture's own, no fix raises, every fixed
text compiles, a CRLF file gets no bare LF, and the lines a fix writes inside a
tab-indented file are indented with tabs (a fix used to indent its arguments with
`\\t    `, and with four spaces at module level). Files indented by two spaces are
not rewritten here: pyink,
their usual formatter, indents the inside of brackets by four, as the fixes do.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from optax_lint.core.catalogue import load_catalogue
from optax_lint.engine import lint as engine
from tests.test_fuzz import _compiles

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(p for p in (ROOT / "fixtures").rglob("*.py") if not p.name.endswith(".fixed.py"))


def _tabs(text: str) -> str:
    out = []
    for line in text.splitlines(keepends=True):
        lead = re.match(r"^(?: {4})+", line)
        out.append("\t" * (len(lead.group(0)) // 4) + line[lead.end():] if lead else line)
    return "".join(out)


def test_the_tab_rewrite() -> None:
    assert _tabs("def f():\n    if x:\n        return 1\n    s = '''\n    kept'''\n") == (
        "def f():\n\tif x:\n\t\treturn 1\n\ts = '''\n\tkept'''\n")


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: str(p.relative_to(ROOT / "fixtures")))
def test_line_endings_and_tabs_change_no_finding(fixture: Path) -> None:
    codes = set(load_catalogue())
    text = fixture.read_text(encoding="utf-8")
    if not _compiles(text):
        pytest.skip("a fixture of a syntax error")
    expected = sorted((f.code, f.span.line) for f in engine.lint_text(text, str(fixture), codes).findings)
    for style, variant in (("crlf", text.replace("\n", "\r\n")), ("tabs", _tabs(text))):
        if not _compiles(variant):
            continue  # a tab rewrite inside a multi-line string can break indentation
        found = sorted((f.code, f.span.line) for f in engine.lint_text(variant, str(fixture), codes).findings)
        assert found == expected, style
        fixed = engine.fix_text(variant, str(fixture), codes, unsafe=True)
        assert fixed.internal_errors == 0, style
        if fixed.text == variant:
            continue
        assert _compiles(fixed.text), style
        if style == "crlf":
            assert not re.search(r"(?<!\r)\n", fixed.text), "a fix wrote a bare LF into a CRLF file"
        else:
            written = set(fixed.text.splitlines()) - set(variant.splitlines())
            spaced = [line for line in written if re.match(r"^\t* ", line)]
            assert spaced == [], "a fix indented with spaces in a tab-indented file"
