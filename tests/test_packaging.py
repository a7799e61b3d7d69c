"""The product as users install it: a built wheel in a fresh venv, and the real
pre-commit hook run in a scratch git repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

from optax_lint.core.catalogue import load_catalogue

# Its module fixtures are costly: one xdist worker computes them once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("packaging")

ROOT = Path(__file__).resolve().parent.parent
BAD = textwrap.dedent(
    """\
    import optax

    tx = optax.chain(
        optax.adamw(learning_rate=3e-4),
        optax.clip_by_global_norm(1.0),
    )
    """
)


def _run(cmd, cwd, timeout=600, env=None):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)], cwd=out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheels = list(out.glob("optax_lint-*.whl"))
    assert len(wheels) == 1
    return wheels[0]


def test_wheel_ships_the_catalogue_and_lists_every_rule(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    proc = _run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Run from outside the checkout so nothing can come from the source tree.
    proc = _run([str(env_dir / "bin" / "optax-lint"), "rule", "--all", "--output-format", "json"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    listed = [entry["code"] for entry in json.loads(proc.stdout)]
    assert listed == list(load_catalogue())
    (tmp_path / "train.py").write_text(BAD)
    proc = _run([str(env_dir / "bin" / "optax-lint"), "train.py", "--output-format", "concise"], cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.startswith("train.py:5:5: OPX101")


def _git(args, cwd):
    proc = _run(["git", *args], cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    """A committed snapshot of this checkout (working tree included) for pre-commit."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    snapshot = tmp_path_factory.mktemp("hook-repo")
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy2(ROOT / name, snapshot / name)
    for name in ("optax_lint", "rules", "examples"):
        shutil.copytree(ROOT / name, snapshot / name, ignore=shutil.ignore_patterns("__pycache__"))
    _git(["init", "-q", "-b", "main"], snapshot)
    _git(["add", "-A"], snapshot)
    _git(["-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-qm", "snapshot"], snapshot)
    return snapshot


def _user_repo(tmp_path: Path, hook_repo: Path, args: list[str]) -> Path:
    repo = tmp_path / "user"
    repo.mkdir()
    (repo / "train.py").write_text(BAD)
    rev = _git(["rev-parse", "HEAD"], hook_repo)
    (repo / ".pre-commit-config.yaml").write_text(
        textwrap.dedent(
            f"""\
            repos:
              - repo: {hook_repo}
                rev: {rev}
                hooks:
                  - id: optax-lint
                    args: {json.dumps(args)}
            """
        )
    )
    _git(["init", "-q", "-b", "main"], repo)
    _git(["add", "-A"], repo)
    return repo


def _pre_commit_env(tmp_path_factory) -> dict:
    env = dict(os.environ)
    env["PRE_COMMIT_HOME"] = str(tmp_path_factory.getbasetemp() / "pre-commit-home")
    env.pop("NO_COLOR", None)
    return env


def test_pre_commit_hook_reports_finding(tmp_path: Path, hook_repo: Path, tmp_path_factory) -> None:
    repo = _user_repo(tmp_path, hook_repo, [])
    proc = _run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"], cwd=repo, env=_pre_commit_env(tmp_path_factory))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "optax-lint" in proc.stdout and "Failed" in proc.stdout
    assert "train.py:5:5: OPX101" in proc.stdout
    assert (repo / "train.py").read_text() == BAD


def test_pre_commit_hook_fixes_with_fix_arg(tmp_path: Path, hook_repo: Path, tmp_path_factory) -> None:
    repo = _user_repo(tmp_path, hook_repo, ["--fix"])
    proc = _run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"], cwd=repo, env=_pre_commit_env(tmp_path_factory))
    # pre-commit fails a hook that modified files, even when it exits 0.
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "files were modified by this hook" in proc.stdout
    fixed = (repo / "train.py").read_text()
    assert fixed.index("clip_by_global_norm") < fixed.index("adamw")
    _git(["add", "-A"], repo)
    proc = _run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"], cwd=repo, env=_pre_commit_env(tmp_path_factory))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pre_commit_hook_lints_notebooks(tmp_path: Path, hook_repo: Path, tmp_path_factory) -> None:
    repo = _user_repo(tmp_path, hook_repo, ["--output-format", "concise"])
    shutil.copy(ROOT / "fixtures" / "notebooks" / "colab_train.ipynb", repo / "colab_train.ipynb")
    _git(["add", "-A"], repo)
    proc = _run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"], cwd=repo, env=_pre_commit_env(tmp_path_factory))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "colab_train.ipynb:cell 7:5:5: OPX101" in proc.stdout  # types_or: [python, jupyter]


def test_pre_commit_try_repo(tmp_path: Path, hook_repo: Path, tmp_path_factory) -> None:
    repo = _user_repo(tmp_path, hook_repo, [])
    proc = _run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), "optax-lint", "--all-files", "--color", "never"],
        cwd=repo,
        env=_pre_commit_env(tmp_path_factory),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "train.py:5:5: OPX101" in proc.stdout
