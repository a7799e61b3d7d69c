"""Jupyter notebooks: cells linted as one module, findings per cell, fixes that change
only the fixed cell's source (everything else in the file byte for byte the same)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from optax_lint.core.config import load_settings
from optax_lint.notebook import format as nbformat_
from optax_lint.notebook import notebook_text
from optax_lint.notebook.layout import Layout
from optax_lint.notebook.magics import cell_code
from optax_lint.run import api
from optax_lint.run.discovery import discover

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "notebooks"
COLAB = FIXTURES / "colab_train.ipynb"


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "optax_lint", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def notebook(cells: list[str], *, indent: int = 1, as_list: bool = True, **top) -> str:
    """An nbformat 4 notebook with the given code cells, as Jupyter would write it."""
    def source(text):
        return nbformat_.source_lines(text) if as_list else text

    nb = {
        "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source(c)} for c in cells],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
        **top,
    }
    return json.dumps(nb, indent=indent, ensure_ascii=False) + "\n"


BAD_CHAIN = "tx = optax.chain(optax.adamw(1e-3), optax.clip_by_global_norm(1.0))\n"
GOOD_CHAIN = "tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))\n"


def lint(path: Path, **options):
    return api.lint_paths([str(path)], load_settings(start=path.parent), **options)[0]


# --- the Colab fixture -------------------------------------------------------------------


def test_colab_notebook_findings_are_exact(tmp_path: Path) -> None:
    shutil.copy(COLAB, tmp_path / "colab_train.ipynb")
    proc = cli(["--output-format", "concise", "colab_train.ipynb"], tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == (FIXTURES / "colab_train.expected").read_text()


def test_colab_notebook_json_carries_the_cell(tmp_path: Path) -> None:
    shutil.copy(COLAB, tmp_path / "colab_train.ipynb")
    proc = cli(["--output-format", "json", "colab_train.ipynb"], tmp_path)
    [finding] = json.loads(proc.stdout)
    assert (finding["code"], finding["cell"], finding["line"], finding["column"]) == ("OPX101", 7, 5, 5)
    assert [(r["cell"], r["line"], r["column"]) for r in finding["related"]] == [(7, 3, 6), (7, 4, 5)]
    # The fix's edit is in the cell's own coordinates: it rewrites lines 4-5 of cell 7.
    [edit] = finding["fix"]["edits"]
    assert (edit["line"], edit["end_line"]) == (4, 5)


def test_imports_in_an_earlier_cell_resolve_in_a_later_one(tmp_path: Path) -> None:
    (tmp_path / "joined.ipynb").write_text(notebook(["import optax\n", "x = 1\n", BAD_CHAIN]))
    (tmp_path / "alone.ipynb").write_text(notebook(["x = 1\n", BAD_CHAIN]))
    [finding] = lint(tmp_path / "joined.ipynb").findings
    assert (finding.code, finding.cell, finding.span.line, finding.span.column) == ("OPX101", 3, 1, 37)
    assert lint(tmp_path / "alone.ipynb").findings == []  # `optax` unbound: not an optax chain


def test_colab_fix_changes_only_the_fixed_cell_source(tmp_path: Path) -> None:
    target = tmp_path / "colab_train.ipynb"
    shutil.copy(COLAB, target)
    proc = cli(["--fix", "colab_train.ipynb"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    original, fixed = COLAB.read_bytes(), target.read_bytes()
    assert fixed == (FIXTURES / "colab_train.fixed.ipynb").read_bytes()
    # Byte-compare everything outside cell 7's "source" value.
    raw = nbformat_.parse(COLAB.read_text())
    [cell7] = [c for c in raw.cells if c.number == 7]
    start, end = cell7.span
    text_before, text_after = COLAB.read_text(), target.read_text()
    tail = len(text_before) - end
    assert text_after[:start] == text_before[:start]
    assert text_after[len(text_after) - tail:] == text_before[end:]
    assert not original.endswith(b"\n") and not fixed.endswith(b"\n")  # Colab writes no final newline
    # Parsed: the only difference is cell 7's source, whose magic lines survive.
    a, b = json.loads(original), json.loads(fixed)
    assert a["cells"][6]["source"] != b["cells"][6]["source"]
    a["cells"][6]["source"] = b["cells"][6]["source"]
    assert a == b
    assert b["cells"][6]["source"][0] == "optax.adamw?\n"
    assert b["cells"][6]["source"][-1] == "sample_files = !ls /content/sample_data"
    # Idempotent, and the rule is silent afterwards.
    assert cli(["--fix", "colab_train.ipynb"], tmp_path).returncode == 0
    assert target.read_bytes() == fixed


def test_diff_shows_the_cell_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "colab_train.ipynb"
    shutil.copy(COLAB, target)
    proc = cli(["--diff", "colab_train.ipynb"], tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[:2] == ["--- a/colab_train.ipynb:cell 7", "+++ b/colab_train.ipynb:cell 7"]
    assert proc.stdout.splitlines()[6:10] == [
        "+    optax.clip_by_global_norm(1.0),  # keep updates bounded",
        "     optax.adamw(LEARNING_RATE, weight_decay=0.01),",
        "-    optax.clip_by_global_norm(1.0),  # keep updates bounded",
        " )",
    ]
    assert target.read_bytes() == COLAB.read_bytes()


def test_full_output_frames_the_cell_with_its_magic_lines(tmp_path: Path) -> None:
    shutil.copy(COLAB, tmp_path / "colab_train.ipynb")
    out = cli(["colab_train.ipynb"], tmp_path).stdout
    assert out.startswith("colab_train.ipynb:cell 7:5:5: OPX101 ")
    assert "clip_by_global_norm(1.0) runs after adamw(LEARNING_RATE, weight_decay=0.01)" in out.splitlines()[0]
    assert "5 |     optax.clip_by_global_norm(1.0),  # keep updates bounded\n" in out
    assert "= note: chain built here: colab_train.ipynb:cell 7:3:6" in out


def test_github_annotation_names_the_file_not_a_json_line(tmp_path: Path) -> None:
    shutil.copy(COLAB, tmp_path / "colab_train.ipynb")
    out = cli(["--output-format", "github", "colab_train.ipynb"], tmp_path).stdout
    assert out.startswith("::error file=colab_train.ipynb,title=OPX101 (clip-after-optimizer)::colab_train.ipynb:cell 7:5:5: OPX101 ")


# --- formats kept on --fix ---------------------------------------------------------------


@pytest.mark.parametrize("indent", [1, 2])
@pytest.mark.parametrize("as_list", [True, False])
def test_fix_keeps_indent_source_form_and_final_newline(tmp_path: Path, indent: int, as_list: bool) -> None:
    path = tmp_path / "nb.ipynb"
    before = notebook(["import optax\n", "lr = 1e-3  # é\n" + BAD_CHAIN + "print(tx)"], indent=indent, as_list=as_list)
    path.write_text(before, encoding="utf-8")
    result = lint(path, fix=True)
    assert result.fixed == 1 and result.findings == []
    after = path.read_text(encoding="utf-8")
    assert after == before.replace(json.dumps(BAD_CHAIN)[1:-1], json.dumps(GOOD_CHAIN)[1:-1])


def test_fix_in_a_notebook_that_escapes_non_ascii(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    text = notebook(["import optax\n", "# caf\u00e9\n" + BAD_CHAIN]).replace("\u00e9", "\\u00e9")
    path.write_text(text)
    lint(path, fix=True)
    assert path.read_text() == text.replace(json.dumps(BAD_CHAIN)[1:-1], json.dumps(GOOD_CHAIN)[1:-1])


def test_empty_source_list_is_rendered_with_the_file_indentation() -> None:
    text = '{\n  "cells": [\n    {\n      "cell_type": "code",\n      "source": []\n    }\n  ],\n  "nbformat": 4\n}'
    raw = nbformat_.parse(text)
    new = nbformat_.replace_sources(raw, {1: "a\nb"})
    assert json.loads(new)["cells"][0]["source"] == ["a\n", "b"]
    assert '      "source": [\n        "a\\n",\n        "b"\n      ]\n' in new


# --- IPython syntax ------------------------------------------------------------------------


def test_magics_become_placeholders_on_the_same_lines() -> None:
    src = (
        "%matplotlib inline\n"
        "!pip install -q optax\n"
        "files = !ls /data\n"
        "optax.adamw?\n"
        "??optax.chain\n"
        "if True:\n"
        "    %time train()\n"
        "x = (1\n"
        "     %2)\n"  # modulo inside brackets, not a magic
        's = """\n'
        "!not a shell line\n"  # inside a string
        '"""\n'
        "!echo a \\\n"
        "  b\n"
        "y = a != b\n"
    )
    code = cell_code(src)
    lines = code.text.splitlines()
    assert len(lines) == len(src.splitlines())
    assert code.placeholders == [0, 1, 2, 3, 4, 6, 12, 13]
    assert lines[6] == "    pass" and lines[8] == "     %2)" and lines[10] == "!not a shell line"
    assert lines[14] == "y = a != b"
    cst.parse_module(code.text)


