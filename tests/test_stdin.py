"""`optax-lint - --stdin-filename NAME`: lint or fix text from standard input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_cli import BAD, GOOD, UNSAFE_ONLY, run


def stdin_run(args, cwd: Path, data: bytes):
    return subprocess.run(
        [sys.executable, "-m", "optax_lint", *args], cwd=cwd, input=data, capture_output=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )


def test_findings_carry_the_stdin_filename(tmp_path: Path) -> None:
    result = run(["-", "--stdin-filename", "src/train.py", "--output-format", "json"], tmp_path, input=BAD)
    assert result.exit_code == 1
    (finding,) = json.loads(result.output)
    assert (finding["path"], finding["code"], finding["line"]) == ("src/train.py", "OPX101", 5)
    # Without a name the input is "-"; with --stdin-filename alone stdin is read too.
    assert run(["-", "--output-format", "concise"], tmp_path, input=BAD).output.startswith("-:5:5: OPX101")
    assert run(["--stdin-filename", "t.py", "--output-format", "concise"], tmp_path, input=BAD).output.startswith("t.py:5:5:")
    assert run(["-"], tmp_path, input=GOOD).exit_code == 0
    assert not (tmp_path / "src").exists()  # nothing is written, nothing is read from disk


def test_fix_writes_the_fixed_text_to_stdout_and_findings_to_stderr(tmp_path: Path) -> None:
    proc = stdin_run(["-", "--stdin-filename", "train.py", "--fix"], tmp_path, BAD.encode())
    assert proc.returncode == 0
    assert proc.stdout.decode() == GOOD
    assert "1 fixed, 0 remaining" in proc.stderr.decode()
    # Remaining findings (an unsafe fix not enabled) go to stderr, exit 1, text unchanged.
    proc = stdin_run(["-", "--stdin-filename", "train.py", "--fix", "--output-format", "concise"], tmp_path, UNSAFE_ONLY.encode())
    assert proc.returncode == 1 and proc.stdout.decode() == UNSAFE_ONLY
    assert "train.py:3:" in proc.stderr.decode()


def test_fix_keeps_encoding_bom_and_line_endings(tmp_path: Path) -> None:
    raw = b"\xef\xbb\xbf" + BAD.replace("\n", "\r\n").replace("import optax", "import optax  # caf\xc3\xa9", 1).encode("latin-1")
    proc = stdin_run(["-", "--stdin-filename", "train.py", "--fix"], tmp_path, raw)
    assert proc.returncode == 0, proc.stderr
    expected = b"\xef\xbb\xbf" + GOOD.replace("\n", "\r\n").replace("import optax", "import optax  # caf\xc3\xa9", 1).encode("latin-1")
    assert proc.stdout == expected
    # Input that does not decode passes through untouched, reported as a syntax error.
    proc = stdin_run(["-", "--stdin-filename", "train.py", "--fix"], tmp_path, b"x = '\xff'\n")
    assert proc.stdout == b"x = '\xff'\n" and proc.returncode == 1 and b"OPX001" in proc.stderr


def test_config_is_resolved_relative_to_the_stdin_filename(tmp_path: Path) -> None:
    (tmp_path / "proj" / "src").mkdir(parents=True)
    (tmp_path / "proj" / "optax-lint.toml").write_text('ignore = ["OPX101"]\n[per-file-ignores]\n"src/legacy_*.py" = ["OPX102"]\n')
    assert run(["-", "--stdin-filename", "proj/src/train.py"], tmp_path, input=BAD).exit_code == 0
    assert run(["-", "--stdin-filename", "other/train.py"], tmp_path, input=BAD).exit_code == 1
    assert run(["-", "--stdin-filename", "proj/src/legacy_x.py"], tmp_path, input=UNSAFE_ONLY).exit_code == 0
    assert run(["-", "--stdin-filename", "proj/src/x.py"], tmp_path, input=UNSAFE_ONLY).exit_code == 1


def test_force_exclude_passes_excluded_input_through(tmp_path: Path) -> None:
    (tmp_path / "optax-lint.toml").write_text('extend-exclude = ["gen"]\n')
    proc = stdin_run(["-", "--stdin-filename", "gen/train.py", "--fix", "--force-exclude"], tmp_path, BAD.encode())
    assert (proc.returncode, proc.stdout.decode()) == (0, BAD)
    assert run(["-", "--stdin-filename", "gen/train.py"], tmp_path, input=BAD).exit_code == 1  # named: linted


def test_diff_and_usage_errors(tmp_path: Path) -> None:
    result = run(["-", "--stdin-filename", "train.py", "--diff"], tmp_path, input=BAD)
    assert result.exit_code == 1 and "+++ b/train.py" in result.output
    assert run(["-", "a.py"], tmp_path, input=BAD).exit_code == 2
    assert run(["a.py", "--stdin-filename", "x.py"], tmp_path, input=BAD).exit_code == 2


def test_a_notebook_on_stdin_is_linted_by_cell_and_fixed_byte_for_byte(tmp_path: Path) -> None:
    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "notebooks"
    data = (fixtures / "colab_train.ipynb").read_bytes()
    proc = stdin_run(["-", "--stdin-filename", "train.ipynb", "--output-format", "concise"], tmp_path, data)
    assert proc.returncode == 1
    assert proc.stdout.decode().startswith("train.ipynb:cell 7:5:5: OPX101 error [*] clip_by_global_norm(1.0)")
    proc = stdin_run(["-", "--stdin-filename", "train.ipynb", "--fix"], tmp_path, data)
    assert proc.returncode == 0
    assert proc.stdout == (fixtures / "colab_train.fixed.ipynb").read_bytes()  # outputs, metadata, layout kept
    assert list(tmp_path.iterdir()) == []  # nothing written to disk
