"""Rebuild the real-repository corpus from the pinned commits in PINS.tsv.

Nothing here imports or runs the code it copies: files are read with git plumbing
(`git ls-tree`, `git cat-file`) from a clone of each repository at its pinned commit
and written under `corpus/<owner>+<name>/`. Every Python file of a repository is
copied (with its pyproject.toml and setup.cfg files, which mark where imports resolve), so that the config and model modules a training script imports are there to
be read across files, as in the repository itself; `corpus/files.txt` lists the files
that import optax, which are the ones linted.

    python benchmarks/realworld/rebuild.py                   # clones from GitHub
    python benchmarks/realworld/rebuild.py --mirrors DIR     # DIR/<owner>+<name>/repo: bare git dirs

The corpus is not committed (it is other people's code) and is not rebuilt in CI.
"""

from __future__ import annotations

import argparse
import csv
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# `import optax`, `from optax...`, and optax among other modules (`import jax, optax`).
OPTAX_IMPORT = re.compile(rb"^[ \t]*(?:import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*optax\b|from[ \t]+optax\b)", re.M)
# The same in a notebook's JSON, where each source line starts with a quote.
NOTEBOOK_OPTAX_IMPORT = re.compile(rb'"[ \t]*(?:import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*optax\b|from[ \t]+optax\b)')
MAX_BYTES = 4 * 1024 * 1024
# A snapshot may hold a large blob cut short at 2.5 MiB plus one byte (seen on a
# 3.6 MB notebook: it ends inside a base64 image). A clone holds the whole file; a cut
# copy is not the repository's file, so it is left out rather than linted.
CUT_BYTES = 5 * 512 * 1024 + 1
_MARKERS = ("pyproject.toml", "setup.cfg")
# Read for the project's own pins (optax_lint/facts/project/pins.py), as in a checkout.
_PIN_FILES = ("requirements.txt",)
# Launch scripts, whose flags a run of a training script gets (facts/project/launch.py).
_LAUNCH_SUFFIXES = (".sh",)


def git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True, capture_output=True).stdout


def pins(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [row for row in csv.DictReader(fh, delimiter="\t") if row["repo"] and not row["repo"].startswith("#")]


def clone(repo: str, commit: str, clones: Path) -> Path:
    target = clones / repo.replace("/", "+")
    if not target.exists():
        subprocess.run(["git", "clone", "--bare", "--filter=blob:none", f"https://github.com/{repo}.git", str(target)], check=True)
    try:
        git(target, "cat-file", "-e", f"{commit}^{{commit}}")
    except subprocess.CalledProcessError:
        subprocess.run(["git", "--git-dir", str(target), "fetch", "origin", commit], check=True)
    return target


def extract(git_dir: Path, commit: str, out: Path) -> list[str]:
    """Copy every .py file (and each .ipynb that imports optax) at `commit`, the project
    markers (pyproject.toml, setup.cfg) that tell a checkout's top, where its imports
    resolve from, the requirements.txt files the linter reads pins from, and the shell
    launch scripts it reads flags from; return the optax-using files, relative to `out`."""
    listing = git(git_dir, "ls-tree", "-r", "-z", "--long", commit).split(b"\0")
    using = []
    for entry in listing:
        if not entry:
            continue
        meta, _, name = entry.partition(b"\t")
        mode, kind, sha, size = meta.split()
        path = name.decode("utf-8", "surrogateescape")
        project_file = path.rsplit("/", 1)[-1] in _MARKERS + _PIN_FILES or path.endswith(_LAUNCH_SUFFIXES)
        if kind != b"blob" or mode == b"120000" or not (path.endswith((".py", ".ipynb")) or project_file):
            continue
        if not size.isdigit() or int(size) > MAX_BYTES:  # "-" or a blob the clone lacks
            continue
        if int(size) == CUT_BYTES:
            print(f"left out {path}: {CUT_BYTES} bytes, the size of a blob the snapshot cut short", file=sys.stderr)
            continue
        data = git(git_dir, "cat-file", "blob", sha.decode())
        optax = not project_file and (bool(OPTAX_IMPORT.search(data)) or (path.endswith(".ipynb") and (b"import optax" in data or bool(NOTEBOOK_OPTAX_IMPORT.search(data)))))
        if path.endswith(".ipynb") and not optax:
            continue
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if optax:
            using.append(path)
    return sorted(using)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, help="folder of bare git dirs, <owner>+<name>/repo")
    parser.add_argument("--clones", type=Path, default=HERE / ".clones", help="where to clone (default: %(default)s)")
    parser.add_argument("--corpus", type=Path, default=HERE / "corpus")
    parser.add_argument(
        "--skip-missing",
        action="store_true",
        help="with --mirrors, leave out pinned repositories that have no mirror and list them in CORPUS/missing.txt",
    )
    args = parser.parse_args(argv)
    if args.corpus.exists():
        shutil.rmtree(args.corpus)
    args.corpus.mkdir(parents=True)
    files, missing = [], []
    for pin in pins(HERE / "PINS.tsv"):
        repo, commit = pin["repo"], pin["commit"]
        if args.mirrors is not None:
            git_dir = args.mirrors / repo.replace("/", "+") / "repo"
            if (git_dir / ".git").is_dir():  # a snapshot that is a clone with a work tree
                git_dir = git_dir / ".git"
            if args.skip_missing and not git_dir.is_dir():
                missing.append(repo)
                continue
        else:
            args.clones.mkdir(parents=True, exist_ok=True)
            git_dir = clone(repo, commit, args.clones)
        folder = repo.replace("/", "+")
        using = extract(git_dir, commit, args.corpus / folder)
        # A checkout's top holds `.git`: the linter finds the project's root (where its
        # imports resolve from and its pins are read) there, as it would in a clone.
        (args.corpus / folder / ".git").mkdir(parents=True, exist_ok=True)
        files += [f"{folder}/{path}" for path in using]
        print(f"{repo}@{commit[:12]}: {len(using)} files import optax", file=sys.stderr)
    (args.corpus / "files.txt").write_text("".join(f + "\n" for f in files), encoding="utf-8")
    # precision.py reads this list: a judged finding of a repository left out is not lost.
    (args.corpus / "missing.txt").write_text("".join(r + "\n" for r in missing), encoding="utf-8")
    print(f"{len(files)} optax-using files in {args.corpus}", file=sys.stderr)
    if missing:
        print(f"{len(missing)} pinned repositories had no mirror and were left out (missing.txt)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