def test_pip_and_conda_automagics_are_ipython_lines() -> None:
    """IPython's automagic runs `pip install ...` without its `%`; Python never has two
    names side by side, so such a line is IPython's, not a syntax error. Names that are
    Python (`pip = 3`, `pip.main(...)`) stay Python."""
    src = 'pip install -U "jax[tpu]>=0.4.33"\nconda install -y numpy\npip = 3\npip.main(["list"])\nimport optax\n'
    code = cell_code(src)
    assert code.placeholders == [0, 1]
    assert code.text.splitlines()[2:] == ["pip = 3", 'pip.main(["list"])', "import optax"]
    cst.parse_module(code.text)


def test_cell_magics() -> None:
    bash = cell_code("%%bash\nls -la\nif [ -f x ]; then echo; fi\n")
    assert bash.foreign and bash.text == "\n\n\n"
    timed = cell_code("%%time\nimport optax\n")
    assert not timed.foreign and timed.text == "\nimport optax\n" and timed.placeholders == [0]


def test_a_cell_magic_after_colab_form_comments() -> None:
    """Colab form cells open with `# @title ...` (and `# @param` lines) and may put the
    cell magic after them; Colab runs it as the cell's magic. A non-Python magic there
    makes the cell foreign text (its LaTeX is no syntax error), a Python one keeps its
    body. A magic after code is still a line-magic placeholder, the rest Python."""
    latex = cell_code("# @title Answer to the math task\n%%latex\n\\begin{aligned}\ny_1 &= WX \\\\\n\\end{aligned}\n")
    assert latex.foreign and latex.text == "\n" * 5
    captured = cell_code("# @title Install\n# comment\n%%capture\n!pip install optax\nimport optax\n")
    assert not captured.foreign and captured.text.splitlines()[-1] == "import optax" and captured.placeholders == [2, 3]
    late = cell_code("x = 1\n%%latex\n")
    assert not late.foreign and late.text.splitlines()[0] == "x = 1" and late.placeholders == [1]


