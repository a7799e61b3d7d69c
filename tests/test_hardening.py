"""Hostile and odd inputs, through the real command line, with exact outcomes.

Every case runs `optax-lint` (click's CliRunner, exceptions not caught: a traceback
fails the test) on a directory that holds the odd file *and* an ordinary bad file,
and checks the odd file's outcome (finding code, line, column, message), the exit
code, and that the ordinary file was still linted.

Per-file bounds (docs/security.md states them for users):
- size: files above 8 MB (`--max-file-size`) are reported as OPX003 before any byte
  is read, so a 10 MB generated file or a sparse 10 GB file costs nothing;
- nesting: anything beyond CPython's own limits (200 nested brackets, 100 indentation
  levels, the parser stack and AST depth, about 3,000 for a `1+1+...` chain on 3.11)
  is reported as OPX001 by CPython's linear-time parser; libcst, whose parse time grows
  superlinearly with depth, never sees it. Deep code within those limits is linted,
  or one rule gives up with OPX900 "too deeply nested to analyse" (never a crash);
- time and memory grow linearly with size for ordinary code (measured on the
  reference machine, idle: about 17 s and 0.75 GB peak per MB of optax code with a
  finding every 15 lines; 1.3 s and 0.16 GB per MB for files that mention no
  optax/jax/flax/orbax).
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from optax_lint.cli import main
from optax_lint.engine import lint as engine
from optax_lint.run import api, discovery

REPO = Path(__file__).resolve().parents[1]
BAD_CHAIN = "tx = optax.chain(optax.adamw(1e-3), optax.clip_by_global_norm(1.0))\n"
COMPANION = "zz_companion.py"
COMPANION_TEXT = "import optax\n\n" + BAD_CHAIN
COMPANION_LINE = f"{COMPANION}:3:37: OPX101"
_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>OPX\d{3}) (?:error|warning|info) (?P<message>.*)$")


def cli(args, cwd: Path):
    """Run the CLI in-process; return (exit code, findings as (path, line, col, code, message), output)."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, ["--output-format", "concise", "-j", "1", *args], catch_exceptions=False)
    finally:
        os.chdir(old)
    out = result.output
    assert "Traceback" not in out, out
    findings = []
    for line in out.splitlines():
        m = _LINE.match(line)
        if m:
            findings.append((m["path"], int(m["line"]), int(m["col"]), m["code"], m["message"]))
    return result.exit_code, findings, out


def only(findings, path):
    return [f[1:] for f in findings if f[0] == path]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / COMPANION).write_text(COMPANION_TEXT)
    return tmp_path


def companion_linted(findings) -> bool:
    return (COMPANION, 3, 37, "OPX101") in [f[:4] for f in findings]


# --- the odd files -----------------------------------------------------------------


def test_empty_file(tree: Path) -> None:
    (tree / "empty.py").write_bytes(b"")
    code, findings, _ = cli(["empty.py"], tree)
    assert (code, findings) == (0, [])
    code, findings, _ = cli(["."], tree)
    assert code == 1 and only(findings, "empty.py") == [] and companion_linted(findings)


def test_only_comments(tree: Path) -> None:
    (tree / "comments.py").write_text("# optax.chain(optax.adamw(1e-3), optax.clip_by_global_norm(1.0))\n# jax\n")
    code, findings, _ = cli(["comments.py"], tree)
    assert (code, findings) == (0, [])


def test_bom_positions_and_fix_keep_the_bom(tree: Path) -> None:
    path = tree / "bom.py"
    path.write_bytes(b"\xef\xbb\xbfimport optax\n" + BAD_CHAIN.encode())
    code, findings, _ = cli(["."], tree)
    assert only(findings, "bom.py") == [(2, 37, "OPX101", only(findings, "bom.py")[0][3])]
    assert code == 1 and companion_linted(findings)
    code, findings, _ = cli(["bom.py", "--fix"], tree)
    assert code == 0, findings
    assert path.read_bytes() == (
        b"\xef\xbb\xbfimport optax\ntx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))\n"
    )


