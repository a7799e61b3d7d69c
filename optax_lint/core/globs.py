"""Path patterns in one dialect, gitignore's, matched by pathspec: `.gitignore` files,
`exclude`/`extend-exclude`, `per-file-ignores` keys and `[context]` override paths.

Patterns and paths are both seen one character per byte (latin-1 over their UTF-8 or
filesystem bytes), so `?` and `[...]` consume one byte as in git. pathspec is imported
only when patterns are compiled (a directory walk, `per-file-ignores`), never for
`--version`. Where pathspec and git disagree is listed in tests/test_globs.py.

.gitignore precedence, highest first: deeper files, then shallower ones, then
`.git/info/exclude`; inside one file the last matching pattern wins. A path inside an
excluded directory stays excluded whatever negations say, because git never looks
inside an excluded directory.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import warnings
from pathlib import Path
from typing import Optional, Sequence, Union

__all__ = [
    "IgnoreFile", "IgnoreRules", "Patterns", "below", "config_patterns", "find_repo_root", "glob_matches",
    "invalid_glob",
]

PathLike = Union[str, "os.PathLike[str]"]


def _wild(text: str) -> str:
    """The byte-per-character view of a path or pattern that matching works on."""
    return os.fsencode(text).decode("latin-1")


def _spec(lines: Sequence[str]):
    """pathspec's GitIgnoreSpec of `lines`; raises ValueError (or re.error) if one is malformed."""
    import pathspec

    with warnings.catch_warnings():  # `[[:digit:]]` makes `re` warn of a nested set
        warnings.simplefilter("ignore", FutureWarning)
        return pathspec.GitIgnoreSpec.from_lines(lines)


def _error(wild_line: str) -> Optional[str]:
    try:
        _spec([wild_line])
    except (ValueError, re.error) as exc:
        return str(exc)
    return None


def invalid_glob(pattern: str) -> Optional[str]:
    """Why pathspec cannot compile `pattern` (a config glob), or None if it can."""
    return _error(_wild(_config_line(pattern)))


class Patterns:
    """Compiled gitignore lines. Malformed lines are dropped: git never matches them."""

    __slots__ = ("lines", "_spec")

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = tuple(lines)
        wild = [_wild(line) for line in self.lines]
        try:
            self._spec = _spec(wild)
        except (ValueError, re.error):
            self._spec = _spec([line for line in wild if _error(line) is None])

    def verdict(self, rel: str, is_dir: bool) -> Optional[bool]:
        """pathspec's answer for `rel` (posix, relative to the patterns' base), which
        counts a match on a directory above `rel`: True ignored, False re-included by
        a negation, None when nothing matched."""
        return self._spec.check_file(_wild(rel) + ("/" if is_dir else "")).include

    def waived(self, rel_dir: str) -> "Patterns":
        """These patterns less those matching the directory `rel_dir` (or one above
        it): inside a directory the user names, what excluded it no longer applies."""
        kept = [line for line in self.lines if Patterns([line]).verdict(rel_dir, True) is None]
        return self if len(kept) == len(self.lines) else Patterns(kept)


def _config_line(pattern: str) -> str:
    """A config glob as a gitignore line: outer spaces and a leading `./` dropped."""
    text = pattern.strip()
    while text.startswith("./"):
        text = text[2:]
    return text


@functools.lru_cache(maxsize=512)
def config_patterns(patterns: tuple[str, ...]) -> Optional[Patterns]:
    """`exclude`-style globs from the config, in order; None if there are none."""
    lines = tuple(line for line in map(_config_line, patterns) if line.strip("/"))
    return Patterns(lines) if lines else None


def below(path: str, directory: str) -> Optional[str]:
    """Absolute `path` relative to absolute `directory` in posix form; None unless
    strictly inside it."""
    if not _strictly_within(path, directory):
        return None
    start = len(directory) if directory.endswith(os.sep) else len(directory) + 1
    return path[start:].replace(os.sep, "/")