def test_placeholder_and_foreign_cells_are_not_linted_but_keep_numbering(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(["%%writefile train.py\nimport optax\n" + BAD_CHAIN, "!nvidia-smi\nimport optax\n%env X=1\n" + BAD_CHAIN]))
    [finding] = lint(path).findings
    assert (finding.cell, finding.span.line) == (2, 4)


def test_a_fix_touching_a_magic_line_is_refused() -> None:
    raw = nbformat_.parse(notebook(["import optax\n!ls\n" + BAD_CHAIN, "x = 1\n"]))
    layout = Layout(raw.cells)
    text = layout.text
    assert text == "import optax\npass\n" + BAD_CHAIN + "x = 1\n"
    magic = text.index("pass")
    assert "IPython magic" in layout.refusal(text, magic, magic + 5, "")  # deleting the magic line
    assert "IPython magic" in layout.refusal(text, magic + 1, magic + 1, "x")  # inside it
    assert layout.refusal(text, magic, magic, "y = 2\n") is None  # a line inserted before it is fine
    chain = text.index("tx")
    assert layout.refusal(text, chain, chain + 2, "opt") is None
    second = text.index("x = 1")
    assert "more than one notebook cell" in layout.refusal(text, chain, second + 1, "")
    assert "join two notebook cells" in layout.refusal(text, second - 1, second, "")


