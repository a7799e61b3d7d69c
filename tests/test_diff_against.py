"""--diff-against REF: only files changed since REF's merge base, only findings on
changed lines (in a real temporary git repository)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_cli import BAD, GOOD, run

from optax_lint.core.diagnostics import Finding, Severity, Span
from optax_lint.run.gitdiff import Changes, parse_diff

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
MISTAKE = "tx2 = optax.chain(optax.adamw(1e-3), optax.clip_by_global_norm(1.0))\n"


def git(repo: Path, *args: str) -> str:
    env_args = ["-c", "user.email=ci@example.com", "-c", "user.name=CI", "-c", "init.defaultBranch=main"]
    return subprocess.run(["git", *env_args, *args], cwd=repo, check=True, capture_output=True, text=True, timeout=60).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    (tmp_path / "old.py").write_text(BAD)  # an old finding, never touched
    (tmp_path / "edited.py").write_text(GOOD)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text(BAD)
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "base")
    git(tmp_path, "checkout", "-qb", "feature")
    return tmp_path


def concise(repo: Path, *args: str):
    return run(["--output-format", "concise", *args], repo)


def test_only_changed_lines_of_changed_files(repo: Path) -> None:
    # Committed on the branch: a new mistake in edited.py; unstaged: an edit above the old
    # finding in pkg/model.py (which leaves that finding on an unchanged line).
    (repo / "edited.py").write_text(GOOD + MISTAKE)
    git(repo, "commit", "-qam", "feature work")
    (repo / "pkg" / "model.py").write_text("# a new comment\n" + BAD)
    (repo / "untracked.py").write_text(BAD)  # new file: every line is new
    result = concise(repo, "--diff-against", "main")
    lines = sorted(line.split(" ")[0] for line in result.output.splitlines() if "OPX" in line)
    assert lines == ["edited.py:7:38:", "untracked.py:5:5:"], result.output
    assert result.exit_code == 1
    # Without the option every finding shows.
    assert concise(repo).output.count("OPX101") == 4


def test_nothing_changed_passes_and_paths_still_limit(repo: Path) -> None:
    result = concise(repo, "--diff-against", "main")
    assert result.exit_code == 0 and "All checks passed!" in result.output
    (repo / "edited.py").write_text(GOOD + MISTAKE)
    (repo / "pkg" / "model.py").write_text(BAD + MISTAKE)
    result = concise(repo, "pkg", "--diff-against", "main")
    assert [line.split(" ")[0] for line in result.output.splitlines() if "OPX" in line] == ["pkg/model.py:7:38:"]


def test_compares_with_the_merge_base_not_the_moving_tip(repo: Path) -> None:
    # main moves on after the branch was cut: its changes are not this branch's lines.
    git(repo, "checkout", "-q", "main")
    (repo / "old.py").write_text(BAD.replace("norm(1.0)", "norm(2.0)"))  # on the finding's line
    git(repo, "commit", "-qam", "main moves")
    git(repo, "checkout", "-q", "feature")
    assert concise(repo, "--diff-against", "main").exit_code == 0


def test_syntax_error_in_a_changed_file_is_reported(repo: Path) -> None:
    (repo / "edited.py").write_text(GOOD.replace("tx = optax.chain(", "tx = optax.chain((", 1) + "# more\n")
    result = concise(repo, "--diff-against", "main")
    assert "edited.py" in result.output and "OPX001" in result.output


def test_bad_ref_and_no_repository_exit_two(repo: Path, tmp_path_factory) -> None:
    result = concise(repo, "--diff-against", "no-such-branch")
    assert result.exit_code == 2 and "does not name a commit" in result.output
    result = concise(repo, "--diff-against", "--output=/tmp/x")
    assert result.exit_code == 2 and "is not a git revision" in result.output
    elsewhere = tmp_path_factory.mktemp("plain")
    (elsewhere / "a.py").write_text(BAD)
    result = concise(elsewhere, "--diff-against", "main")
    assert result.exit_code == 2 and "git" in result.output


def test_parse_diff_reads_hunks_names_and_ignores_content_lookalikes() -> None:
    text = (
        "diff --git a/x.py b/x.py\n"
        "--- a/x.py\n"
        "+++ b/x.py\n"
        "@@ -3,0 +4,2 @@ def f():\n"
        "+a\n"
        "+++ b/not-a-header.py\n"  # an added line whose text is "++ b/not-a-header.py"
        "@@ -10 +12 @@\n"
        "-old\n"
        "+new\n"
        "@@ -20,3 +21,0 @@\n"  # a pure deletion adds no lines
        "-gone\n"
        "diff --git \"a/sp\\303\\251cial\\tname.py\" \"b/sp\\303\\251cial\\tname.py\"\n"
        "--- \"a/sp\\303\\251cial\\tname.py\"\n"
        "+++ \"b/sp\\303\\251cial\\tname.py\"\n"
        "@@ -1 +1 @@\n"
        "-x\n"
        "+y\n"
        "diff --git a/deleted.py b/deleted.py\n"
        "--- a/deleted.py\n"
        "+++ /dev/null\n"
        "@@ -1 +0,0 @@\n"
        "-x\n"
    )
    assert parse_diff(text) == {"x.py": frozenset({4, 5, 12}), "sp\u00e9cial\tname.py": frozenset({1})}


def test_a_changed_notebook_is_reported_whole() -> None:
    changes = Changes({os.path.realpath("nb.ipynb"): frozenset({40}), os.path.realpath("a.py"): frozenset({40})})
    at_cell_line = [Finding("OPX101", "n", Severity.ERROR, "m", name, Span(3, 1, 3, 9)) for name in ("nb.ipynb", "a.py", "b.ipynb")]
    assert [changes.covers(f) for f in at_cell_line] == [True, False, False]
