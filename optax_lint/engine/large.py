"""Large files: libcst parses only the top-level statements the prefilter flags.

libcst's parse of a 5 MB module takes ~25 s and 2.3 GB; CPython's takes ~1 s. For a
file over LARGE_FILE_BYTES, the engine keeps the top-level statements whose own text a
selected rule family triggers on (prefilter.py), plus every import (names resolve
through them), and blanks the lines of the others, so the text libcst parses keeps
every line number and column of the file. Statements are found from CPython's tree,
which the syntax check built anyway.

What this gives up, on large files only: a fact carried from a statement that spells
none of the trigger words (a module-level `STEPS = 1000` read by a flagged function)
is unknown, so the rules that need it stay silent; a false finding cannot come of it.
Fixes (and --diff, and the JSON edits) always parse the whole file.
"""

from __future__ import annotations

import ast
import re
from typing import Iterable, Optional

from optax_lint.engine import prefilter
from optax_lint.syntax.parsing import first_line

# Over this size (characters), a plain lint parses only the flagged statements.
LARGE_FILE_BYTES = 512 * 1024

_IMPORTS = (ast.Import, ast.ImportFrom)


def flagged_text(text: str, tree: ast.Module, codes: Iterable[str]) -> Optional[str]:
    """`text` with the lines of every top-level statement that no family of `codes`
    triggers on (and that is not an import) replaced by empty lines; None when every
    statement is kept (nothing to gain)."""
    families = list(prefilter.families_of(codes))
    lines = _LINE.findall(text)
    if len(text) > sum(map(len, lines)):
        lines.append(text[sum(map(len, lines)):])
    kept, dropped = [False] * len(lines), [False] * len(lines)
    any_dropped = False
    for node in tree.body:
        start, end = first_line(node) - 1, (node.end_lineno or node.lineno)
        chunk = "".join(lines[start:end])
        flagged = isinstance(node, _IMPORTS) or any(prefilter.family_triggered(f, chunk) for f in families)
        marks = kept if flagged else dropped
        any_dropped = any_dropped or not flagged
        for i in range(start, min(end, len(lines))):
            marks[i] = True
    if not any_dropped:
        return None
    return "".join(_EOL.search(line)[0] if gone and not keep else line for line, gone, keep in zip(lines, dropped, kept))


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)")
_EOL = re.compile(r"(\r\n|\r|\n)?\Z")
