"""What a new user meets around the findings (issue 11, CLI half): severity in the text
output, --fail-level, exit codes for missing paths and empty directories, --diff on a
file that does not parse, mistyped commands, -V, and help for every option.

Everything runs through the real entry point: click's CliRunner on `optax_lint.cli.main`
or a real `python -m optax_lint` process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from optax_lint import __version__
from optax_lint.cli import main
from optax_lint.core.catalogue import load_catalogue

ROOT = Path(__file__).resolve().parent.parent
ERROR_FILE = textwrap.dedent(
    """\
    import optax

    tx = optax.chain(
        optax.adamw(learning_rate=3e-4),
        optax.clip_by_global_norm(1.0),
    )
    """
)
# OPX103 double-weight-decay (warning) only.
WARNING_FILE = "import optax\n\ntx = optax.chain(optax.add_decayed_weights(1e-4), optax.adamw(1e-3))\n"
# OPX505 legacy-checkpoint-api (info) only.
INFO_FILE = textwrap.dedent(
    """\
    from flax.training import checkpoints

    def save(state, workdir, step):
        checkpoints.save_checkpoint(workdir, state, step)
    """
)
BROKEN_FILE = "import optax\ntx = optax.chain(optax.adam(1e-3)\n"


def run(args, cwd: Path):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args, catch_exceptions=False)
    finally:
        os.chdir(old)


def process(args, cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    env.setdefault("OPTAX_LINT_CACHE_DIR", str(cwd / ".cache"))  # --verify's compilation cache
    return subprocess.run(
        [sys.executable, "-m", "optax_lint", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "err.py").write_text(ERROR_FILE)
    (tmp_path / "warn.py").write_text(WARNING_FILE)
    (tmp_path / "info.py").write_text(INFO_FILE)
    return tmp_path


def test_the_sample_files_have_the_severities_the_tests_rely_on() -> None:
    catalogue = load_catalogue()
    assert catalogue["OPX101"].severity.value == "error"
    assert catalogue["OPX103"].severity.value == "warning"
    assert catalogue["OPX505"].severity.value == "info"


# --------------------------------------------------------------------------- severity


@pytest.mark.parametrize("fmt", ["concise", "full"])
def test_text_output_names_each_findings_severity(project: Path, fmt: str) -> None:
    result = run(["err.py", "warn.py", "info.py", "--output-format", fmt], project)
    headers = result.stdout.splitlines()
    assert any(line.startswith("err.py:5:5: OPX101 error [*] clip_by_global_norm(1.0)") for line in headers), result.stdout
    assert any(line.startswith("warn.py:3:18: OPX103 warning add_decayed_weights(1e-4)") for line in headers), result.stdout
    assert any(line.startswith("info.py:4:5: OPX505 info ") for line in headers), result.stdout


def test_severity_word_is_coloured_like_the_code(project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(PYTHONPATH=str(ROOT), FORCE_COLOR="1")
    proc = subprocess.run(
        [sys.executable, "-m", "optax_lint", "warn.py", "--output-format", "concise"],
        cwd=project, capture_output=True, text=True, timeout=120, env=env,
    )
    assert "\x1b[33mOPX103\x1b[0m \x1b[33mwarning\x1b[0m" in proc.stdout


# --------------------------------------------------------------------------- --fail-level


def test_info_findings_do_not_fail_by_default(project: Path) -> None:
    result = run(["info.py"], project)
    assert result.exit_code == 0, result.output
    assert "OPX505 info" in result.stdout
    assert "1 info finding does not fail the run (--fail-level warning)." in result.stdout


def test_warnings_and_errors_fail_by_default(project: Path) -> None:
    assert run(["warn.py"], project).exit_code == 1
    assert run(["err.py"], project).exit_code == 1
    mixed = run(["warn.py", "info.py"], project)
    assert mixed.exit_code == 1
    assert "Found 2 problems." in mixed.stdout


@pytest.mark.parametrize(
    "level, expected",
    [
        ("info", {"err.py": 1, "warn.py": 1, "info.py": 1}),
        ("warning", {"err.py": 1, "warn.py": 1, "info.py": 0}),
        ("error", {"err.py": 1, "warn.py": 0, "info.py": 0}),
    ],
)
def test_fail_level_flag(project: Path, level: str, expected: dict) -> None:
    for name, code in expected.items():
        assert run([name, "--fail-level", level], project).exit_code == code, (name, level)


def test_fail_level_in_config_and_cli_override(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.optax-lint]\nfail-level = "info"\n')
    assert run(["info.py"], project).exit_code == 1
    assert run(["info.py", "--fail-level", "warning"], project).exit_code == 0
    (project / "pyproject.toml").write_text('[tool.optax-lint]\nfail-level = "error"\n')
    result = run(["warn.py"], project)
    assert result.exit_code == 0
    assert "1 warning finding does not fail the run (--fail-level error)." in result.stdout


def test_fail_level_bad_values_are_usage_errors(project: Path) -> None:
    (project / "optax-lint.toml").write_text('fail-level = "warnings"\n')
    result = run(["info.py"], project)
    assert result.exit_code == 2
    assert "fail-level" in result.output and "expected one of: error, warning, info" in result.output
    (project / "optax-lint.toml").unlink()
    result = run(["info.py", "--fail-level", "fatal"], project)
    assert result.exit_code == 2 and "'fatal' is not one of" in result.output


def test_exit_zero_still_wins_and_json_is_unchanged(project: Path) -> None:
    assert run(["err.py", "--exit-zero"], project).exit_code == 0
    result = run(["info.py", "--output-format", "json"], project)
    assert result.exit_code == 0
    assert result.stdout.lstrip().startswith("[")  # no summary text mixed into JSON


def test_fix_exit_code_counts_only_failing_leftovers(project: Path) -> None:
    (project / "both.py").write_text(ERROR_FILE + "\n" + INFO_FILE)
    result = run(["both.py", "--fix"], project)
    assert result.exit_code == 0, result.output  # OPX101 fixed, the OPX505 info left
    assert "OPX505 info" in result.stdout


# --------------------------------------------------------------------------- paths


def test_missing_path_is_a_finding_once_and_others_are_still_linted(project: Path) -> None:
    proc = process(["err.py", "missing.py", "--output-format", "concise"], project)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout.startswith("err.py:5:5: OPX101 error")
    # Reported once, as a finding of its own (ruff's E902), and counted in the summary.
    assert proc.stdout.count("missing.py") == 1
    assert "missing.py:1:1: OPX003 error No such file or directory" in proc.stdout
    assert "Found 2 problems" in proc.stdout
    assert "missing.py" not in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("fmt", ["full", "concise", "grouped"])
def test_missing_path_alone_exits_two_and_never_passes(project: Path, fmt: str) -> None:
    proc = process(["nowhere/train.py", "--output-format", fmt], project)
    assert proc.returncode == 2
    assert "OPX003" in proc.stdout and "No such file or directory" in proc.stdout
    assert "All checks passed!" not in proc.stdout
    assert "Found 1 problem." in proc.stdout
    assert proc.stderr == ""


def test_missing_path_survives_the_ci_filters_and_machine_formats(project: Path) -> None:
    proc = process(["err.py", "missing.py", "--output-format", "json"], project)
    assert proc.returncode == 2
    assert [(f["path"], f["code"]) for f in json.loads(proc.stdout)] == [("err.py", "OPX101"), ("missing.py", "OPX003")]
    # A baseline cannot record it away: it is named, and the run still exits 2.
    proc = process(["err.py", "missing.py", "--baseline", "base.json", "--update-baseline"], project)
    assert proc.returncode == 2
    assert proc.stderr == "Recorded 1 finding in base.json.\nmissing.py:1:1: OPX003 error No such file or directory\n"
    proc = process(["err.py", "missing.py", "--baseline", "base.json", "--output-format", "concise"], project)
    assert (proc.returncode, proc.stdout) == (2, "missing.py:1:1: OPX003 error No such file or directory\nFound 1 problem.\n")


@pytest.mark.parametrize("content", [None, "notes.txt"])
def test_directory_without_python_files_warns_and_exits_zero(tmp_path: Path, content) -> None:
    empty = tmp_path / "data"
    empty.mkdir()
    if content:
        (empty / content).write_text("not python\n")
    proc = process(["data"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "warning: no Python files found in data" in proc.stderr
    assert "OPX" not in proc.stdout


def test_a_directory_with_python_files_does_not_warn(project: Path) -> None:
    proc = process([".", "--fail-level", "error", "--select", "OPX1"], project)
    assert "no Python files found" not in proc.stderr


# --------------------------------------------------------------------------- --diff


def test_diff_on_a_file_that_does_not_parse_reports_it_and_fails(project: Path) -> None:
    (project / "broken.py").write_text(BROKEN_FILE)
    proc = process(["broken.py", "--diff"], project)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "No fixes available." not in proc.stderr
    assert "broken.py:2:17: OPX001 error SyntaxError: '(' was never closed" in proc.stderr
    assert "1 file could not be read or parsed; no fixes computed for it." in proc.stderr
    assert (project / "broken.py").read_text() == BROKEN_FILE


def test_diff_still_shows_the_other_files_fixes(project: Path) -> None:
    (project / "broken.py").write_text(BROKEN_FILE)
    proc = process(["broken.py", "err.py", "--diff"], project)
    assert proc.returncode == 1
    assert proc.stdout.startswith("--- a/err.py\n+++ b/err.py\n")
    assert "broken.py:2:17: OPX001" in proc.stderr


def test_diff_on_clean_parseable_files_exits_zero(project: Path) -> None:
    proc = process(["info.py", "--diff"], project)
    assert proc.returncode == 0
    assert "No fixes available." in proc.stderr


# --------------------------------------------------------------------------- commands


@pytest.mark.parametrize(
    "args, suggestion",
    [
        (["rules", "OPX101"], "`optax-lint rule`"),
        (["rules", "--all"], "`optax-lint rule`"),
        (["schedules", "train.py"], "`optax-lint schedule`"),
        (["chek", "."], "`optax-lint check`"),
        (["help"], "`optax-lint --help`"),
        (["version"], "`optax-lint --version`"),
    ],
)
def test_mistyped_command_suggests_the_real_one(tmp_path: Path, args: list[str], suggestion: str) -> None:
    proc = process(args, tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"did you mean {suggestion}?" in proc.stderr
    assert "OPX003" not in proc.stdout


def test_a_path_that_exists_is_linted_even_if_it_looks_like_a_command(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "train.py").write_text(ERROR_FILE)
    proc = process(["rules", "--output-format", "concise"], tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.startswith("rules/train.py:5:5: OPX101")
    assert "did you mean" not in proc.stderr
    # `rules OPX101` with a `rules/` directory (as in this repository): OPX101 is no path.
    proc = process(["rules", "OPX101"], tmp_path)
    assert proc.returncode == 2
    assert "'OPX101' is neither a file nor a directory, and 'rules' is not a command; did you mean `optax-lint rule`?" in proc.stderr
    assert proc.stdout == ""
    # Spelled as a path, it is one: no suggestion, the usual missing-path finding.
    proc = process(["./rule"], tmp_path)
    assert proc.returncode == 2 and "did you mean" not in proc.stderr
    assert "./rule:1:1: OPX003 error No such file or directory" in proc.stdout


def test_a_missing_path_that_looks_like_nothing_gets_no_suggestion(tmp_path: Path) -> None:
    proc = process(["trian.py"], tmp_path)
    assert proc.returncode == 2
    assert "did you mean" not in proc.stderr


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flags(tmp_path: Path, flag: str) -> None:
    proc = process([flag], tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"optax-lint, version {__version__}"


def test_top_level_help_lists_the_lint_options_and_the_commands(tmp_path: Path) -> None:
    proc = process(["--help"], tmp_path)
    assert proc.returncode == 0
    check = main.commands["check"]
    for param in check.params:
        if isinstance(param, click.Option):
            assert param.opts[0] in proc.stdout, param.opts[0]
    for name in main.commands:
        assert f"  {name} " in proc.stdout
    assert "Usage: python -m optax_lint [OPTIONS] [PATHS]..." in proc.stdout
    assert run(["-h"], tmp_path).stdout == run(["--help"], tmp_path).stdout


def _commands(group: click.Group):
    yield group
    for command in group.commands.values():
        if isinstance(command, click.Group):
            yield from _commands(command)
        else:
            yield command


def test_every_option_of_every_command_has_a_description() -> None:
    missing = []
    for command in _commands(main):
        assert command.help, f"command {command.name} has no description"
        ctx = click.Context(command, info_name=command.name)
        for param in command.get_params(ctx):
            if isinstance(param, click.Option) and not (param.help or "").strip():
                missing.append(f"{command.name} {param.opts[0]}")
    assert missing == []