def test_the_fix_gate_refuses_magic_edits_end_to_end() -> None:
    """The gate sees the edit a fix makes to the module: one over the placeholder is refused."""
    from optax_lint.notebook.lint import cell_gate as _gate

    raw = nbformat_.parse(notebook(["import optax\n!ls\n" + BAD_CHAIN]))
    layout = Layout(raw.cells)
    module = cst.parse_module(layout.text)
    without_magic = module.with_changes(body=[module.body[0], *module.body[2:]])
    accepted, reason = _gate(layout, None)(None, module, without_magic)
    assert not accepted and "IPython magic" in reason
    moved = cst.parse_module(layout.text.replace(BAD_CHAIN, GOOD_CHAIN))
    assert _gate(layout, None)(None, module, moved) == (True, "")


def test_fixes_in_several_cells_land_in_their_cells(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(["import optax\n%load_ext autoreload\n", BAD_CHAIN + "!ls", "y = 2\n", BAD_CHAIN.replace("tx", "tx2")]))
    result = lint(path, fix=True)
    assert result.fixed == 2 and result.findings == []
    cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    assert cells == ["import optax\n%load_ext autoreload\n", GOOD_CHAIN + "!ls", "y = 2\n", GOOD_CHAIN.replace("tx", "tx2")]


# --- notebooks that cannot be linted ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"cells": [}', ("OPX001", "invalid notebook JSON: Expecting value (line 1, column 12)", 1, 12)),
        ('{"nbformat": 3, "worksheets": []}', ("OPX003", "not linted: an nbformat 3 notebook", 1, 1)),
        ('{"metadata": {}, "nbformat": 4}', ("OPX001", 'invalid notebook: no "cells" list (is this a Jupyter notebook?)', 1, 1)),
        ('[1, 2]', ("OPX001", "invalid notebook JSON: not a JSON object", 1, 1)),
        ('{"cells": [{"cell_type": "code", "source": 3}], "nbformat": 4}', ("OPX001", 'invalid notebook: the "source" of cell 1 is not text', 1, 1)),
        ('{"cells": [7], "nbformat": 4}', ("OPX001", "invalid notebook: cell 1 is not a JSON object", 1, 1)),
    ],
)
def test_bad_notebooks_get_one_clear_diagnostic(tmp_path: Path, text: str, expected: tuple) -> None:
    path = tmp_path / "bad.ipynb"
    path.write_text(text)
    [finding] = lint(path).findings
    assert (finding.code, finding.span.line, finding.span.column) == (expected[0], expected[2], expected[3])
    assert finding.message.startswith(expected[1]) and finding.cell is None


