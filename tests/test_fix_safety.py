"""`--fix` never loses a byte: atomic writes under SIGKILL, mode/encoding/line endings
kept, unparseable fixes never written, convergence on every fixture, refusal to
overwrite a file changed since it was read, and two concurrent `--fix` runs.

tests/test_source.py covers write_source itself (temp file + fsync + os.replace, a
SIGKILL loop on the writer); these tests go through the command line.
"""

from __future__ import annotations

import ast
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner

from optax_lint.cli import main
from optax_lint.core.catalogue import load_catalogue
from optax_lint.engine import lint as engine
from optax_lint.rules import registry
from optax_lint.run import api
from tests.test_source import _leftovers

# Its module fixtures are costly: one xdist worker computes them once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("fix_safety")

REPO = Path(__file__).resolve().parents[1]
FIXTURES = sorted(p for p in (REPO / "fixtures").rglob("*.py") if not p.name.endswith(".fixed.py"))
ALL_CODES = set(load_catalogue()) | set(registry.load_all())
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}

BAD = "import optax\n\ntx = optax.chain(optax.adamw(1e-3), optax.clip_by_global_norm(1.0))\n"
SWAPPED = "import optax\n\ntx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))\n"


def cli(args, cwd: Path):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, ["--output-format", "concise", "-j", "1", *args], catch_exceptions=False)
    finally:
        os.chdir(old)
    assert "Traceback" not in result.output, result.output
    return result


# --- mode, encoding, line endings ------------------------------------------------------


@pytest.mark.parametrize(
    "name, encoding, newline, bom, mode, prefix",
    [
        ("latin1_crlf.py", "latin-1", "\r\n", False, 0o755, "# -*- coding: latin-1 -*-\nauthor = 'Jos\u00e9'\n"),
        ("bom_cr.py", "utf-8", "\r", True, 0o600, "author = 'Zo\u00eb \u2713'\n"),
        ("readonly_lf.py", "utf-8", "\n", False, 0o444, "author = '\u65e5\u672c'\n"),
        ("cp1252_lf.py", "cp1252", "\n", False, 0o640, "# vim: set fileencoding=cp1252 :\nprice = '\u20ac5'\n"),
    ],
)
def test_fix_keeps_mode_encoding_bom_and_line_endings(tmp_path, name, encoding, newline, bom, mode, prefix) -> None:
    path = tmp_path / name

    def encoded(text: str) -> bytes:
        return (b"\xef\xbb\xbf" if bom else b"") + text.replace("\n", newline).encode(encoding)

    path.write_bytes(encoded(prefix + BAD))
    path.chmod(mode)
    result = cli([name, "--fix"], tmp_path)
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == encoded(prefix + SWAPPED)
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_every_fixture_fix_is_the_same_under_crlf_and_cr(newline) -> None:
    # libcst drops the final newline of CR-only files; engine._keep_final_cr restores it.
    for fixed in sorted((REPO / "fixtures").glob("OPX*/*.fixed.py"))[::4]:  # a quarter: ~25 s for all
        source = fixed.with_name(fixed.name.replace(".fixed.py", ".py"))
        text = source.read_text(encoding="utf-8").replace("\n", newline)
        run = engine.fix_text(text, str(source), {source.parent.name}, unsafe=True)
        from optax_lint.core.source import SourceFile, encode_text

        src = SourceFile(source, text, "utf-8", False, newline, 0o644, "")
        assert encode_text(src, run.text).decode() == fixed.read_text(encoding="utf-8").replace("\n", newline), source.name


# --- unparseable fixes are never written --------------------------------------------------


def _break_fixes(monkeypatch, code: str, make_bad) -> None:
    rule = registry.rule_class(code)
    original = rule.check

    def check(self, ctx):
        original(self, ctx)
        for finding in ctx.findings:
            if finding.fix is not None and finding.fix.apply is not None:
                finding.fix.apply = make_bad

    monkeypatch.setattr(rule, "check", check)


@pytest.mark.parametrize(
    "label, make_bad",
    [
        # libcst renders it, but nothing parses it.
        ("garbage", lambda module: module.with_changes(body=[cst.SimpleStatementLine([cst.Expr(cst.Name("tx = (("))])])),
        # libcst parses it, CPython refuses it: also rejected.
        ("cpython_only", lambda module: cst.parse_module("import optax\nx = '\\N{NO SUCH CHARACTER NAME}'\n")),
        # the fix itself raises
        ("raises", lambda module: (_ for _ in ()).throw(RuntimeError("fix crashed"))),
    ],
)
def test_a_fix_that_would_not_parse_is_never_written(tmp_path, monkeypatch, label, make_bad) -> None:
    _break_fixes(monkeypatch, "OPX101", make_bad)
    path = tmp_path / "train.py"
    path.write_text(BAD)
    before = path.stat().st_mtime_ns
    result = cli(["train.py", "--fix"], tmp_path)
    assert path.read_text() == BAD and path.stat().st_mtime_ns == before
    assert "train.py:3:37: OPX101 error [*] clip_by_global_norm(1.0) runs after adamw(1e-3)" in result.output
    assert "train.py:3:37: OPX900 error the fix for OPX101 at line 3 would not re-parse; it was not applied" in result.output
    assert result.exit_code == 2
    assert _leftovers(tmp_path) == []


