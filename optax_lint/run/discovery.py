"""Find the Python files to lint, ruff-style.

Directories are walked (sorted, symlinked directories followed but never round a loop)
for `*.py` and `*.ipynb` files, skipping `exclude`/`extend_exclude` matches and whatever .gitignore
ignores. Paths the user names are always linted unless `force_exclude` is set, which is
what pre-commit users want: pre-commit passes every changed file explicitly.

Exclude patterns are gitignore patterns (optax_lint.core.globs) as if in a .gitignore at
`root`, the config file's directory: `build` or `*.egg-info` (no slash) match a name at
any depth, `tests/fixtures` or `src/**/gen_*.py` are anchored at `root`, a trailing '/'
keeps a pattern to directories, and a later `!pattern` re-includes.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence, Union

from optax_lint.core.globs import (
    IgnoreRules,
    Patterns,
    below,
    config_patterns,
    find_repo_root,
)

__all__ = ["DEFAULT_EXCLUDE", "Discovery", "Problem", "discover", "is_excluded"]

DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".*/",  # hidden directories: .git, .venv, .tox, .nox, .eggs, .mypy_cache, ...
    "venv/",  # virtualenvs by their usual name (any dir with pyvenv.cfg is skipped anyway)
    "__pycache__/",
    "build/",
    "dist/",
    "_build/",  # sphinx
    "buck-out/",
    "node_modules/",
    "site-packages/",
    "*.egg-info/",
)

# What a directory walk lints: Python files and Jupyter notebooks (`extend-exclude =
# ["*.ipynb"]` leaves notebooks out).
LINTED_SUFFIXES = (".py", ".ipynb")

# Skipped while walking whatever `exclude` says: git's database and virtualenvs
# (a directory holding pyvenv.cfg) are never the user's source.
_VENV_MARKER = "pyvenv.cfg"

PathArg = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Problem:
    path: str
    message: str  # e.g. "No such file or directory", "Permission denied", "symlink loop"


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)  # sorted by posix string, unique
    problems: list[Problem] = field(default_factory=list)


def _is_excluded_abs(path: str, root: str, excludes: Optional[Patterns], is_dir: bool) -> bool:
    """`path` or any directory between it and `root` matches an exclude pattern."""
    if excludes is None:
        return False
    rel = below(path, root)
    if rel is None:  # outside root: only the name can be judged
        return excludes.verdict(os.path.basename(path), is_dir) is True
    parts = rel.split("/")
    for depth in range(1, len(parts) + 1):
        last = depth == len(parts)
        if excludes.verdict("/".join(parts[:depth]), is_dir or not last) is True:
            return True
    return False


def is_excluded(path: PathArg, *, root: PathArg, patterns: Sequence[str]) -> bool:
    """Whether `path` (or a directory above it, up to `root`) matches `patterns`."""
    absolute = os.path.abspath(path)
    excludes = config_patterns(tuple(patterns))
    return _is_excluded_abs(absolute, os.path.abspath(root), excludes, os.path.isdir(absolute))


def _message(error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return "symlink loop"
    return error.strerror or str(error)


class _Walker:
    def __init__(self, root: str, exclude: tuple[str, ...], respect_gitignore: bool) -> None:
        self.root = root
        self.exclude = exclude
        self.respect_gitignore = respect_gitignore
        self.found: dict[str, Path] = {}  # realpath -> the first spelling seen
        self.problems: list[Problem] = []
        self.walked: set[tuple[int, int]] = set()
        self._repos: dict[str, Optional[str]] = {}  # directory -> its repository root
        self._stacks: dict[str, IgnoreRules] = {}  # directory -> its .gitignore stack

    @property
    def excludes(self) -> Optional[Patterns]:
        # compiled on first use: named files without --force-exclude never need them,
        # and pathspec's import is an eighth of a pre-commit run over such files
        return config_patterns(self.exclude)

    def add(self, shown: Path, absolute: str, real: Optional[str] = None) -> None:
        """Record a file once, keyed by its resolved path (`real` if already known)."""
        self.found.setdefault(real or os.path.realpath(absolute), shown)

    def rules_for(self, directory: str) -> Optional[IgnoreRules]:
        """The .gitignore stack of the repository holding `directory` (None if none)."""
        if not self.respect_gitignore:
            return None
        if directory not in self._repos:
            repo = find_repo_root(directory)
            self._repos[directory] = None if repo is None else str(repo)
        repo = self._repos[directory]
        return None if repo is None else self._stack(repo, directory)

    def _stack(self, repo: str, directory: str) -> IgnoreRules:
        # cached per level: pre-commit names many files in the same folders
        rules = self._stacks.get(directory)
        if rules is None:
            if directory == repo:
                rules = IgnoreRules.for_root(repo)
            else:
                rules = self._stack(repo, os.path.dirname(directory)).child(directory)
            self._stacks[directory] = rules
        return rules

    def skipped(self, absolute: str, is_dir: bool) -> bool:
        """force_exclude's test for a named path: exclude patterns, then .gitignore."""
        if _is_excluded_abs(absolute, self.root, self.excludes, is_dir):
            return True
        rules = self.rules_for(os.path.dirname(absolute))
        return rules is not None and rules.is_ignored(absolute, is_dir)

    def explicit(self, raw: PathArg, force_exclude: bool) -> None:
        shown = Path(raw)
        absolute = os.path.abspath(raw)
        try:
            is_dir = stat.S_ISDIR(os.stat(absolute).st_mode)
        except OSError as error:  # ENOENT (also for a dangling symlink), ELOOP, EACCES
            self.problems.append(Problem(str(raw), _message(error)))
            return
        if force_exclude and self.skipped(absolute, is_dir):
            return
        if not is_dir:
            self.add(shown, absolute)  # named files are linted whatever their suffix
            return
        rules: Optional[IgnoreRules] = None
        if self.respect_gitignore:
            repo = find_repo_root(absolute)
            if repo is None:  # no repository: only .gitignore files inside this tree
                rules = IgnoreRules.for_root(absolute)
            elif str(repo) == absolute:
                rules = self.rules_for(absolute)
            else:
                parent = self.rules_for(os.path.dirname(absolute))
                assert parent is not None
                rules = parent.child(absolute, explicit=True)  # named: its own exclusion is waived
        excludes, rel = self.excludes, below(absolute, self.root)
        if excludes is not None and rel is not None and _is_excluded_abs(absolute, self.root, excludes, True):
            excludes = excludes.waived(rel)  # likewise for the exclude patterns
        self.walk(shown, absolute, rules, excludes)

    def walk(self, shown: Path, absolute: str, rules: Optional[IgnoreRules], excludes: Optional[Patterns]) -> None:
        stack: list[tuple[Path, str, Optional[IgnoreRules], frozenset[tuple[int, int]]]] = [
            (shown, absolute, rules, frozenset())
        ]
        while stack:
            shown, absolute, rules, ancestors = stack.pop()
            try:
                info = os.stat(absolute)
            except OSError as error:
                self.problems.append(Problem(str(shown), _message(error)))
                continue
            key = (info.st_dev, info.st_ino)
            if key in ancestors:  # a symlink back to a directory we are inside
                self.problems.append(Problem(str(shown), "symlink loop"))
                continue
            if key in self.walked:  # reached again through another path or argument
                continue
            self.walked.add(key)
            real = os.path.realpath(absolute)  # once per directory, not per file
            try:
                with os.scandir(absolute) as scan:
                    entries = sorted(scan, key=lambda entry: entry.name)
            except OSError as error:  # typically EACCES: report it and carry on
                self.problems.append(Problem(str(shown), _message(error)))
                continue
            subdirs = []
            for entry in entries:
                item = self.visit(entry, shown, real, rules, excludes)
                if item is not None:
                    subdirs.append((*item, ancestors | {key}))
            stack.extend(reversed(subdirs))

    def visit(
        self, entry: "os.DirEntry[str]", parent: Path, real_parent: str,
        rules: Optional[IgnoreRules], excludes: Optional[Patterns],
    ) -> Optional[tuple[Path, str, Optional[IgnoreRules]]]:
        """Handle one directory entry; return a subdirectory still to walk."""
        name, absolute = entry.name, entry.path  # entry.path is absolute
        try:
            is_dir = entry.is_dir()  # follows symlinks; FileNotFoundError becomes False
        except OSError as error:  # ELOOP: a symlink chain that never ends
            if not self.ignored(name, absolute, False, rules, excludes):
                self.problems.append(Problem(str(parent / name), _message(error)))
            return None
        if is_dir:
            if name == ".git" or os.path.isfile(os.path.join(absolute, _VENV_MARKER)):
                return None
            if self.ignored(name, absolute, True, rules, excludes):
                return None
            if rules is not None:
                if os.path.lexists(os.path.join(absolute, ".git")):
                    rules = IgnoreRules.for_root(absolute)  # a nested repository's own rules
                else:
                    rules = rules.child(absolute)
            return parent / name, absolute, rules
        if not name.endswith(LINTED_SUFFIXES) or self.ignored(name, absolute, False, rules, excludes):
            return None
        if entry.is_symlink():
            if entry.is_file():
                self.add(parent / name, absolute)
            else:  # dangling link to a would-be Python file
                self.problems.append(Problem(str(parent / name), os.strerror(errno.ENOENT)))
        elif entry.is_file():
            self.add(parent / name, absolute, os.path.join(real_parent, name))
        return None

    def ignored(
        self, name: str, absolute: str, is_dir: bool, rules: Optional[IgnoreRules], excludes: Optional[Patterns]
    ) -> bool:
        if excludes is not None:
            rel = below(absolute, self.root)
            if excludes.verdict(name if rel is None else rel, is_dir) is True:
                return True
        return rules is not None and rules.is_ignored(absolute, is_dir)


def discover(
    paths: Sequence[PathArg],
    *,
    root: PathArg,
    exclude: Sequence[str] = DEFAULT_EXCLUDE,
    extend_exclude: Sequence[str] = (),
    force_exclude: bool = False,
    respect_gitignore: bool = True,
) -> Discovery:
    """Expand `paths` (files and directories) into the Python files to lint."""
    walker = _Walker(os.path.abspath(root), tuple(exclude) + tuple(extend_exclude), respect_gitignore)
    for raw in paths:
        walker.explicit(raw, force_exclude)
    files = sorted(walker.found.values(), key=lambda path: path.as_posix())
    return Discovery(files=files, problems=walker.problems)