def test_deeply_nested_json_is_reported_not_crashed(tmp_path: Path) -> None:
    path = tmp_path / "deep.ipynb"
    path.write_text('{"cells": [], "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}")
    [finding] = lint(path).findings
    assert finding.code == "OPX001" and "too deeply nested" in finding.message


def test_a_cell_with_a_syntax_error_does_not_hide_the_others(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(["import optax\n", "def broken(:\n", BAD_CHAIN]))
    findings = lint(path).findings
    assert [(f.code, f.cell, f.span.line) for f in findings] == [("OPX001", 2, 1), ("OPX101", 3, 1)]
    assert findings[0].message.startswith("SyntaxError: ")


def test_empty_notebook_and_non_python_kernel_are_clean(tmp_path: Path) -> None:
    (tmp_path / "empty.ipynb").write_text(notebook([]))
    julia = json.loads(notebook(["import optax\n" + BAD_CHAIN]))
    julia["metadata"]["kernelspec"]["language"] = "julia"
    (tmp_path / "julia.ipynb").write_text(json.dumps(julia))
    assert lint(tmp_path / "empty.ipynb").findings == []
    assert lint(tmp_path / "julia.ipynb").findings == []


def test_notebook_size_bound_applies_to_code_not_outputs(tmp_path: Path) -> None:
    nb = json.loads(notebook(["import optax\n" + BAD_CHAIN]))
    nb["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["x" * 100_000]}]
    (tmp_path / "big.ipynb").write_text(json.dumps(nb))
    [finding] = lint(tmp_path / "big.ipynb", max_file_bytes=50_000).findings  # 98 KB file, 8 x 50 KB allowed
    assert finding.code == "OPX101"
    [finding] = lint(tmp_path / "big.ipynb", max_file_bytes=10_000).findings
    assert (finding.code, finding.message) == ("OPX003", "file is 98.0 KB, above the 78.1 KB limit for notebooks (8 x --max-file-size)")
    (tmp_path / "code.ipynb").write_text(notebook(["import optax\n" + BAD_CHAIN]))
    [finding] = lint(tmp_path / "code.ipynb", max_file_bytes=60).findings
    assert (finding.code, finding.message) == ("OPX003", "the code cells hold 81 bytes, above the 60 bytes limit (--max-file-size)")


def test_notebook_text_is_the_logical_module() -> None:
    assert notebook_text(notebook(["%pip install optax\nimport optax\n", "x = 1"])) == "pass\nimport optax\nx = 1\n"
    assert notebook_text("not json") is None


# --- discovery ------------------------------------------------------------------------------


def test_directory_walks_take_notebooks_unless_excluded(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import optax\n")
    (tmp_path / "explore.ipynb").write_text(notebook(["import optax\n"]))
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "explore-checkpoint.ipynb").write_text(notebook(["import optax\n"]))
    assert [p.name for p in discover([tmp_path], root=tmp_path).files] == ["explore.ipynb", "train.py"]
    skipped = discover([tmp_path], root=tmp_path, extend_exclude=["*.ipynb"])
    assert [p.name for p in skipped.files] == ["train.py"]


def test_show_context_spells_cell_locations(tmp_path: Path) -> None:
    shutil.copy(COLAB, tmp_path / "colab_train.ipynb")
    out = cli(["--show-context", "colab_train.ipynb"], tmp_path).stdout
    steps = next(line for line in out.splitlines() if line.strip().startswith("steps"))
    assert steps.split()[:2] == ["steps", "500"]
    assert "colab_train.ipynb:cell 8:13" in steps  # `for step in range(500):` is line 13 of cell 8
    (tmp_path / "bad.ipynb").write_text("{")
    assert cli(["--show-context", "bad.ipynb"], tmp_path).stdout == "bad.ipynb\n  cannot parse: not a Jupyter notebook (nbformat 4)\n"


# --- the layout follows edits (property) ---------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st

_LINES = ["import optax\n", "x = 1\n", "%matplotlib inline\n", "!pip install optax\n", "y = !ls\n", "optax.adamw?\n",
          "\n", "if x:\n    !echo\n", "z = (1,\n     %2)\n", "# note\n", "%%time\n", "%%bash\n", "def f(:\n"]
_CELL = st.tuples(st.lists(st.sampled_from(_LINES), max_size=5), st.booleans()).map(
    lambda t: "".join(t[0])[:-1] if t[1] and t[0] else "".join(t[0]))


@settings(max_examples=300, deadline=None)
@given(cells=st.lists(_CELL, max_size=5), data=st.data())
def test_layout_round_trips_and_keeps_edits_in_one_cell(cells: list[str], data) -> None:
    raw = nbformat_.parse(notebook(cells))
    layout = Layout(raw.cells)
    text = layout.text
    original = {c.number: c.source for c in raw.cells}
    assert layout.sources(text) == original
    assert [layout.locate(text, 1 + text[:seg.start].count("\n"))[0] for seg in layout.segments] == [c.number for c in raw.cells]
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 8)))
    replacement = data.draw(st.sampled_from(["", "Q", "Q\n", "QQ = 1\n"]))
    near = data.draw(st.none() | st.integers(1, text.count("\n") + 1))
    if layout.refusal(text, start, end, replacement, near_line=near) is not None:
        return
    boundaries = {seg.start for seg in layout.segments} | {len(text)}
    layout.applied([(start, end, replacement)])
    after = layout.sources(text[:start] + replacement + text[end:])
    changed = [n for n in original if after[n] != original[n]]
    assert len(changed) <= 1
    if start == end and start in boundaries:  # appended after a cell's added final newline, which then stays
        return
    assert sum(map(len, after.values())) == sum(map(len, original.values())) + len(replacement) - (end - start)


def test_an_insertion_after_a_cells_last_line_stays_in_that_cell() -> None:
    raw = nbformat_.parse(notebook(["import optax\n", "y = 2\n"]))
    layout = Layout(raw.cells)
    text = layout.text
    boundary = text.index("y = 2")
    # Fixing a finding on line 1 (cell 1): the new line is cell 1's.
    assert layout.refusal(text, boundary, boundary, "z = 1\n", near_line=1) is None
    layout.applied([(boundary, boundary, "z = 1\n")])
    assert layout.sources(text[:boundary] + "z = 1\n" + text[boundary:]) == {1: "import optax\nz = 1\n", 2: "y = 2\n"}
    # Without a finding in cell 1, the same insertion starts cell 2.
    layout = Layout(raw.cells)
    assert layout.refusal(text, boundary, boundary, "z = 1\n") is None
    layout.applied([(boundary, boundary, "z = 1\n")])
    assert layout.sources(text[:boundary] + "z = 1\n" + text[boundary:]) == {1: "import optax\n", 2: "z = 1\ny = 2\n"}