def test_a_fix_only_libcst_refuses_is_dropped_and_the_others_still_apply(monkeypatch) -> None:
    """Each fix is checked alone by CPython; libcst judges the round's combined text, and
    when it refuses it, each fix alone: the one it refuses is dropped, not the round."""
    fixture = REPO / "fixtures" / "OPX701" / "bad_legacy_optax_names.py"
    text = fixture.read_text(encoding="utf-8")
    expected = fixture.with_suffix(".fixed.py").read_text(encoding="utf-8")
    refused_fix = "optax.tree.norm(grads)"
    assert refused_fix in expected and refused_fix not in text
    parse_module = cst.parse_module

    def picky(source, *args, **kwargs):
        if refused_fix in source:
            raise cst.ParserSyntaxError("refused for the test", lines=["x"], raw_line=1, raw_column=0)
        return parse_module(source, *args, **kwargs)

    monkeypatch.setattr(cst, "parse_module", picky)
    run = engine.fix_text(text, str(fixture), {"OPX701"})
    assert run.text == expected.replace(refused_fix, "optax.global_norm(grads)")
    assert [(f.code, f.span.line) for f in run.dropped] == [("OPX701", 57)]
    assert run.applied == 4


def test_a_fix_cpython_refuses_only_in_the_whole_file_is_dropped(monkeypatch) -> None:
    """Each fix is checked by CPython on the top-level statements it changed (each is
    syntax on its own); the round's combined text is checked whole, so a fix that is
    wrong only in its file's context (a statement put before `from __future__`) is
    still dropped, and the others apply."""
    fixture = REPO / "fixtures" / "OPX701" / "bad_legacy_optax_names.py"
    text = fixture.read_text(encoding="utf-8")
    expected = fixture.with_suffix(".fixed.py").read_text(encoding="utf-8")
    refused_fix = "optax.tree.norm(grads)"
    cpython_parse = engine.cpython_parse
    seen = []

    def picky(source, path):
        seen.append(len(source))
        if refused_fix in source and "import optax" in source:  # the whole file, not the statement
            return None, object(), False
        return cpython_parse(source, path)

    monkeypatch.setattr(engine, "cpython_parse", picky)
    run = engine.fix_text(text, str(fixture), {"OPX701"})
    assert run.text == expected.replace(refused_fix, "optax.global_norm(grads)")
    assert [(f.code, f.span.line) for f in run.dropped] == [("OPX701", 57)]
    assert min(seen) < len(text) / 4  # candidates were judged on their statements


@pytest.mark.parametrize(
    "old, new",
    [("", "x"), ("x", ""), ("abc", "abc"), ("aaa", "aa"), ("aa", "aaa"), ("abcabc", "abc"), ("a = 1\nb = 2\n", "a = 1\nc = 2\n"),
     ("xy" * 5000, "xy" * 2500 + "Z" + "xy" * 2500)],
)
def test_text_edit_is_the_minimal_span(old: str, new: str) -> None:
    start, end, replacement = engine._text_edit(old, new)
    assert old[:start] + replacement + old[end:] == new
    # minimal: nothing more could be trimmed from either side
    assert not (replacement and end > start and replacement[0] == old[start])
    assert not (replacement and end > start and replacement[-1] == old[end - 1])
    assert start + (len(old) - end) <= min(len(old), len(new))


# --- convergence on every fixture ----------------------------------------------------------


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: str(p.relative_to(REPO / "fixtures")))
def test_fixes_converge_on_every_fixture_with_every_rule(fixture: Path) -> None:
    text = fixture.read_text(encoding="utf-8")
    run = engine.lint_text(text, str(fixture), ALL_CODES)
    if not any(f.fixable(True) for f in run.findings):
        return  # nothing to fix: fix(x) == x
    first = engine.fix_text(text, str(fixture), ALL_CODES, unsafe=True)
    assert first.dropped == [] and first.internal_errors == 0
    ast.parse(first.text)
    compile(first.text, str(fixture), "exec", dont_inherit=True)
    second = engine.fix_text(first.text, str(fixture), ALL_CODES, unsafe=True)
    assert second.text == first.text, "fix(fix(x)) != fix(x)"
    assert second.applied == 0


# --- a file changed between read and write -------------------------------------------------