def _relative(path: PathLike, root: PathLike) -> Optional[str]:
    absolute, base = os.path.abspath(path), os.path.abspath(root)
    rel = below(absolute, base)
    if rel is None:  # one side may have come through a symlink
        rel = below(os.path.realpath(absolute), os.path.realpath(base))
    return rel


def glob_matches(pattern: str, path: PathLike, root: PathLike) -> bool:
    """Does the `per-file-ignores`/`[context]` glob `pattern` cover the file `path`?

    As in a .gitignore at `root`: a pattern without a slash (a trailing one aside)
    matches a name at any depth, one with a slash is anchored at `root`, and matching
    a directory covers everything inside it. Outside `root` only the name is judged.
    """
    patterns = config_patterns((pattern,))
    if patterns is None:
        return False
    rel = _relative(path, root)
    return patterns.verdict(os.path.basename(path) if rel is None else rel, False) is True


# --------------------------------------------------------------------- .gitignore files


# git ignores pattern files above 100 MB (dir.c, PATTERN_MAX_FILE_SIZE).
_MAX_PATTERN_FILE = 100 * 1024 * 1024


def _read_regular(file: PathLike) -> Optional[bytes]:
    """The bytes of a regular file of at most 100 MB, else None. A checked-in symlink
    to /dev/zero, /dev/stdin or a FIFO must neither exhaust memory nor block the run."""
    try:
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_PATTERN_FILE:
                return None
            data = handle.read(_MAX_PATTERN_FILE + 1)
        except OSError:
            return None
    return data if len(data) <= _MAX_PATTERN_FILE else None


class IgnoreFile:
    """The patterns of one ignore file and the directory they are relative to."""

    __slots__ = ("base", "lines", "_patterns")

    def __init__(self, base: PathLike, lines: tuple[str, ...]) -> None:
        self.base = os.path.abspath(base)
        self.lines = lines  # without blanks and comments
        self._patterns = Patterns(lines) if lines else None

    @classmethod
    def parse(cls, data: Union[str, bytes], base: PathLike) -> "IgnoreFile":
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        if data.startswith(b"\xef\xbb\xbf"):  # git skips a UTF-8 BOM
            data = data[3:]
        lines = (line[:-1] if line.endswith(b"\r") else line for line in data.split(b"\n"))
        return cls(base, tuple(os.fsdecode(line) for line in lines if line.strip(b" ") and not line.startswith(b"#")))

    def waived(self, directory: str) -> "IgnoreFile":
        """This file less the patterns that match `directory` (see Patterns.waived)."""
        rel = below(directory, self.base)
        if rel is None or self._patterns is None:
            return self
        patterns = self._patterns.waived(rel)
        return self if patterns is self._patterns else IgnoreFile(self.base, patterns.lines)

    @classmethod
    def load(cls, file: PathLike, base: PathLike) -> Optional["IgnoreFile"]:
        """Read `file`; None if it is missing or unreadable (git skips those too)."""
        data = _read_regular(file)
        return None if data is None else cls.parse(data, base)

    def match(self, relpath: str, is_dir: bool) -> Optional[bool]:
        """Verdict of the last pattern matching `relpath` (posix, relative to base):
        True ignored, False re-included by a negation, None when nothing matched."""
        return None if self._patterns is None else self._patterns.verdict(relpath, is_dir)


def _strictly_within(path: str, directory: str) -> bool:
    prefix = directory if directory.endswith(os.sep) else directory + os.sep
    return path != directory and path.startswith(prefix)


def _git_dir(root: str) -> Optional[str]:
    """The directory holding `info/exclude` for the repository at `root`."""
    dot_git = os.path.join(root, ".git")
    if os.path.isdir(dot_git):
        return dot_git
    try:  # worktrees and submodules: ".git" is a file "gitdir: <path>"
        content = (_read_regular(dot_git) or b"").decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    if not content.startswith("gitdir:"):
        return None
    git_dir = os.path.join(root, content[len("gitdir:") :].strip())
    try:  # linked worktrees share info/exclude with the main repository
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as handle:
            return os.path.normpath(os.path.join(git_dir, handle.read().strip()))
    except (OSError, UnicodeDecodeError):
        return git_dir