def test_nothing_is_inserted_above_a_cell_magic() -> None:
    raw = nbformat_.parse(notebook(["%%time\nimport optax\n"]))
    layout = Layout(raw.cells)
    assert "IPython magic" in layout.refusal(layout.text, 0, 0, "import jax\n")
    assert layout.refusal(layout.text, 1, 1, "import jax\n") is None  # after the %%time line


def test_a_fix_over_a_magic_line_is_refused_and_the_notebook_left_alone(tmp_path: Path, monkeypatch) -> None:
    """A rule whose fix deletes the statement where `!ls` stood: the notebook gate refuses
    it, the finding stays with the reason, and the file is not written."""
    from optax_lint.core.diagnostics import Applicability, Finding, Fix, Severity, Span
    from optax_lint.rules import registry

    class DeletesSecondStatement:
        def check(self, ctx) -> None:
            def fix(module):
                return module.with_changes(body=[module.body[0], *module.body[2:]])

            ctx.findings.append(Finding("OPX101", "clip-after-optimizer", Severity.ERROR, "test", ctx.facts.path,
                                        Span(3, 1, 3, 6), Fix("delete", Applicability.SAFE, fix)))

    monkeypatch.setattr(registry.rule_class("OPX101"), "check", DeletesSecondStatement.check)
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(["import optax\n!ls\nx = 1\n"]))
    before = path.read_bytes()
    result = lint(path, fix=True)
    assert result.fixed == 0 and path.read_bytes() == before
    [finding] = result.findings
    assert (finding.cell, finding.span.line) == (1, 3)
    assert "IPython magic or shell line in cell 1" in finding.evidence["fix_refused"]


def test_crlf_notebook_json_keeps_its_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    text = notebook(["import optax\n", BAD_CHAIN]).replace("\n", "\r\n")
    path.write_bytes(text.encode())
    lint(path, fix=True)
    assert path.read_bytes() == text.replace(json.dumps(BAD_CHAIN)[1:-1], json.dumps(GOOD_CHAIN)[1:-1]).encode()


def test_a_lone_surrogate_in_a_cell_is_a_syntax_error_of_that_cell(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(["import optax\n", "s = '\\ud800'\n", "import optax\n" + BAD_CHAIN], ).replace("\\\\ud800", "\\ud800"))
    findings = lint(path).findings
    assert [(f.code, f.cell) for f in findings] == [("OPX001", 2), ("OPX101", 3)]
    assert "surrogates not allowed" in findings[0].message


def test_verify_locates_the_chain_by_cell(tmp_path: Path) -> None:
    pytest.importorskip("optax")
    shutil.copy(COLAB, tmp_path / "colab_train.ipynb")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "NO_COLOR": "1", "OPTAX_LINT_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "optax_lint", "--verify", "--output-format", "concise", "colab_train.ipynb"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    report = lines.index("colab_train.ipynb:cell 7:3:6: tx")
    clip = next(line for line in lines[report:] if "reaches the optimizer clipped" in line)
    assert clip.rstrip().endswith("✗")  # measured: the clip after adamw does not clip the gradient


def test_invalid_json_gets_a_frame_of_the_json_line(tmp_path: Path) -> None:
    (tmp_path / "broken.ipynb").write_text('{\n "cells": [\n  {"cell_type": "code", "source": ["x = 1"]}\n  {"cell_type": "code"}\n ]\n}\n')
    out = cli(["broken.ipynb"], tmp_path).stdout
    assert out.startswith("broken.ipynb:4:3: OPX001 error invalid notebook JSON: Expecting ',' delimiter (line 4, column 3)\n")
    assert '4 |   {"cell_type": "code"}\n  |   ^ OPX001\n' in out