def test_latin1_cookie(tree: Path) -> None:
    path = tree / "latin.py"
    data = b"# -*- coding: latin-1 -*-\nimport optax\nname = 'caf\xe9'\n" + BAD_CHAIN.encode()
    path.write_bytes(data)
    code, findings, _ = cli(["."], tree)
    assert [f[:3] for f in only(findings, "latin.py")] == [(4, 37, "OPX101")]
    assert code == 1 and companion_linted(findings)
    assert cli(["latin.py", "--fix"], tree)[0] == 0
    assert path.read_bytes() == data.replace(
        b"optax.adamw(1e-3), optax.clip_by_global_norm(1.0)", b"optax.clip_by_global_norm(1.0), optax.adamw(1e-3)"
    )


def test_invalid_utf8_without_cookie(tree: Path) -> None:
    (tree / "bad_utf8.py").write_bytes(b"import optax\nname = '\xff'\n")
    code, findings, _ = cli(["."], tree)
    assert only(findings, "bad_utf8.py") == [
        (2, 9, "OPX001", "SyntaxError: invalid UTF-8 (byte 0xff) at line 2, column 9; declare the encoding with a coding cookie")
    ]
    assert code == 1 and companion_linted(findings)


def test_binary_file_with_py_name(tree: Path) -> None:
    (tree / "model.py").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 8)
    code, findings, _ = cli(["."], tree)
    assert only(findings, "model.py") == [(1, 1, "OPX001", "SyntaxError: binary file (NUL byte at offset 7)")]
    assert code == 1 and companion_linted(findings)


