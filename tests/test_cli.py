"""The command line as a user meets it: exit codes, formats, fixes, config, noqa."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from optax_lint.cli import main

BAD = textwrap.dedent(
    """\
    import optax

    tx = optax.chain(
        optax.adamw(learning_rate=3e-4),
        optax.clip_by_global_norm(1.0),
    )
    """
)
GOOD = textwrap.dedent(
    """\
    import optax

    tx = optax.chain(
        optax.clip_by_global_norm(1.0),
        optax.adamw(learning_rate=3e-4),
    )
    """
)
UNSAFE_ONLY = "import optax\n\ntx = optax.chain(optax.adam(1e-3), optax.add_decayed_weights(1e-4))\n"


def run(args, cwd: Path, **kwargs):
    runner = CliRunner()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return runner.invoke(main, args, catch_exceptions=False, **kwargs)
    finally:
        os.chdir(old)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "good.py").write_text(GOOD)
    return tmp_path


def test_exit_codes_clean_and_findings(project: Path) -> None:
    assert run(["good.py"], project).exit_code == 0
    result = run(["bad.py"], project)
    assert result.exit_code == 1
    assert "bad.py:5:5: OPX101 error [*] clip_by_global_norm(1.0) runs after adamw(learning_rate=3e-4)" in result.output
    assert "Found 1 problem (1 fixable with --fix)." in result.output


def test_no_path_lints_current_directory(project: Path) -> None:
    result = run(["--output-format", "concise"], project)
    assert result.exit_code == 1
    assert result.output.splitlines()[0].startswith("bad.py:5:5: OPX101")


def test_all_checks_passed_message(project: Path) -> None:
    result = run(["good.py"], project)
    assert result.output.strip() == "All checks passed!"


def test_fix_writes_and_exit_code_follows_remaining(project: Path) -> None:
    result = run(["bad.py", "--fix"], project)
    assert result.exit_code == 0, result.output
    assert (project / "bad.py").read_text() == GOOD
    assert "Found 1 problem (1 fixed, 0 remaining)." in result.output


def test_unsafe_fix_needs_flag(project: Path) -> None:
    (project / "u.py").write_text(UNSAFE_ONLY)
    result = run(["u.py", "--fix"], project)
    assert result.exit_code == 1
    assert (project / "u.py").read_text() == UNSAFE_ONLY
    assert "Found 1 problem (1 hidden fix can be enabled with the `--unsafe-fixes` option)." in result.output
    result = run(["u.py", "--fix", "--unsafe-fixes"], project)
    assert result.exit_code == 0, result.output
    assert (project / "u.py").read_text() == "import optax\n\ntx = optax.chain(optax.adamw(1e-3, weight_decay=1e-4))\n"


def test_diff_writes_nothing_and_exits_one(project: Path) -> None:
    result = run(["bad.py", "--diff"], project)
    assert result.exit_code == 1
    assert (project / "bad.py").read_text() == BAD
    assert "--- a/bad.py\n+++ b/bad.py\n" in result.output
    assert "+    optax.clip_by_global_norm(1.0),\n     optax.adamw(learning_rate=3e-4),\n-    optax.clip_by_global_norm(1.0),\n" in result.output
    assert run(["good.py", "--diff"], project).exit_code == 0


def test_select_ignore_prefixes(project: Path) -> None:
    assert run(["bad.py", "--ignore", "OPX1"], project).exit_code == 0
    assert run(["bad.py", "--select", "OPX00,OPX9"], project).exit_code == 0
    assert run(["bad.py", "--select", "OPX10"], project).exit_code == 1
    result = run(["bad.py", "--select", "OPX999"], project)
    assert result.exit_code == 2
    assert "unknown rule code 'OPX999'" in result.output


def test_exit_zero(project: Path) -> None:
    assert run(["bad.py", "--exit-zero"], project).exit_code == 0


def test_concise_json_github_formats(project: Path) -> None:
    concise = run(["bad.py", "--output-format", "concise"], project).output.splitlines()
    assert concise[0] == (
        "bad.py:5:5: OPX101 error [*] clip_by_global_norm(1.0) runs after adamw(learning_rate=3e-4) in this chain: "
        "it clips the updates, not the gradients"
    )
    data = json.loads(run(["bad.py", "--output-format", "json"], project).output)
    assert [(d["code"], d["line"], d["column"], d["end_line"], d["end_column"]) for d in data] == [("OPX101", 5, 5, 5, 35)]
    assert data[0]["severity"] == "error"
    assert data[0]["fix"]["applicability"] == "safe"
    assert data[0]["fix"]["title"] == "Move clip_by_global_norm(1.0) to the front of the chain (the optimizer state changes structure: a checkpoint of the old opt_state will not restore into it)"
    assert {r["message"] for r in data[0]["related"]} == {"chain built here", "learning-rate step here"}
    github = run(["bad.py", "--output-format", "github"], project).output.splitlines()
    assert github[0].startswith("::error file=bad.py,line=5,col=5,endLine=5,endColumn=35,title=OPX101 (clip-after-optimizer)::")


def test_json_carries_fix_edits(project: Path) -> None:
    data = json.loads(run(["bad.py", "--output-format", "json"], project).output)
    edits = data[0]["fix"]["edits"]
    assert edits, "json output must include the fix's text edits"
    # Applying the edits to the text must give the fixed file.
    text = BAD.splitlines(keepends=True)
    edit = edits[0]
    start = sum(len(line) for line in text[: edit["line"] - 1]) + edit["column"] - 1
    end = sum(len(line) for line in text[: edit["end_line"] - 1]) + edit["end_column"] - 1
    joined = "".join(text)
    assert len(edits) == 1
    assert joined[:start] + edit["content"] + joined[end:] == GOOD


def test_statistics(project: Path) -> None:
    result = run(["bad.py", "--statistics"], project)
    assert result.exit_code == 1
    assert "OPX101" in result.output and "clip-after-optimizer" in result.output


def test_noqa_line_bare_and_file(project: Path) -> None:
    src = BAD.replace("optax.clip_by_global_norm(1.0),", "optax.clip_by_global_norm(1.0),  # noqa: OPX101")
    (project / "n1.py").write_text(src)
    assert run(["n1.py"], project).exit_code == 0
    (project / "n2.py").write_text(BAD.replace("optax.clip_by_global_norm(1.0),", "optax.clip_by_global_norm(1.0),  # noqa"))
    assert run(["n2.py"], project).exit_code == 0
    (project / "n3.py").write_text(BAD.replace("optax.clip_by_global_norm(1.0),", "optax.clip_by_global_norm(1.0),  # noqa: OPX102"))
    assert run(["n3.py"], project).exit_code == 1
    (project / "n4.py").write_text("# optax-lint: noqa\n" + BAD)
    assert run(["n4.py"], project).exit_code == 0
    (project / "n5.py").write_text("# optax-lint: noqa: OPX101\n" + BAD)
    assert run(["n5.py"], project).exit_code == 0
    (project / "n6.py").write_text("# optax-lint: noqa: OPX102\n" + BAD)
    assert run(["n6.py"], project).exit_code == 1


def test_unused_suppression_is_opt_in(project: Path) -> None:
    (project / "u.py").write_text(GOOD.replace("optax.adamw(learning_rate=3e-4),", "optax.adamw(learning_rate=3e-4),  # noqa: OPX101"))
    assert run(["u.py"], project).exit_code == 0
    result = run(["u.py", "--extend-select", "OPX002", "--output-format", "concise"], project)
    assert result.exit_code == 0  # OPX002 is info: shown, but below the default fail level
    assert result.output.splitlines()[0] == "u.py:5:39: OPX002 info Unused `noqa` directive for OPX101"
    assert run(["u.py", "--extend-select", "OPX002", "--fail-level", "info"], project).exit_code == 1



def test_schedule_not_observable_is_opt_in(project: Path) -> None:
    # Off by default (judged a convenience on real code), reported when selected.
    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "OPX611" / "bad_schedule_hidden_in_optimizer.py"
    (project / "s.py").write_text(fixture.read_text(encoding="utf-8"), encoding="utf-8")
    assert "OPX611" not in run(["s.py", "--output-format", "concise", "--fail-level", "info"], project).output
    result = run(["s.py", "--extend-select", "OPX611", "--output-format", "concise"], project)
    assert [line for line in result.output.splitlines() if "OPX611" in line] == [
        "s.py:38:27: OPX611 info adamw(...) follows warmup_cosine_decay_schedule(...), but nothing reads the "
        "learning rate back for logging"
    ]

def test_config_file_and_errors(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.optax-lint]\nignore = ["OPX101"]\n')
    assert run(["bad.py"], project).exit_code == 0
    (project / "pyproject.toml").write_text('[tool.optax-lint]\nselct = ["OPX101"]\n')
    result = run(["bad.py"], project)
    assert result.exit_code == 2
    assert "pyproject.toml: [tool.optax-lint] unknown key 'selct'" in result.output
    assert "Traceback" not in result.output
    (project / "pyproject.toml").write_text('[tool.optax-lint]\nselect = "OPX101"\n')
    result = run(["bad.py"], project)
    assert result.exit_code == 2 and "select" in result.output
    (project / "other.toml").write_text('extend-select = ["OPX002"]\nignore = ["OPX1"]\n')
    assert run(["bad.py", "--config", "other.toml"], project).exit_code == 0


def test_per_file_ignores(project: Path) -> None:
    (project / "optax-lint.toml").write_text('[per-file-ignores]\n"bad.py" = ["OPX101"]\n')
    assert run(["bad.py"], project).exit_code == 0


def test_config_fix_default(project: Path) -> None:
    (project / "optax-lint.toml").write_text("fix = true\n")
    assert run(["bad.py"], project).exit_code == 0
    assert (project / "bad.py").read_text() == GOOD


def test_syntax_error_and_missing_path_do_not_stop_others(project: Path) -> None:
    (project / "broken.py").write_text("import optax\ntx = optax.chain(optax.adam(1e-3)\n")
    result = run(["broken.py", "missing.py", "bad.py", "--output-format", "concise"], project)
    # A missing path is an OPX003 finding and exits 2 (ruff's E902); the other files are still linted.
    assert result.exit_code == 2
    lines = result.stdout.splitlines()
    assert any(line.startswith("bad.py:5:5: OPX101") for line in lines)
    assert any(line.startswith("broken.py:") and " OPX001 error SyntaxError" in line for line in lines)
    assert "missing.py:1:1: OPX003 error No such file or directory" in lines
    assert "missing.py" not in result.stderr


def test_rule_command(project: Path) -> None:
    result = run(["rule", "OPX101"], project)
    assert result.exit_code == 0
    assert result.output.startswith("# clip-after-optimizer (OPX101)\n")
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety"):
        assert section in result.output
    assert run(["rule", "clip-after-optimizer"], project).output == result.output
    listing = json.loads(run(["rule", "--all", "--output-format", "json"], project).output)
    from optax_lint.core.catalogue import load_catalogue

    assert [r["code"] for r in listing] == list(load_catalogue())
    bad = run(["rule", "OPX999"], project)
    assert bad.exit_code == 2 and "unknown rule" in bad.output


def test_usage_error_exit_two(project: Path) -> None:
    result = CliRunner().invoke(main, ["--no-such-option"])
    assert result.exit_code == 2
    assert "No such option" in result.output


def test_version(project: Path) -> None:
    from optax_lint import __version__

    result = run(["--version"], project)
    assert result.exit_code == 0 and __version__ in result.output


def test_real_process_exit_codes_and_no_jax_import(project: Path) -> None:
    code = (
        "import sys, runpy\n"
        "sys.argv = ['optax-lint', 'bad.py', '--output-format', 'concise']\n"
        "try:\n"
        "    runpy.run_module('optax_lint', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    heavy = sorted(m for m in ('jax', 'optax', 'flax', 'orbax', 'numpy') if m in sys.modules)\n"
        "    print('HEAVY', heavy, 'EXIT', exc.code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=60)
    assert "HEAVY [] EXIT 1" in proc.stdout, proc.stdout + proc.stderr
    proc = subprocess.run([sys.executable, "-m", "optax_lint", "--select", "OPX999", "bad.py"], cwd=project, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_parallel_jobs_same_result(project: Path) -> None:
    for i in range(20):
        (project / f"copy_{i:02d}.py").write_text(BAD)
    serial = run([".", "--output-format", "concise", "-j", "1"], project).output
    parallel = run([".", "--output-format", "concise", "-j", "2"], project).output
    assert serial == parallel
    assert serial.count("OPX101") == 21
