"""The everyday loop at ruff's level (issue 23), through the real `python -m optax_lint`:
--show-fixes, --add-noqa, --watch, and ruff's unused-noqa check run beside optax-lint."""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli import BAD, GOOD

ROOT = Path(__file__).resolve().parent.parent
WARNING_LINE = "tx = optax.chain(optax.add_decayed_weights(1e-4), optax.adamw(1e-3))"  # OPX103, no fix
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")


def env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "OPTAX_LINT_NO_CACHE": "1"}


def lint(args, cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optax_lint", *args], cwd=cwd, env=env(), capture_output=True, stdin=subprocess.DEVNULL,
                          text=True, timeout=timeout)


# --- --show-fixes ----------------------------------------------------------------------


def test_show_fixes_lists_each_fixed_finding_by_file_line_and_code(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "warn.py").write_text(f"import optax\n\n{WARNING_LINE}\n")
    proc = lint(["bad.py", "warn.py", "--fix", "--show-fixes", "--output-format", "concise"], tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the OPX103 warning has no fix and remains
    assert proc.stdout == (
        "warn.py:3:18: OPX103 warning add_decayed_weights(1e-4) decays the weights a second time: "
        "adamw(1e-3) already applies weight_decay=0.0001\n"
        "\n"
        "Fixed 1 problem:\n"
        "- bad.py:\n"
        "    5:5 OPX101 (clip-after-optimizer): Move clip_by_global_norm(1.0) to the front of the chain (the optimizer state changes structure: a checkpoint of the old opt_state will not restore into it)\n"
        "\n"
        "Found 2 problems (1 fixed, 1 remaining).\n"
    )
    assert (tmp_path / "bad.py").read_text() == GOOD


def test_show_fixes_lists_nothing_without_fix_and_survives_quiet(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(BAD)
    proc = lint(["bad.py", "--show-fixes", "--output-format", "concise"], tmp_path)
    assert proc.returncode == 1 and "Fixed" not in proc.stdout
    proc = lint(["bad.py", "--fix", "--show-fixes", "-q"], tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.startswith("Fixed 1 problem:\n- bad.py:\n    5:5 OPX101 (clip-after-optimizer)")
    assert "Found" not in proc.stdout


def test_show_fixes_with_worker_processes(tmp_path: Path) -> None:
    # Enough source for the process pool: the fixed findings cross back from the workers.
    for n in range(8):
        (tmp_path / f"bad{n}.py").write_text(BAD)
    (tmp_path / "big.py").write_text("x = 1\n" * 60_000)
    proc = lint([".", "--fix", "--show-fixes", "-j", "2", "--output-format", "concise"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("5:5 OPX101 (clip-after-optimizer)") == 8
    assert "Found 8 problems (8 fixed, 0 remaining)." in proc.stdout


# --- --add-noqa ------------------------------------------------------------------------


NOQA_SOURCE = (
    "import optax\n"
    "\n"
    f"{WARNING_LINE}  # noqa: E501\n"  # ruff's code: merged
    f"{WARNING_LINE}  # type: ignore\n"  # another tool's comment: kept, the noqa follows
    f"{WARNING_LINE}  # noqa:E501  # pragma: no cover\n"  # merged, and the comment after it kept
    f"{WARNING_LINE}   \n"  # trailing blanks go
    "tx5 = optax.chain(optax.add_decayed_weights(1e-4),\n"  # a finding spanning lines: its first line
    "                  optax.adamw(1e-3))\n"
    f"{WARNING_LINE}  # noqa\n"  # a bare noqa already silences it: no finding, untouched
)
NOQA_RESULT = (
    "import optax\n"
    "\n"
    f"{WARNING_LINE}  # noqa: E501, OPX103\n"
    f"{WARNING_LINE}  # type: ignore  # noqa: OPX103\n"
    f"{WARNING_LINE}  # noqa: E501, OPX103  # pragma: no cover\n"
    f"{WARNING_LINE}  # noqa: OPX103\n"
    "tx5 = optax.chain(optax.add_decayed_weights(1e-4),  # noqa: OPX103\n"
    "                  optax.adamw(1e-3))\n"
    f"{WARNING_LINE}  # noqa\n"
)


def test_add_noqa_merges_with_existing_comments_and_is_idempotent(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(NOQA_SOURCE)
    (tmp_path / "bad.py").write_text(BAD)
    proc = lint(["train.py", "bad.py", "--add-noqa"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert proc.stderr == "Added 6 noqa directives.\n"
    assert (tmp_path / "train.py").read_text() == NOQA_RESULT
    assert (tmp_path / "bad.py").read_text() == BAD.replace(
        "    optax.clip_by_global_norm(1.0),\n", "    optax.clip_by_global_norm(1.0),  # noqa: OPX101\n"
    )
    # Every finding is now suppressed, and a second run adds nothing.
    assert lint(["train.py", "bad.py"], tmp_path).returncode == 0
    proc = lint(["train.py", "bad.py", "--add-noqa"], tmp_path)
    assert (proc.returncode, proc.stderr) == (0, "Added 0 noqa directives.\n")
    assert (tmp_path / "train.py").read_text() == NOQA_RESULT


def test_add_noqa_keeps_encoding_line_endings_and_mode(tmp_path: Path) -> None:
    text = f"# -*- coding: latin-1 -*-\r\nimport optax\r\nnom = 'café'\r\n{WARNING_LINE}\r\n"
    path = tmp_path / "train.py"
    path.write_bytes(text.encode("latin-1"))
    path.chmod(0o751)
    proc = lint(["train.py", "--add-noqa"], tmp_path)
    assert (proc.returncode, proc.stderr) == (0, "Added 1 noqa directive.\n")
    assert path.read_bytes() == text.replace(f"{WARNING_LINE}\r\n", f"{WARNING_LINE}  # noqa: OPX103\r\n").encode("latin-1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]  # no temporary file left behind


def test_add_noqa_says_which_findings_cannot_take_a_comment(tmp_path: Path) -> None:
    # The finding starts on a line that continues with a backslash: no comment can go there.
    (tmp_path / "train.py").write_text(
        "import optax\n\ntx = optax.chain(optax.add_decayed_weights(1e-4), \\\n    optax.adamw(1e-3))\n"
    )
    (tmp_path / "broken.py").write_text("import optax\ntx = optax.chain(\n")
    proc = lint(["train.py", "broken.py", "--add-noqa"], tmp_path)
    assert proc.returncode == 1, proc.stderr  # findings remain
    assert "train.py:3:18: OPX103 not suppressed: its line ends inside a string or continues with a backslash" in proc.stderr
    assert "broken.py:" in proc.stderr and "OPX001 not suppressed: a noqa comment cannot silence OPX001" in proc.stderr
    assert proc.stderr.endswith("Added 0 noqa directives.\n")
    assert "noqa" not in (tmp_path / "train.py").read_text()


@pytest.mark.parametrize("other", [["--fix"], ["--diff"], ["--watch"], ["--update-baseline", "--baseline", "b.json"]])
def test_add_noqa_is_one_kind_of_run(tmp_path: Path, other: list) -> None:
    (tmp_path / "bad.py").write_text(BAD)
    proc = lint(["bad.py", "--add-noqa", *other], tmp_path)
    assert proc.returncode == 2
    assert f"optax-lint: error: --add-noqa cannot be combined with {other[0]}" in proc.stderr
    assert (tmp_path / "bad.py").read_text() == BAD


# --- ruff beside optax-lint -------------------------------------------------------------


@pytest.mark.skipif(RUFF is None, reason="ruff is in the test extra")
def test_ruff_keeps_optax_lint_noqa_comments_with_external_opx(tmp_path: Path) -> None:
    """The README's setting: ruff's RUF100 removes unused and unknown noqa codes, but not
    `OPX` ones, and removes a bare `# noqa` (which is why the README asks for codes)."""
    (tmp_path / "pyproject.toml").write_text('[tool.ruff.lint]\nexternal = ["OPX"]\n')
    (tmp_path / "train.py").write_text(NOQA_SOURCE)
    assert lint(["train.py", "--add-noqa"], tmp_path).returncode == 0
    proc = subprocess.run([RUFF, "check", "--no-cache", "--select", "RUF100", "--extend-select", "E501", "--fix", "train.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = (tmp_path / "train.py").read_text()
    # E501 suppressed nothing (the lines are short): ruff dropped it and kept OPX103 ...
    assert after.count("# noqa: OPX103") == 5 and "E501" not in after
    assert f"{WARNING_LINE}  # noqa: OPX103  # pragma: no cover\n" in after
    # ... and removed the bare noqa, which silenced nothing ruff knows of.
    assert after.endswith(f"{WARNING_LINE}\n")
    # optax-lint still finds every finding suppressed but the one the bare noqa hid.
    proc = lint(["train.py", "--output-format", "concise"], tmp_path)
    assert proc.returncode == 1
    assert [line.split(": ")[0] for line in proc.stdout.splitlines() if "OPX" in line] == ["train.py:9:18"]


# --- --watch ---------------------------------------------------------------------------


class _Lines:
    """Lines of a process's stdout, read with a deadline (never blocks past it)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.buffer = proc, b""
        self.selector = selectors.DefaultSelector()
        self.selector.register(proc.stdout, selectors.EVENT_READ)

    def until(self, marker: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while marker.encode() not in self.buffer:
            left = deadline - time.monotonic()
            assert left > 0, f"no {marker!r} in {self.buffer.decode()!r}"
            if self.selector.select(left):
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk, f"the process ended: {self.buffer.decode()!r}"
                self.buffer += chunk
        text, _, self.buffer = self.buffer.partition(marker.encode())
        return text.decode()

    def drain_until_exit(self, proc: subprocess.Popen, sig: int, every: float, timeout: float) -> tuple[bytes, bytes]:
        """Send `sig` every `every` seconds until the process exits, reading both pipes
        meanwhile; (the rest of stdout, all of stderr)."""
        self.selector.register(proc.stderr, selectors.EVENT_READ)
        out, err = self.buffer, b""
        deadline, next_signal = time.monotonic() + timeout, 0.0
        while proc.poll() is None and time.monotonic() < deadline:
            if time.monotonic() >= next_signal:
                proc.send_signal(sig)
                next_signal = time.monotonic() + every
            for key, _ in self.selector.select(0.1):
                chunk = os.read(key.fileobj.fileno(), 65536)
                if key.fileobj is proc.stderr:
                    err += chunk
                else:
                    out += chunk
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
        return out + (proc.stdout.read() if proc.poll() is not None else b""), err + (proc.stderr.read() if proc.poll() is not None else b"")


def test_watch_lints_again_after_a_change_and_stops_on_interrupt(tmp_path: Path) -> None:
    pytest.importorskip("watchfiles")
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "b.py").write_text("import optax\n")
    # The child gets Python's own Ctrl-C handling whatever the test process inherited.
    proc = subprocess.Popen([sys.executable, "-m", "optax_lint", ".", "--watch", "--output-format", "concise"],
                            cwd=tmp_path, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        lines = _Lines(proc)
        first = lines.until("Watching for file changes.")
        assert "Starting linter in watch mode..." in first
        assert "a.py:5:5: OPX101 error" in first and "b.py" not in first
        assert "Found 1 problem" in first and "Checked 2 files (findings fail the run)." in first
        (tmp_path / "b.py").write_text(f"import optax\n\n{WARNING_LINE}\n")
        second = lines.until("Watching for file changes.")
        assert "File change detected: b.py" in second
        assert "a.py:5:5: OPX101 error" in second  # the whole report again
        assert "b.py:3:18: OPX103 warning" in second
        assert "Found 2 problems" in second
        # Ctrl-C, while both pipes are drained (a watcher blocked on a full pipe cannot
        # exit), again every 5 s if need be, as a user would.
        out, err = lines.drain_until_exit(proc, signal.SIGINT, every=5, timeout=60)
        assert proc.returncode == 0, (proc.returncode, out[-2000:], err[-2000:])
        assert b"Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_watch_without_watchfiles_says_how_to_install_it(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(BAD)
    code = "import sys; sys.modules['watchfiles'] = None\nfrom optax_lint.cli import main\nmain(['a.py', '--watch'])"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == (
        "optax-lint: error: --watch needs the watchfiles package; install it with `pip install watchfiles` "
        "(or the optax-lint[watch] extra)\n"
    )


@pytest.mark.parametrize("other", [["--diff"], ["--show-context"], ["-"]])
def test_watch_is_one_kind_of_run(tmp_path: Path, other: list) -> None:
    proc = lint([*other, "--watch"] if other == ["-"] else [".", "--watch", *other], tmp_path)
    assert proc.returncode == 2 and "--watch cannot be combined with" in proc.stderr