def find_repo_root(start: PathLike) -> Optional[Path]:
    """The nearest directory at or above `start` that contains `.git`, if any."""
    current = os.path.abspath(start)
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return Path(current)
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


class IgnoreRules:
    """The ignore files in force for one directory: a stack from the root down.

    Instances are immutable; `child()` returns a new stack and shares the old one's
    files, so walking a tree costs one stat per directory without a .gitignore.
    """

    __slots__ = ("root", "_dir", "_files", "_excluded", "_top")

    def __init__(
        self,
        root: PathLike,
        files: tuple[IgnoreFile, ...] = (),
        *,
        _directory: Optional[str] = None,
        _excluded: bool = False,
        _top: Optional["IgnoreRules"] = None,
    ) -> None:
        self.root = Path(os.path.abspath(root))
        self._dir = _directory if _directory is not None else str(self.root)
        self._files = files
        self._excluded = _excluded  # this directory, or one above it, is ignored
        self._top = _top if _top is not None else self

    @classmethod
    def for_root(cls, root: PathLike) -> "IgnoreRules":
        """Rules for the repository (or bare tree) at `root`: `.git/info/exclude`
        then `root/.gitignore`."""
        base = os.path.abspath(root)
        git_dir = _git_dir(base)
        candidates = [os.path.join(git_dir, "info", "exclude")] if git_dir is not None else []
        candidates.append(os.path.join(base, ".gitignore"))
        files = (IgnoreFile.load(file, base) for file in candidates)
        return cls(base, tuple(file for file in files if file is not None))

    def child(self, directory: PathLike, *, explicit: bool = False) -> "IgnoreRules":
        """Rules for `directory`, below this stack's directory (missing intermediate
        levels are loaded on the way). `explicit=True` waives the directory's own
        exclusion: the user named it, so its contents are judged on their own."""
        target = os.path.abspath(directory)
        if target == self._dir:
            return self if not explicit else self._waive()
        if not _strictly_within(target, self._dir):
            if self._top is not self and (
                target == self._top._dir or _strictly_within(target, self._top._dir)
            ):
                return self._top.child(target, explicit=explicit)
            raise ValueError(f"{target} is not inside {self._dir}")
        parent = os.path.dirname(target)
        base = self if parent == self._dir else self.child(parent)
        excluded = base._excluded or base._decide(target, True)
        files = base._files
        if excluded and explicit:
            files, excluded = tuple(file.waived(target) for file in files), False
        if not excluded:  # git never reads .gitignore inside an ignored directory
            loaded = IgnoreFile.load(os.path.join(target, ".gitignore"), target)
            if loaded is not None and loaded.lines:
                files = files + (loaded,)
        return IgnoreRules(
            self.root, files, _directory=target, _excluded=excluded, _top=self._top
        )

    def is_ignored(self, path: PathLike, is_dir: bool) -> bool:
        """Whether git would ignore `path`. Paths outside the root are never ignored."""
        target = os.path.abspath(path)
        parent = os.path.dirname(target)
        if parent != self._dir:
            if _strictly_within(parent, self._dir):
                return self.child(parent).is_ignored(target, is_dir)
            top = self._top  # a path elsewhere in the tree: start again from the root
            if top is not self and (parent == top._dir or _strictly_within(parent, top._dir)):
                return top.child(parent).is_ignored(target, is_dir)
            return False
        return self._excluded or self._decide(target, is_dir)

    def _decide(self, target: str, is_dir: bool) -> bool:
        for ignore_file in reversed(self._files):  # deeper files take precedence
            rel = below(target, ignore_file.base)
            verdict = None if rel is None else ignore_file.match(rel, is_dir)
            if verdict is not None:
                return verdict
        return False

    def _waive(self) -> "IgnoreRules":
        if not self._excluded:
            return self
        files = tuple(file.waived(self._dir) for file in self._files)
        return IgnoreRules(self.root, files, _directory=self._dir, _top=self._top)

    def __repr__(self) -> str:
        return (
            f"IgnoreRules(root={str(self.root)!r}, directory={self._dir!r}, "
            f"files={len(self._files)})"
        )