def test_fixed_notebook_can_be_returned_instead_of_written(tmp_path: Path) -> None:
    """For callers that output the fixed notebook themselves (stdin): `write = False` and a
    `read` that supplies the file's text."""
    from optax_lint.core.source import read_source
    from optax_lint.run.notebook_file import lint_notebook_file

    path = tmp_path / "nb.ipynb"
    before = notebook(["import optax\n", BAD_CHAIN])
    path.write_text(before)
    options = api.RunOptions(fix=True)
    options.write = False
    reads = []
    result, text, _ = lint_notebook_file(path, "nb.ipynb", load_settings(start=tmp_path).enabled_codes(),
                                         load_settings(start=tmp_path), options, read=lambda p: reads.append(p) or read_source(p))
    assert reads == [path] and result.fixed == 1
    assert path.read_text() == before
    assert text == before.replace(json.dumps(BAD_CHAIN)[1:-1], json.dumps(GOOD_CHAIN)[1:-1])


_POOL = ["import optax\n", "%matplotlib inline\n", "!nvidia-smi\n", BAD_CHAIN, GOOD_CHAIN, "files = !ls\n", "optax.adamw?\n",
         "tx2 = optax.chain(\n    optax.adam(1e-3),\n    optax.clip_by_global_norm(1.0),\n)\n", "if True:\n    %time x = 1\n",
         "opt = optax.adamw(1e-3),\n", "x = (1 +\n  2)\n", "%%time\n", "def f(:\n"]


@settings(max_examples=60, deadline=None)
@given(cells=st.lists(st.lists(st.sampled_from(_POOL), min_size=1, max_size=4).map("".join), min_size=1, max_size=4),
       indent=st.sampled_from([1, 2]), as_list=st.booleans())
def test_fix_round_trip_on_generated_notebooks(tmp_path_factory, cells: list[str], indent: int, as_list: bool) -> None:
    """Whatever the cells: the fixed file is valid JSON that differs only in code cell
    sources, every magic line survives in its cell in order, and a second --fix is a no-op."""
    path = tmp_path_factory.mktemp("nb") / "nb.ipynb"
    cells = ["import optax\n", *cells]
    path.write_text(notebook(cells, indent=indent, as_list=as_list))
    before = json.loads(path.read_text())
    lint(path, fix=True, unsafe_fixes=True)
    after = json.loads(path.read_text())
    sources = [("".join(c["source"]) if as_list else c["source"]) for c in after["cells"]]
    for cell in (before, after):
        for c in cell["cells"]:
            c["source"] = None
    assert before == after
    for old, new in zip(cells, sources):
        magic = [line for line in old.splitlines() if line.lstrip().startswith(("%", "!")) or "= !" in line or line.endswith("?")]
        assert [line for line in new.splitlines() if line in magic] == magic
    once = path.read_bytes()
    lint(path, fix=True, unsafe_fixes=True)
    assert path.read_bytes() == once


_SERIALIZE = "import optax\nfrom flax import serialization\nparams = {'w': 1.0}\nstate = serialization.to_state_dict(params)\n"


@pytest.mark.parametrize(
    "cells, reported",
    [
        ([_SERIALIZE, "serialization.from_state_dict(params, state)\n"], []),  # the cell shows the restored state
        ([_SERIALIZE, "serialization.from_state_dict(params, state)  # shown\n\n# done\n"], []),  # comments after it
        ([_SERIALIZE, "serialization.from_state_dict(params, state);\n"], [(2, 1)]),  # `;` hides the output
        ([_SERIALIZE, "serialization.from_state_dict(params, state)\nprint(params)\n"], [(2, 1)]),  # not the last
        ([_SERIALIZE + "serialization.from_state_dict(params, state)\n", "x = 1\n"], []),  # the end of cell 1
        ([_SERIALIZE + "serialization.from_state_dict(params, state)\nstate = None\n", "x = 1\n"], [(1, 5)]),
    ],
)
def test_a_cells_last_expression_is_shown_not_discarded(tmp_path: Path, cells: list[str], reported: list) -> None:
    """IPython displays the value of a cell's last expression statement: a bare
    `from_state_dict(...)` there is a demo of the restored state, not a discarded result."""
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(cells), encoding="utf-8")
    found = [(f.cell, f.span.line) for f in lint(path).findings if f.code == "OPX504"]
    assert found == reported
