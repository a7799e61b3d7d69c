"""The per-file time budget (run/budget.py): a file whose lint does not end becomes an
OPX900 finding on that file, the other files are still linted, the exit code is 2,
and a write in progress is never cut short."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from optax_lint.core.config import load_settings
from optax_lint.run import api, budget
from optax_lint.rules import registry

REPO = Path(__file__).resolve().parents[1]
HANGS = "import optax\n\ntx = optax.adam(1e-3)  # hangs\n"
BAD_CHAIN = "import optax\n\ntx = optax.chain(optax.adamw(1e-3), optax.clip_by_global_norm(1.0))\n"

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="SIGALRM's interval timer is POSIX-only")


def _endless(rule_cls):
    class Endless(rule_cls):
        """OPX101, whose analysis never ends on a file marked `# hangs`, as a bug would."""

        def check(self, ctx):
            if "# hangs" in ctx.facts.text:
                # Python checks for signals between bytecodes. The loop ends after 20 s, so
                # that a broken budget fails the test instead of hanging the suite.
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    pass
            super().check(ctx)

    return Endless


@pytest.fixture
def endless_rule(monkeypatch):
    real = registry.rule_class
    monkeypatch.setattr(registry, "rule_class", lambda code: _endless(real(code)) if code == "OPX101" else real(code))


def _lint(tmp_path, files: dict, **options):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    settings = load_settings(start=tmp_path)
    outcome = api.run([tmp_path / n for n in sorted(files)], settings, api.RunOptions(jobs=1, **options))
    return outcome, {Path(r.path).name: [(f.code, f.span.line, f.span.column, f.message) for f in r.findings]
                     for r in outcome.results}


def test_a_file_that_does_not_end_is_reported_and_the_others_are_linted(tmp_path, endless_rule):
    start = time.monotonic()
    outcome, found = _lint(tmp_path, {"a_hangs.py": HANGS, "b_bad.py": BAD_CHAIN}, file_timeout=0.5)
    assert time.monotonic() - start < 15
    assert found["a_hangs.py"] == [("OPX900", 1, 1, budget.timed_out_message(0.5))]
    assert found["a_hangs.py"][0][3].startswith("gave up after 0.5 s (--file-timeout)")
    assert [f[0] for f in found["b_bad.py"]] == ["OPX101"]  # the companion's own rule ran
    assert outcome.internal_errors == 1
    # The timer is off and the handler restored once the run is over.
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.default_int_handler, None)


def test_the_budget_grows_with_the_file():
    assert budget.file_seconds(120, 1000) == 120
    assert budget.file_seconds(120, 3 * 1024 * 1024) == 360
    assert budget.file_seconds(0, 10**9) == 0


def test_no_budget_when_the_timeout_is_zero(tmp_path, monkeypatch):
    armed = []
    real = budget.file_budget

    def spy(seconds):
        armed.append(seconds)
        return real(seconds)

    monkeypatch.setattr(api, "file_budget", spy)
    _lint(tmp_path, {"b_bad.py": BAD_CHAIN}, file_timeout=0)
    assert armed == [0]
    with budget.file_budget(0) as on:
        assert on is False


def test_not_armed_outside_the_main_thread():
    seen = []

    def body():
        with budget.file_budget(5) as on:
            seen.append(on)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [False]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_write_is_never_cut_short(tmp_path, monkeypatch):
    """The alarm rings during the atomic write of the fixed file: the write completes,
    the fix is reported, nothing is given up."""
    real_write = api.write_source

    def slow_write(source, text):
        time.sleep(0.8)  # the 0.3 s budget runs out here
        real_write(source, text)

    monkeypatch.setattr(api, "write_source", slow_write)
    outcome, found = _lint(tmp_path, {"train.py": BAD_CHAIN}, fix=True, file_timeout=0.3)
    assert outcome.internal_errors == 0
    assert found["train.py"] == []
    assert outcome.fixed == 1
    text = (tmp_path / "train.py").read_text()
    assert "optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))" in text


def test_a_fix_run_that_does_not_end_writes_nothing(tmp_path, endless_rule):
    before = HANGS + "tx2 = optax.chain(optax.adamw(1e-3), optax.clip_by_global_norm(1.0))\n"
    outcome, found = _lint(tmp_path, {"train.py": before}, fix=True, file_timeout=0.5)
    assert [f[0] for f in found["train.py"]] == ["OPX900"]
    assert (tmp_path / "train.py").read_text() == before


def test_through_the_command_line_in_worker_processes(tmp_path):
    """The real CLI in a subprocess, with the pool (-j 2, eight files or more): the
    hanging file gives OPX900 and exit 2, the others their findings."""
    for i in range(8):
        (tmp_path / f"f{i}.py").write_text(BAD_CHAIN + "# " + "x" * 40000 + "\n")  # enough bytes for the pool
    (tmp_path / "a_hangs.py").write_text(HANGS)
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_file_budget import _endless
        from optax_lint.rules import registry
        real = registry.rule_class
        registry.rule_class = lambda code: _endless(real(code)) if code == "OPX101" else real(code)
        from optax_lint.cli import main
        sys.argv = ["optax-lint", "--no-cache", "--output-format", "concise", "-j", "2", "--file-timeout", "1", {str(tmp_path)!r}]
        main()
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith(f"{tmp_path / 'a_hangs.py'}:1:1: OPX900 error gave up after 1 s") for line in lines), proc.stdout
    assert sum(": OPX101 " in line for line in lines) == 8, proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_the_language_server_reports_a_document_that_does_not_end(endless_rule, tmp_path):
    """An editor must not freeze on a bug of ours: the document gets one OPX900."""
    pytest.importorskip("pygls")
    from optax_lint.lsp import DocumentLinter

    linter = DocumentLinter()
    linter.file_timeout = 0.5
    uri = (tmp_path / "train.py").as_uri()
    findings, fixed = linter.lint(uri, HANGS)
    assert [(f.code, f.message) for f in findings] == [("OPX900", budget.timed_out_message(0.5))]
    assert fixed is None
    findings, _ = linter.lint(uri, BAD_CHAIN)
    assert [f.code for f in findings] == ["OPX101"]


def test_libcst_node_classes_are_put_back_after_an_interrupted_parse():
    """The alarm can land inside parse_module's `finally`, between its restores: the
    node classes must still end up as libcst defines them."""
    import libcst as cst
    from libcst._nodes.base import CSTNode

    from optax_lint.syntax import fast_nodes, parsing

    parsing.parse_module("x = 1\n")  # records libcst's own check
    own_check = CSTNode.__post_init__
    own_init = cst.Name.__init__
    counted = fast_nodes._parsed_chars
    inits = fast_nodes.for_parse(fast_nodes.FAST_AFTER_CHARS)  # the inits a long run installs
    CSTNode.__post_init__ = parsing._built_by_the_parser  # as if the restore never ran
    inits.install()
    try:
        assert cst.Name.__init__ is not own_init
        parsing.restore_node_classes()
        assert CSTNode.__post_init__ is own_check
        with pytest.raises(cst.CSTValidationError):
            cst.Name("")  # libcst's check runs again: an empty name is refused
    finally:
        CSTNode.__post_init__ = own_check
        inits.remove()
        fast_nodes._parsed_chars = counted
