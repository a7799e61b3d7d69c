"""Indentation of a tab then spaces (`\\t def f(self):` over `\\t\\t  return x`): CPython
accepts it, libcst's tokenizer refuses it (libcst#829). Such a file is valid Python, so
it is no OPX001; it is linted with its indentation expanded, its findings point into
the file as written, and it gets no fix (a fix's text would carry the expanded
indentation)."""

from __future__ import annotations

from click.testing import CliRunner

from optax_lint.cli import main
from optax_lint.engine import lint as engine

# A held-out shape (an NCA trainer's data augmenter): a class body indented by a tab
# and a space, its methods' bodies by two tabs and two spaces.
TEXT = (
    "import optax\n"
    "\n"
    "\n"
    "class Trainer:\n"
    "\t def make(self, lr):\n"
    "\t\t  return optax.chain(optax.adam(lr), optax.add_decayed_weights(1e-4))\n"
    "\t def steps(self):\n"
    "\t\t  return 1000\n"
)


def test_valid_file_with_tab_then_space_indentation_is_linted() -> None:
    import ast

    ast.parse(TEXT)  # valid Python
    run = engine.lint_text(TEXT, "train.py", {"OPX001", "OPX102"})
    got = [(f.code, f.span.line, f.span.column) for f in run.findings]
    # The decay after adam (OPX102), at its column in the file as written: two tabs and
    # two spaces are 4 characters before `return`.
    line = TEXT.splitlines()[5]
    assert got == [("OPX102", 6, line.index("optax.add_decayed_weights") + 1)]
    assert all(f.fix is None for f in run.findings)


def test_fix_leaves_such_a_file_as_written(tmp_path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(TEXT.encode())
    result = CliRunner().invoke(main, ["--no-cache", "--fix", "--unsafe-fixes", str(path)])
    assert path.read_bytes() == TEXT.encode()
    assert "OPX001" not in result.output and "OPX102" in result.output


def test_a_real_syntax_error_in_such_a_file_is_still_reported() -> None:
    broken = TEXT.replace("def steps(self):", "def steps(self)")
    run = engine.lint_text(broken, "train.py", {"OPX001", "OPX102"})
    assert [(f.code, f.span.line) for f in run.findings] == [("OPX001", 7)]
