"""The README's snippets, run as a user would run them (issue 11).

- the pre-commit recipe, run verbatim by bash against a local clone of this checkout,
  then pre-commit itself on a bad training script;
- the `--verify` hook's additional_dependencies, checked against the verify extra and
  validated by pre-commit;
- the CI job's steps, run in a fresh virtualenv: the git-URL install pinned to a real
  commit, then the lint step;
- the first set-up command, run verbatim in a copy of the repository.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_packaging import hook_repo  # noqa: F401 (a fixture: this checkout, committed in a repository of its own)

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BAD = textwrap.dedent(
    """\
    import optax

    tx = optax.chain(
        optax.adamw(learning_rate=3e-4),
        optax.clip_by_global_norm(1.0),
    )
    """
)
BIN = str(Path(sys.executable).parent)  # pre-commit and pip of the running environment


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else len(README)]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def _run(cmd, cwd, env=None, timeout=900, shell=False):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, shell=shell)


def _git(args, cwd) -> str:
    proc = _run(["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t", *args], cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def _env(home: Path, tmp_path_factory, **extra) -> dict:
    env = dict(os.environ)
    env.update(HOME=str(home), PATH=BIN + os.pathsep + env.get("PATH", ""), **extra)
    env["PRE_COMMIT_HOME"] = str(tmp_path_factory.getbasetemp() / "pre-commit-home")
    env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "t"
    env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "t@example.invalid"
    env.pop("NO_COLOR", None)
    return env


# --------------------------------------------------------------------------- pre-commit


def test_pre_commit_recipe_works_as_written(tmp_path: Path, hook_repo: Path, tmp_path_factory) -> None:
    text = section("pre-commit")
    assert "your-org" not in text and "v0.1.0" not in text
    (recipe,) = [b for b in blocks(text, "sh") if ".pre-commit-config.yaml" in b]
    # The recipe's clone location, under a HOME of the test's own.
    home = tmp_path / "home"
    clone_dir = re.search(r"^OPTAX_LINT_GIT=(\S+)", recipe, flags=re.M).group(1)
    assert clone_dir.startswith("~/")
    clone = home / clone_dir[2:]
    clone.parent.mkdir(parents=True)
    _git(["clone", "-q", str(hook_repo), str(clone)], tmp_path)
    sha = _git(["rev-parse", "HEAD"], clone)

    user = tmp_path / "user"
    user.mkdir()
    (user / "train.py").write_text(BAD)
    _git(["init", "-q", "-b", "main"], user)
    env = _env(home, tmp_path_factory)
    proc = _run(["bash", "-euo", "pipefail", "-c", recipe], user, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    config = (user / ".pre-commit-config.yaml").read_text()
    assert f"rev: {sha}\n" in config  # a real commit of the clone, not a tag that does not exist
    assert f"repo: {clone}\n" in config
    assert (user / ".git" / "hooks" / "pre-commit").exists()  # `pre-commit install` ran

    _git(["add", "-A"], user)
    proc = _run(["pre-commit", "run", "--all-files", "--color", "never"], user, env=env)
    # The hook has args [--fix]: it fixes the script, and pre-commit fails a hook that modified files.
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "files were modified by this hook" in proc.stdout
    fixed = (user / "train.py").read_text()
    assert fixed.index("clip_by_global_norm") < fixed.index("adamw")
    _git(["add", "-A"], user)
    proc = _run(["pre-commit", "run", "--all-files", "--color", "never"], user, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_verify_hook_dependencies_match_the_verify_extra(tmp_path: Path, hook_repo: Path, tmp_path_factory) -> None:
    import yaml

    text = section("pre-commit")
    (hook,) = [b for b in blocks(text, "yaml") if "--verify" in b]
    entry = yaml.safe_load(textwrap.dedent(hook))[0]
    assert entry["id"] == "optax-lint" and entry["args"] == ["--verify"]
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["verify"]
    # Every library --verify imports (jax, optax) is given at the version the extra asks for.
    imported = [req for req in extra if req.split(">")[0].split("=")[0] in ("jax", "optax")]
    assert sorted(entry["additional_dependencies"]) == sorted(imported)
    # And pre-commit accepts the hook as the README writes it.
    sha = _git(["rev-parse", "HEAD"], hook_repo)
    config = tmp_path / ".pre-commit-config.yaml"
    config.write_text(yaml.safe_dump({"repos": [{"repo": str(hook_repo), "rev": sha, "hooks": [entry]}]}))
    proc = _run(["pre-commit", "validate-config", str(config)], tmp_path, env=_env(tmp_path, tmp_path_factory))
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- CI


def test_ci_job_installs_from_git_at_a_real_rev_and_lints(tmp_path: Path, hook_repo: Path, tmp_path_factory) -> None:
    import yaml

    text = section("CI")
    (workflow,) = blocks(text, "yaml")
    job = yaml.safe_load(workflow)["jobs"]["optax-lint"]
    runs = [step["run"] for step in job["steps"] if "run" in step]
    assert not any(re.search(r"pip install\s+['\"]?optax-lint['\"]?\s*$", run) for run in runs), runs
    install, lint = runs
    assert "git+" in install
    variables = set(re.findall(r"\$\{(\w+)\}", install))
    assert variables <= set(job["env"]), (variables, job["env"])

    venv = tmp_path / "venv"
    # setup-python brings a current pip (a 2023 pip rejects `name @ git+file:///...`).
    proc = _run([sys.executable, "-m", "venv", "--upgrade-deps", str(venv)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    sha = _git(["rev-parse", "HEAD"], hook_repo)
    env = _env(tmp_path, tmp_path_factory, OPTAX_LINT_GIT=hook_repo.as_uri(), OPTAX_LINT_REV=sha)
    env["PATH"] = str(venv / "bin") + os.pathsep + env["PATH"]  # as setup-python puts its python first
    env.pop("PYTHONPATH", None)
    proc = _run(["bash", "-euo", "pipefail", "-c", install], tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    work = tmp_path / "checkout"
    work.mkdir()
    (work / "train.py").write_text(BAD)
    proc = _run(["bash", "-euo", "pipefail", "-c", lint], work, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("::error file=train.py,line=5,col=5,"), proc.stdout


# --------------------------------------------------------------------------- set up


def test_first_set_up_command_works_as_written(tmp_path: Path, hook_repo: Path) -> None:
    (command, tests_command) = blocks(section("Set up"), "sh")
    checkout = tmp_path / "checkout"
    _git(["clone", "-q", str(hook_repo), str(checkout)], tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = _run(["bash", "-euo", "pipefail", "-c", command.strip()], checkout, env=env)
    # The README says it: the example has findings, so the last command exits 1.
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "examples/train_transformer.py:68:9: OPX101 error [*]" in proc.stdout
    # The second command installs the extras CI uses: they must exist.
    extras = re.search(r"\.\[([\w,]+)\]", tests_command).group(1).split(",")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(extras) <= set(declared)


def test_readme_documents_every_option() -> None:
    import click

    from optax_lint.cli import main

    undocumented = [
        f"{name} {opt}"
        for name, command in main.commands.items()
        for param in command.params
        if isinstance(param, click.Option)
        for opt in param.opts + param.secondary_opts
        if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", README)
    ]
    assert undocumented == []
    for word in ("optax-lint schedule", "--verify", "-j", "--exit-zero", "-q", "--show-context", "--fail-level"):
        assert word in README
