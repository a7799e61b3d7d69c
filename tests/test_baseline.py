"""--baseline / --update-baseline: record today's findings, then fail only on new ones,
matched on rule, file and normalized source line, never on line numbers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_cli import BAD, run

NEW_MISTAKE = "tx_new = optax.chain(optax.adamw(1e-3), optax.clip_by_global_norm(1.0))\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(BAD)
    (tmp_path / "src" / "other.py").write_text(BAD)
    return tmp_path


def record(project: Path, *extra: str) -> dict:
    result = run(["src", "--baseline", "baseline.json", "--update-baseline", *extra], project)
    assert result.exit_code == 0, result.output
    assert "Recorded 2 findings in baseline.json." in result.output
    return json.loads((project / "baseline.json").read_text())


def test_update_baseline_records_keys_not_lines(project: Path) -> None:
    data = record(project)
    assert (project / "baseline.json").stat().st_mode & 0o777 == 0o644
    (project / "baseline.json").chmod(0o664)
    record(project)  # rewriting keeps the file's mode
    assert (project / "baseline.json").stat().st_mode & 0o777 == 0o664
    assert data["optax-lint-baseline"] == 1
    assert [(e["code"], e["path"], e["snippet"], e["index"]) for e in data["findings"]] == [
        ("OPX101", "src/other.py", "optax.clip_by_global_norm(1.0),", 0),
        ("OPX101", "src/train.py", "optax.clip_by_global_norm(1.0),", 0),
    ]


def test_baseline_survives_a_line_shift_and_a_new_finding_still_fails(project: Path) -> None:
    record(project)
    assert run(["src", "--baseline", "baseline.json"], project).exit_code == 0
    train = project / "src" / "train.py"
    # Lines inserted above, and the finding's own line re-indented: still the same finding.
    shifted = "import os\n\n\ndef unrelated():\n    return os.getcwd()\n\n" + BAD.replace(
        "    optax.clip_by_global_norm(1.0),", "        optax.clip_by_global_norm(1.0),"
    )
    train.write_text(shifted)
    result = run(["src", "--baseline", "baseline.json", "--output-format", "concise"], project)
    assert result.exit_code == 0, result.output
    assert "All checks passed!" in result.output
    assert "2 findings recorded in baseline.json not shown." in result.output
    # Without the baseline both are still there (the baseline hides, it does not fix).
    assert run(["src", "--output-format", "concise"], project).output.count("OPX101") == 2
    # A new mistake fails the run, and only it is reported, at its line.
    train.write_text(shifted + NEW_MISTAKE)
    result = run(["src", "--baseline", "baseline.json", "--output-format", "concise"], project)
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if "OPX101" in line]
    assert len(lines) == 1 and lines[0].startswith(f"src/train.py:{len(shifted.splitlines()) + 1}:")


def test_baseline_counts_repeated_identical_findings(project: Path) -> None:
    train = project / "src" / "train.py"
    train.write_text("import optax\n" + NEW_MISTAKE)
    (project / "src" / "other.py").write_text(BAD)
    record(project)
    # The same line written a second time is a second finding: not in the baseline.
    train.write_text("import optax\n" + NEW_MISTAKE + NEW_MISTAKE)
    result = run(["src", "--baseline", "baseline.json", "--output-format", "concise"], project)
    assert result.exit_code == 1 and result.output.count("OPX101") == 1


def test_baseline_paths_are_relative_to_the_baseline_file(project: Path) -> None:
    record(project)
    result = run(["train.py", "--baseline", "../baseline.json"], project / "src")
    assert result.exit_code == 0, result.output


def test_baseline_errors_exit_two(project: Path) -> None:
    result = run(["src", "--baseline", "missing.json"], project)
    assert result.exit_code == 2 and "--update-baseline" in result.output
    (project / "bad.json").write_text("{not json")
    assert run(["src", "--baseline", "bad.json"], project).exit_code == 2
    (project / "other.json").write_text('{"findings": []}')
    assert "not a valid baseline" in run(["src", "--baseline", "other.json"], project).output
    (project / "deep.json").write_text("[" * 100_000 + "]" * 100_000)  # hostile: deeper than json's recursion
    assert "not a valid baseline" in run(["src", "--baseline", "deep.json"], project).output
    assert run(["src", "--update-baseline"], project).exit_code == 2
    assert not os.path.exists(project / "baseline.json")