def test_ten_megabyte_generated_file_is_too_large_and_fast(tree: Path) -> None:
    line = "x_{:07d} = optax.adam(1e-3)\n"  # 29 bytes
    text = "import optax\n" + "".join(line.format(i) for i in range((10 * 1024 * 1024 - 13) // 29))
    text += "#" * (10 * 1024 * 1024 - len(text) - 1) + "\n"
    (tree / "generated.py").write_text(text)
    assert (tree / "generated.py").stat().st_size == 10 * 1024 * 1024
    start = time.monotonic()
    code, findings, _ = cli(["."], tree)
    elapsed = time.monotonic() - start
    assert only(findings, "generated.py") == [(1, 1, "OPX003", "file is 10 MB, above the 8 MB limit (--max-file-size)")]
    assert code == 1 and companion_linted(findings)
    assert elapsed < 10, elapsed  # the size is judged from stat; nothing is parsed


def test_sparse_ten_gigabyte_file_is_never_read(tree: Path) -> None:
    with open(tree / "huge.py", "wb") as f:
        f.truncate(10 * 1024**3)
    start = time.monotonic()
    code, findings, _ = cli(["."], tree)
    assert only(findings, "huge.py") == [(1, 1, "OPX003", "file is 10240 MB, above the 8 MB limit (--max-file-size)")]
    assert code == 1 and companion_linted(findings)
    assert time.monotonic() - start < 10


def test_max_file_size_option(tree: Path) -> None:
    (tree / "mid.py").write_text("import optax\n" + "x = 1\n" * 2000)  # 12 KB
    code, findings, _ = cli(["mid.py", "--max-file-size", "8KB"], tree)
    assert (code, findings) == (1, [("mid.py", 1, 1, "OPX003", "file is 11.7 KB, above the 8 KB limit (--max-file-size)")])
    assert cli(["mid.py", "--max-file-size", "1MB"], tree)[:2] == (0, [])
    code, _, out = cli(["mid.py", "--max-file-size", "lots"], tree)
    assert code == 2 and "--max-file-size: expected a positive size" in out


@pytest.mark.parametrize(
    "name, expr, expected",
    [
        # Beyond CPython's limits: CPython's verdict, libcst never runs.
        ("parens", "(" * 1000 + "1" + ")" * 1000, (2, 205, "OPX001", "SyntaxError: too many nested parentheses")),
        ("lists", "[" * 1000 + "1" + "]" * 1000, (2, 205, "OPX001", "SyntaxError: too many nested parentheses")),
        ("calls", "optax.chain(" * 1000 + "optax.sgd(0.1)" + ")" * 1000, (2, 2416, "OPX001", "SyntaxError: too many nested parentheses")),
        ("plus", "1" + "+1" * 200_000, (1, 1, "OPX001", "SyntaxError: the file is too deeply nested to parse")),
        # Within CPython's limits: linted (the ordinary chain below is still found).
        ("unary", "-" * 1000 + "1", None),
        ("attributes", "a" + ".b" * 1000, None),
        ("subscripts", "a" + "[0]" * 1000, None),
        ("plus_1000", "1" + "+1" * 1000, None),
    ],
)
def test_nesting_1000_deep(tree: Path, name: str, expr: str, expected) -> None:
    (tree / f"deep_{name}.py").write_text("import optax\nx = " + expr + "\n" + BAD_CHAIN)
    start = time.monotonic()
    code, findings, _ = cli(["."], tree)
    got = only(findings, f"deep_{name}.py")
    if expected is None:
        assert [g[:3] for g in got] == [(3, 37, "OPX101")], got
    else:
        assert len(got) == 1 and got[0][:3] == expected[:3] and got[0][3].startswith(expected[3]), got
    assert code == 1 and companion_linted(findings)
    assert time.monotonic() - start < 60


def test_nested_scopes_too_deep_to_analyse_is_an_internal_error_not_a_crash(tree: Path) -> None:
    # 500 nested lambdas: CPython accepts them; the walker gives up cleanly.
    (tree / "lambdas.py").write_text("import optax\nf = " + "lambda: " * 500 + "1\n" + BAD_CHAIN)
    code, findings, _ = cli(["."], tree)
    assert only(findings, "lambdas.py") == [(1, 1, "OPX900", "gave up: the file is too deeply nested to analyse")]
    assert code == 2 and companion_linted(findings)


def test_very_long_lines(tree: Path) -> None:
    flat = "import optax\nweights = [" + "0.5, " * 25_000 + "]\n" + BAD_CHAIN  # a 125 KB line of code
    (tree / "long_line.py").write_text(flat)
    (tree / "long_string.py").write_text("import optax\nblob = '" + "A" * 1_000_000 + "'\n" + BAD_CHAIN)  # 1 MB
    start = time.monotonic()
    code, findings, _ = cli(["."], tree)
    assert [f[:3] for f in only(findings, "long_line.py")] == [(3, 37, "OPX101")]
    assert [f[:3] for f in only(findings, "long_string.py")] == [(3, 37, "OPX101")]
    assert code == 1 and companion_linted(findings)
    assert time.monotonic() - start < 120


def test_crlf_positions_and_fix_keep_crlf(tree: Path) -> None:
    path = tree / "crlf.py"
    path.write_bytes(b"import optax\r\n\r\n" + BAD_CHAIN.replace("\n", "\r\n").encode())
    code, findings, _ = cli(["."], tree)
    assert [f[:3] for f in only(findings, "crlf.py")] == [(3, 37, "OPX101")]
    assert code == 1 and companion_linted(findings)
    assert cli(["crlf.py", "--fix"], tree)[0] == 0
    assert path.read_bytes() == (
        b"import optax\r\n\r\ntx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))\r\n"
    )


def test_mixed_tabs_and_spaces(tree: Path) -> None:
    # Consistent per block: valid Python, linted as usual.
    (tree / "tabs_ok.py").write_text("import optax\n\nif True:\n\t" + BAD_CHAIN + "if False:\n    y = 2\n")
    # Ambiguous (a tab and eight spaces at the same level): TabError, at the right line.
    (tree / "tabs_bad.py").write_text("import optax\n\nif True:\n\tx = 1\n        y = 2\n")
    code, findings, _ = cli(["."], tree)
    assert [f[:3] for f in only(findings, "tabs_ok.py")] == [(4, 38, "OPX101")]
    assert only(findings, "tabs_bad.py") == [(5, 1, "OPX001", "SyntaxError: inconsistent use of tabs and spaces in indentation")]
    assert code == 1 and companion_linted(findings)


NEW_SYNTAX = '''\
import optax

type Schedule = optax.Schedule
type Pair[T] = tuple[T, T]


def make_optimizer[T](learning_rate: float) -> optax.GradientTransformation:
    return optax.chain(optax.adamw(learning_rate), optax.clip_by_global_norm(1.0))


class Trainer[T: (int, float), *Ts, **P]:
    def step(self, name: str):
        try:
            pass
        except* ValueError:
            pass
        return f"{"step" + 'name'}", t"step {name}"


def with_default[T = float](x: T) -> T:
    try:
        return x
    except ValueError, TypeError:
        return x
'''


def test_python_312_to_314_syntax_is_linted(tree: Path) -> None:
    # PEP 695 aliases and generics, PEP 696 defaults, except*, PEP 701 f-strings,
    # PEP 750 t-strings, PEP 758 unparenthesized except: libcst 1.9 parses them all.
    if sys.version_info < (3, 14):
        with pytest.raises(SyntaxError):  # the running CPython cannot: libcst decides
            compile(NEW_SYNTAX, "new.py", "exec")
    (tree / "new_syntax.py").write_text(NEW_SYNTAX)
    code, findings, _ = cli(["."], tree)
    assert [f[:3] for f in only(findings, "new_syntax.py")] == [(8, 52, "OPX101")]
    assert code == 1 and companion_linted(findings)
    assert cli(["new_syntax.py", "--fix"], tree)[0] == 0
    assert "optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(learning_rate))" in (tree / "new_syntax.py").read_text()
    # A file that mentions no optax takes the syntax-check-only path: the same fallback.
    (tree / "plain_new.py").write_text(NEW_SYNTAX.replace("optax.", "").replace("import optax", "import math"))
    assert "optax" not in (tree / "plain_new.py").read_text()
    assert cli(["plain_new.py"], tree)[:2] == (0, [])


def test_new_syntax_with_a_real_error_reports_the_real_error(tree: Path) -> None:
    # CPython 3.11 stops at the (valid 3.12) alias; libcst parses past it to the real error.
    (tree / "broken_new.py").write_text("import optax\n\ntype Params = dict[str, float]\nlr = 1e-3 1e-4\n")
    code, findings, _ = cli(["broken_new.py"], tree)
    assert code == 1 and [f[:4] for f in findings] == [("broken_new.py", 4, 15, "OPX001")]
    assert findings[0][4].startswith("SyntaxError: parser error: error at 4:14: expected one of")
    # An error CPython pins down exactly keeps CPython's message and position.
    (tree / "broken_old.py").write_text("import optax\n\ntx = optax.chain(\n    optax.adam(1e-3),\n\ny = 2\n")
    assert cli(["broken_old.py"], tree)[1] == [("broken_old.py", 3, 17, "OPX001", "SyntaxError: '(' was never closed")]


def test_file_vanishing_between_discovery_and_read(tree: Path, monkeypatch) -> None:
    (tree / "vanishing.py").write_text(COMPANION_TEXT)
    real = discovery.discover

    def discover_then_delete(*args, **kwargs):
        found = real(*args, **kwargs)
        (tree / "vanishing.py").unlink()
        return found

    monkeypatch.setattr(discovery, "discover", discover_then_delete)
    code, findings, _ = cli(["."], tree)
    assert only(findings, "vanishing.py") == [(1, 1, "OPX003", "no such file")]
    assert code == 1 and companion_linted(findings)


def test_permission_denied(tree: Path, monkeypatch) -> None:
    path = tree / "secret.py"
    path.write_text(COMPANION_TEXT)
    if os.geteuid() != 0:
        path.chmod(0)
    else:  # root reads through chmod 000: fake the EACCES at the open
        real_open = os.open

        def denied(p, flags, *args, **kwargs):
            if os.path.basename(os.fspath(p)) == "secret.py":
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(p))
            return real_open(p, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", denied)
    try:
        code, findings, _ = cli(["."], tree)
    finally:
        path.chmod(0o644)
    assert only(findings, "secret.py") == [(1, 1, "OPX003", "permission denied")]
    assert code == 1 and companion_linted(findings)


def test_symlink_loops(tree: Path) -> None:
    (tree / "pkg").mkdir()
    (tree / "pkg" / "train.py").write_text(COMPANION_TEXT)
    (tree / "pkg" / "up").symlink_to("..")  # a directory loop
    (tree / "self.py").symlink_to("self.py")  # a link to itself
    code, findings, _ = cli(["."], tree)
    assert only(findings, "pkg/up") == [(1, 1, "OPX003", "symlink loop")]
    assert only(findings, "self.py") == [(1, 1, "OPX003", "symlink loop")]
    assert [f[:3] for f in only(findings, "pkg/train.py")] == [(3, 37, "OPX101")]
    assert code == 1 and companion_linted(findings)


def test_directory_named_like_a_python_file(tree: Path) -> None:
    (tree / "x.py").mkdir()
    (tree / "x.py" / "inner.py").write_text(COMPANION_TEXT)
    code, findings, _ = cli(["."], tree)
    assert [f[:4] for f in findings if f[0].startswith("x.py")] == [("x.py/inner.py", 3, 37, "OPX101")]
    assert code == 1 and companion_linted(findings)
    code, findings, _ = cli(["x.py"], tree)  # named explicitly: walked, not read
    assert (code, [f[:4] for f in findings]) == (1, [("x.py/inner.py", 3, 37, "OPX101")])


def test_paths_with_spaces_and_non_ascii(tree: Path) -> None:
    folder = tree / "my experiments" / "übung 日本"
    folder.mkdir(parents=True)
    (folder / "tränïng run.py").write_text(COMPANION_TEXT)
    code, findings, _ = cli(["."], tree)
    shown = "my experiments/übung 日本/tränïng run.py"
    assert [f[:3] for f in only(findings, shown)] == [(3, 37, "OPX101")]
    assert code == 1 and companion_linted(findings)
    assert cli([shown, "--fix"], tree)[0] == 0
    assert "chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))" in (folder / "tränïng run.py").read_text()


def test_fifo_named_like_a_python_file_does_not_block(tree: Path) -> None:
    os.mkfifo(tree / "pipe.py")
    code, findings, _ = cli(["."], tree)  # a walk takes regular files only
    assert only(findings, "pipe.py") == [] and code == 1 and companion_linted(findings)
    code, findings, _ = cli(["pipe.py", COMPANION], tree)  # named: reported, not opened blocking
    assert only(findings, "pipe.py") == [(1, 1, "OPX003", "not a regular file")]
    assert code == 1 and companion_linted(findings)


def test_gitignore_symlinked_to_dev_zero_or_a_fifo(tree: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    (tree / ".gitignore").symlink_to("/dev/zero")  # would read forever
    (tree / "sub").mkdir()
    os.mkfifo(tree / "sub" / ".gitignore")  # would block forever
    (tree / "sub" / "train.py").write_text(COMPANION_TEXT)
    code, findings, _ = cli(["."], tree)
    assert [f[:4] for f in findings] == [("sub/train.py", 3, 37, "OPX101"), (COMPANION, 3, 37, "OPX101")]
    assert code == 1


# --- per-file time and memory -----------------------------------------------------------

_GEN_BLOCK = '''
def make_optimizer_{i}(learning_rate={lr}, steps={steps}):
    schedule_{i} = optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=learning_rate, warmup_steps={warm}, decay_steps=steps
    )
    return optax.chain(
        optax.adamw(learning_rate=schedule_{i}, weight_decay=1e-4),
        optax.clip_by_global_norm({clip}),
    )


def train_step_{i}(params, opt_state, batch, tx):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((p["w"] * batch) ** 2))(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, loss + {i}
'''


def generated_training_module(nbytes: int) -> tuple[str, int]:
    """Distinct optimizer factories and train steps (a finding in each), ~nbytes long."""
    parts = ["import jax\nimport jax.numpy as jnp\nimport optax\n"]
    size, i = len(parts[0]), 0
    while size < nbytes:
        block = _GEN_BLOCK.format(i=i, lr=1e-3 * (1 + i % 7), steps=1000 + i, warm=10 + i % 50, clip=1.0 + i % 3)
        parts.append(block)
        size += len(block)
        i += 1
    return "".join(parts), i


_MEASURE = textwrap.dedent(
    """
    import resource, sys, time
    from optax_lint.cli import main
    start = time.monotonic()
    try:
        main(["--statistics", "-j", "1", sys.argv[1]])
    except SystemExit as exc:
        code = exc.code
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KB on Linux; but kept across exec:
    try:  # VmHWM is this process's own peak
        peak = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
    except OSError:
        pass
    print("RESULT", code, time.monotonic() - start, peak, file=sys.stderr)
    """
)


def test_time_and_memory_stay_bounded_on_a_large_training_module(tmp_path: Path) -> None:
    text, blocks = generated_training_module(64 * 1024)  # ~1,900 lines: larger than any real train.py
    (tmp_path / "big_train.py").write_text(text)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, "big_train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    _, code, seconds, max_rss_kb = proc.stderr.strip().splitlines()[-1].split()
    assert int(code) == 1
    assert re.search(rf"^{blocks}\s+OPX101\b", proc.stdout, re.M), proc.stdout
    assert int(max_rss_kb) < 400 * 1024, f"peak RSS {int(max_rss_kb) // 1024} MB"
    assert float(seconds) < 120, f"{float(seconds):.1f} s"


# --- internal errors ---------------------------------------------------------------------


def test_internal_error_in_one_rule_is_reported_and_the_run_continues(tree: Path, monkeypatch) -> None:
    from optax_lint.rules import registry

    def broken(self, ctx):
        raise KeyError("injected failure")

    monkeypatch.setattr(registry.rule_class("OPX102"), "check", broken)
    (tree / "other.py").write_text("import optax\n\n" + BAD_CHAIN)
    code, findings, out = cli(["."], tree)
    assert code == 2
    for name in ("other.py", COMPANION):
        got = only(findings, name)
        assert (1, 1, "OPX900",
                "internal error in OPX102 (decay-after-lr-scaling): KeyError: 'injected failure'. "
                "Please report it with the output of --show-traceback.") in got
        assert (3, 37, "OPX101") in [g[:3] for g in got]  # the other rules still ran
    assert "Traceback" not in out

    result = CliRunner().invoke(main, ["--show-traceback", "-j", "1", str(tree / "other.py")], catch_exceptions=False)
    assert result.exit_code == 2
    assert "OPX900 error internal error in OPX102 (decay-after-lr-scaling): KeyError: 'injected failure'." in result.output
    assert "Traceback (most recent call last):" in result.output
    assert 'raise KeyError("injected failure")' in result.output


def test_internal_error_with_process_pool(tree: Path, monkeypatch) -> None:
    from optax_lint.rules import registry

    def broken(self, ctx):
        raise RuntimeError("boom")

    monkeypatch.setattr(registry.rule_class("OPX101"), "check", broken)  # forked workers inherit it
    for i in range(20):
        (tree / f"m{i:02d}.py").write_text("import optax\n\n" + BAD_CHAIN)
    old = os.getcwd()
    os.chdir(tree)
    try:
        result = CliRunner().invoke(main, ["--output-format", "json", "-j", "2", "."], catch_exceptions=False)
    finally:
        os.chdir(old)
    assert result.exit_code == 2
    data = json.loads(result.output)
    errors = sorted(d["path"] for d in data if d["code"] == "OPX900")
    assert errors == sorted([f"m{i:02d}.py" for i in range(20)] + [COMPANION])
    assert all("internal error in OPX101" in d["message"] for d in data if d["code"] == "OPX900")


def test_internal_error_in_the_shared_extraction_is_reported(tree: Path, monkeypatch) -> None:
    from optax_lint.facts import module as facts

    def broken(module):
        raise ValueError("walker failure")

    monkeypatch.setattr(facts, "collect", broken)
    (tree / "plain.py").write_text("x = 1\n")  # no optax: only syntax-checked, unaffected
    code, findings, _ = cli(["."], tree)
    assert code == 2
    assert only(findings, COMPANION) == [
        (1, 1, "OPX900", "internal error while extracting facts: ValueError: walker failure. "
         "Please report it with the output of --show-traceback.")
    ]
    assert only(findings, "plain.py") == []


def test_api_returns_results_not_exceptions(tree: Path) -> None:
    (tree / "bad.py").write_bytes(b"\x00\x01")
    results = api.lint_paths([str(tree / "bad.py"), str(tree / "missing.py"), str(tree / COMPANION)])
    assert [(r.findings[0].code if r.findings else None) for r in results] == ["OPX001", "OPX003", "OPX101"]


def test_quick_path_and_full_path_agree_on_syntax_errors() -> None:
    # Files mentioning no optax take the ast-only path; both report CPython's position.
    for text in ("x = (1,\ny = 2\n", "if x:\n\ta = 1\n        b = 2\n", "x = 'abc\n"):
        quick = engine.lint_text(text, "a.py", {"OPX001"}).findings
        full = engine.lint_text("import optax\n" + text, "a.py", {"OPX001"}).findings
        assert len(quick) == len(full) == 1
        def message(f):
            return re.sub(r" \(detected at line \d+\)", "", f.message)

        assert (quick[0].span.line + 1, quick[0].span.column, message(quick[0])) == (
            full[0].span.line, full[0].span.column, message(full[0])
        )
