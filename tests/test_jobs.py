"""Parallelism and progress (api.run, progress.py): the same sorted results whatever the
worker count, a pool only when it pays, a progress bar only for a watching human."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from optax_lint.cli import main
from optax_lint.core.config import load_settings
from optax_lint.run import api, progress

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Every bad fixture, under shuffled names so input order differs from path order."""
    root = tmp_path / "tree"
    root.mkdir()
    bads = sorted(p for p in FIXTURES.glob("OPX*/bad_*.py") if not p.name.endswith(".fixed.py"))[::3]
    for i, bad in enumerate(bads):
        shutil.copy(bad, root / f"{(i * 7919) % 1000:03d}_{bad.parent.name}_{bad.name}")
    (root / "optax-lint.toml").write_text("")
    return root


def outcome(paths: list[Path], jobs: int) -> list:
    settings = load_settings(start=paths[0].parent)
    result = api.run(paths, settings, api.RunOptions(jobs=jobs))
    return [(r.path, [(f.code, f.span, f.message, f.fixable(True)) for f in r.findings]) for r in result.results]


def test_one_or_many_workers_give_identical_sorted_results(tree: Path, monkeypatch) -> None:
    monkeypatch.setattr(api, "POOL_MIN_BYTES", 0)  # make the pool certain even for small files
    used = []
    real = api._pooled
    monkeypatch.setattr(api, "_pooled", lambda *a: used.append(a[3]) or real(*a))
    paths = sorted(tree.glob("*.py"), key=lambda p: p.name[::-1])  # not in path order
    serial = outcome(paths, 1)
    parallel = outcome(paths, 2)
    more = outcome(paths, 3)
    assert used == [2, 3]
    assert serial == parallel == more
    assert [path for path, _ in serial] == sorted(path for path, _ in serial)
    assert sum(len(found) for _, found in serial) > len(paths)


def test_a_pre_commit_handful_stays_in_process(tree: Path) -> None:
    few = sorted(tree.glob("*.py"))[:5]
    assert not api._use_pool(2, few)
    many = sorted(tree.glob("*.py"))
    assert api._use_pool(2, many * 10)  # enough source to pay for the workers
    assert not api._use_pool(1, many * 10)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_with_many_files_and_never_in_pre_commit(monkeypatch) -> None:
    monkeypatch.delenv("PRE_COMMIT", raising=False)
    monkeypatch.delenv("OPTAX_LINT_NO_PROGRESS", raising=False)
    assert progress.wanted(1000, _Tty())
    assert not progress.wanted(1000, io.StringIO())  # a pipe or a file
    assert not progress.wanted(3, _Tty())  # a handful of files
    monkeypatch.setenv("PRE_COMMIT", "1")
    assert not progress.wanted(1000, _Tty())


def test_the_bar_counts_every_file_on_stderr(tree: Path, monkeypatch) -> None:
    monkeypatch.delenv("PRE_COMMIT", raising=False)
    monkeypatch.setattr(progress, "MIN_FILES", 2)
    stream = _Tty()
    paths = sorted(tree.glob("*.py"))
    with progress.progress_bar(len(paths), stream) as advance:
        assert advance is not None
        api.run(paths, load_settings(start=tree), api.RunOptions(jobs=1, progress=advance))
    assert f"{len(paths)}/{len(paths)}" in stream.getvalue()


def test_cli_output_has_no_progress_bar_on_a_pipe(tree: Path, monkeypatch) -> None:
    monkeypatch.setattr(progress, "MIN_FILES", 2)
    result = CliRunner().invoke(main, [str(tree), "--output-format", "concise", "--no-cache"])
    assert "Linting" not in result.output