@pytest.mark.parametrize("change", ["edited", "deleted"])
def test_file_changed_between_read_and_write_is_not_overwritten(tmp_path, monkeypatch, change) -> None:
    path = tmp_path / "train.py"
    path.write_text(BAD)
    (tmp_path / "other.py").write_text(BAD)
    real = engine.fix_text
    edited = BAD + "# saved by the editor meanwhile\n"

    def fix_while_the_user_saves(text, shown, *args, **kwargs):
        result = real(text, shown, *args, **kwargs)
        if shown == "train.py":
            path.write_text(edited) if change == "edited" else path.unlink()
        return result

    monkeypatch.setattr(engine, "fix_text", fix_while_the_user_saves)
    result = cli(["--fix", "."], tmp_path)
    assert "train.py:1:1: OPX003 error not fixed: file changed on disk since it was read; not overwritten" in result.output
    assert "train.py:3:37: OPX101" in result.output  # still reported: it was not fixed
    if change == "edited":
        assert path.read_text() == edited
    else:
        assert not path.exists()
    assert (tmp_path / "other.py").read_text() == SWAPPED  # the other file was fixed
    assert result.exit_code == 1
    assert _leftovers(tmp_path) == []


# --- SIGKILL mid-run and concurrent runs ---------------------------------------------------


def _project(root: Path, n: int = 24) -> dict[str, bytes]:
    """n bad training scripts (fixture copies, so several rules fire) -> original bytes."""
    sources = sorted((REPO / "fixtures").glob("OPX*/bad_*.py"))
    sources = [p for p in sources if p.with_name(p.stem + ".fixed.py").exists()]
    originals = {}
    for i in range(n):
        src = sources[i % len(sources)]
        name = f"pkg{i % 3}/{i:02d}_{src.name}"
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, root / name)
        originals[name] = (root / name).read_bytes()
    return originals


def _fixed_versions(tmp_path: Path, originals: dict[str, bytes]) -> dict[str, bytes]:
    reference = tmp_path / "reference"
    reference.mkdir()
    _project(reference, len(originals))
    proc = subprocess.run([sys.executable, "-m", "optax_lint", "--fix", "--unsafe-fixes", "-q", "-j", "1", "."],
                          cwd=reference, env=ENV, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    fixed = {name: (reference / name).read_bytes() for name in originals}
    assert sum(fixed[n] != originals[n] for n in originals) >= len(originals) // 2
    return fixed


def _no_temp_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.optax-lint.tmp"))


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """(original bytes, bytes after one `--fix --unsafe-fixes` run) of a 16-file tree."""
    base = tmp_path_factory.mktemp("project")
    (base / "scratch").mkdir()
    originals = _project(base / "scratch", 16)
    return originals, _fixed_versions(base, originals)


def test_sigkill_during_fix_leaves_every_file_old_or_new(tmp_path, project) -> None:
    originals, fixed = project
    tree = tmp_path / "tree"
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    deadline = time.monotonic() + 12
    outcomes = set()
    for iteration in range(12):
        for name, data in originals.items():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_bytes(data)
        child = subprocess.Popen([sys.executable, "-m", "optax_lint", "--fix", "--unsafe-fixes", "-q", "-j", "1", "."],
                                 cwd=tree, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 4.0))
        child.send_signal(signal.SIGKILL)
        child.wait()
        done = 0
        for name in originals:
            data = (tree / name).read_bytes()
            assert data in (originals[name], fixed[name]), f"torn {name} on iteration {iteration} (seed {seed})"
            done += data == fixed[name] != originals[name]
        outcomes.add(done)
        for leftover in _no_temp_files(tree):  # a killed writer may leave its temp file, nothing else
            assert Path(leftover).name.startswith(".") and Path(leftover).name.endswith(".optax-lint.tmp")
            (tree / leftover).unlink()
        if time.monotonic() > deadline:
            break
    assert outcomes, "no iteration ran"


def test_two_concurrent_fix_runs_on_the_same_tree(tmp_path, project) -> None:
    originals, fixed = project
    tree = tmp_path / "tree"
    for attempt in range(1):
        for name, data in originals.items():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_bytes(data)
        args = [sys.executable, "-m", "optax_lint", "--fix", "--unsafe-fixes", "--output-format", "concise"]
        # as pre-commit does: the same files, in the same order or reversed, in two processes
        procs = [
            subprocess.Popen([*args, "-j", "1", "."], cwd=tree, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
            subprocess.Popen([*args, "-j", "2", *sorted(originals, reverse=True)], cwd=tree, env=ENV,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
        ]
        outputs = [p.communicate(timeout=300) for p in procs]
        for proc, (out, err) in zip(procs, outputs):
            assert "Traceback" not in err and "Traceback" not in out, err
            assert proc.returncode in (0, 1), (proc.returncode, out, err)
            for line in out.splitlines():  # the only extra finding a race may cause
                if " OPX003 " in line:
                    assert "not fixed: file changed on disk since it was read; not overwritten" in line
        for name in originals:
            assert (tree / name).read_bytes() == fixed[name], f"{name} differs after concurrent runs (attempt {attempt})"
        assert _no_temp_files(tree) == []


def test_api_fix_reports_and_never_raises_on_write_errors(tmp_path, monkeypatch) -> None:
    path = tmp_path / "train.py"
    path.write_text(BAD)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    results = api.lint_paths([str(path)], fix=True)
    assert path.read_text() == BAD
    messages = [(f.code, f.message) for f in results[0].findings]
    assert ("OPX003", "not fixed: No space left on device") in messages
    assert _leftovers(tmp_path) == []
