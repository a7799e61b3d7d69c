"""Every install command the README and the error messages print resolves with pip
(issue 22: optax-lint is not on PyPI, so `pip install 'optax-lint[verify]'` finds
nothing).

The commands are collected from the README and from the messages themselves, the
repository's URL and `<rev>` are replaced by a `git+file://` URL of a committed
snapshot of this checkout and its commit, and each command is dry-run (`pip install
--dry-run`) in one fresh virtualenv: the ones naming `.` from a clone of that
snapshot. Each extra's dependencies are resolved once (from the clone); the other
commands use `--no-deps`, which still fetches and builds the named source, and their
extras are checked against pyproject.toml. The build backend is installed once into
the venv (`--no-build-isolation`) instead of once per command, and the commands run
three at a time: what costs time here is pip's startup and the network.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner

from optax_lint.core.catalogue import HOMEPAGE
from tests.test_packaging import hook_repo  # noqa: F401 (a fixture: this checkout, committed in a repository of its own)

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
# `pip install` and its arguments on one line: quoted, options, or plain names and paths;
# whatever else ends the command (a backtick, `&&`, a comment, the prose around it).
COMMAND = re.compile(r"(?<![%\w])pip install((?:[ \t]+(?:'[^']*'|\"[^\"]*\"|[\w.\-\[\]=<>/]+(?=[\s`]|$)))+)")


def commands(text: str) -> list[str]:
    return [" ".join(m.group(1).split()) for m in COMMAND.finditer(text)]


def message_texts(monkeypatch) -> list[str]:
    """What --verify, schedule --png and `optax-lint server` print when their extra is missing."""
    from optax_lint.cli import main
    from optax_lint.verify import plot, runner

    monkeypatch.setattr(runner, "module_available", lambda name: False)
    texts = [plot.png_unavailable()]
    with pytest.raises(runner.VerifyUnavailable) as info:
        runner.check_available()
    texts.append(str(info.value))
    monkeypatch.setitem(sys.modules, "pygls", None)
    monkeypatch.delitem(sys.modules, "optax_lint.lsp", raising=False)
    result = CliRunner().invoke(main, ["server"])
    assert result.exit_code == 2
    texts.append(result.output)
    return texts


def test_every_printed_install_command_resolves(tmp_path: Path, hook_repo: Path, monkeypatch) -> None:  # noqa: F811
    printed = commands(README) + [c for text in message_texts(monkeypatch) for c in commands(text)]
    found = list(dict.fromkeys(printed))
    assert "'.[verify]'" in found and "'.[lsp]'" in found
    assert not [c for c in found if re.fullmatch(r"['\"]?optax-lint(\[[\w,]+\])?['\"]?", c)], found  # nothing from PyPI

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(hook_repo), str(clone)], check=True, capture_output=True)
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=hook_repo, check=True, capture_output=True, text=True).stdout.strip()
    # file://localhost/...: pip before 23.3 rejects a direct reference to file:///...
    # ("Invalid requirement"), and the README's venv gets the machine's pip (23.2 here).
    url = "file://localhost" + hook_repo.as_posix()

    def concrete(args: str) -> str:
        for old, new in ((f"git+{HOMEPAGE}", f"git+{url}"), ("${OPTAX_LINT_GIT}", url), ("${OPTAX_LINT_REV}", rev), ("<rev>", rev)):
            args = args.replace(old, new)
        return args

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    pip = [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check"]
    backend = subprocess.run([*pip, "install", "-q", "hatchling>=1.18", "editables"], env=env, capture_output=True, text=True)
    assert backend.returncode == 0, backend.stderr[-2000:]

    # One job per distinct piece of work: each extra's dependencies resolved once, from the
    # clone; every other command with --no-deps, where its extras change nothing (they are
    # checked against pyproject.toml instead), so commands naming the same source share a job.
    jobs: dict = {}
    for args in found:
        extras = [e for group in re.findall(r"\[([\w,]+)\]", args) for e in group.split(",")]
        assert set(extras) <= EXTRAS, (args, EXTRAS)
        local = "optax-lint" not in args and re.search(r"(^|\s)['\"]?\.(\[|['\"\s]|$)", args) is not None
        words = shlex.split(concrete(args))  # quotes as a shell reads them
        if local and len(extras) == 1 and ("deps", extras[0]) not in jobs:
            key, deps = ("deps", extras[0]), []
        else:
            key, deps = ("no-deps", re.sub(r"\[[\w,]+\]", "", " ".join(words))), ["--no-deps"]
        jobs.setdefault(key, ([*pip, "install", "--dry-run", "--no-build-isolation", *deps, *words], clone if local else tmp_path, []))[2].append(args)
    assert {key[1] for key in jobs if key[0] == "deps"} == {"verify", "lsp"}

    def run(job):
        argv, cwd, printed_as = job
        return " | ".join(printed_as), subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(run, jobs.values()))
    failures = [f"pip install {args}: exit {proc.returncode}\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}"
                for args, proc in results if proc.returncode != 0 or "Would install" not in proc.stdout
                or "does not provide the extra" in proc.stdout + proc.stderr]
    assert not failures, "\n\n".join(failures)
    installs = {args: proc.stdout for args, proc in results}
    assert "jax-" in installs["'.[verify]'"] and "pygls-" in installs["'.[lsp]'"]
