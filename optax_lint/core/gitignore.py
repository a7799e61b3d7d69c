"""A self-contained .gitignore matcher that follows git's own rules (dir.c, wildmatch.c).

Matching is done on bytes, like git: pattern files are read as bytes and paths are
encoded with the filesystem encoding, then both are viewed through latin-1 (one
character per byte) so that `?` and `[...]` consume one byte exactly as git does.

Precedence, highest first: deeper .gitignore files, then shallower ones, then
`.git/info/exclude`; inside one file the last matching pattern wins. A path inside an
excluded directory stays excluded whatever negations say, because git never looks
inside an excluded directory.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

__all__ = [
    "IgnoreFile",
    "IgnoreRules",
    "Pattern",
    "find_repo_root",
    "glob_to_regex",
]

PathLike = Union[str, "os.PathLike[str]"]

# POSIX bracket classes; git checks them with ASCII-only ctype macros.
_ASCII = "".join(chr(c) for c in range(128))
_POSIX_CLASSES: dict[str, str] = {
    "alnum": "".join(c for c in _ASCII if c.isalnum()),
    "alpha": "".join(c for c in _ASCII if c.isalpha()),
    "blank": " \t",
    "cntrl": "".join(chr(c) for c in (*range(32), 127)),
    "digit": "0123456789",
    "graph": "".join(chr(c) for c in range(33, 127)),
    "lower": "abcdefghijklmnopqrstuvwxyz",
    "print": "".join(chr(c) for c in range(32, 127)),
    "punct": "".join(chr(c) for c in range(33, 127) if not chr(c).isalnum()),
    "space": " \t\n\v\f\r",
    "upper": "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "xdigit": "0123456789abcdefABCDEF",
}

_GLOB_SPECIAL = "*?[\\"


class _Abort(Exception):
    """The pattern is malformed; wildmatch returns WM_ABORT_ALL, so it never matches."""


def _bracket(pat: str, i: int) -> tuple[str, int]:
    """Translate the class starting just after '[' at `i`; return (regex, next index)."""
    n = len(pat)
    negated = i < n and pat[i] in "!^"
    if negated:
        i += 1
    chars: list[str] = []
    ranges: list[tuple[str, str]] = []
    prev: Optional[str] = None  # wildmatch's prev_ch; None plays its 0
    first = True
    while True:
        if i >= n:
            raise _Abort
        c = pat[i]
        if c == "]" and not first:
            break
        first = False
        if c == "\\":
            i += 1
            if i >= n:
                raise _Abort
            c = pat[i]
            chars.append(c)
            prev = c
        elif c == "-" and prev is not None and i + 1 < n and pat[i + 1] != "]":
            i += 1
            hi = pat[i]
            if hi == "\\":
                i += 1
                if i >= n:
                    raise _Abort
                hi = pat[i]
            if prev <= hi:  # a reversed range matches nothing, as in git
                ranges.append((prev, hi))
            prev = None
        elif c == "[" and i + 1 < n and pat[i + 1] == ":":
            end = pat.find("]", i + 2)
            if end < 0:
                raise _Abort
            if end - (i + 2) < 1 or pat[end - 1] != ":":
                chars.append("[")  # no ":]": the '[' is an ordinary member
                prev = "["
            else:
                members = _POSIX_CLASSES.get(pat[i + 2 : end - 1])
                if members is None:
                    raise _Abort
                chars.extend(members)
                prev = None
                i = end
        else:
            chars.append(c)
            prev = c
        i += 1
    body = "".join(re.escape(c) for c in dict.fromkeys(chars))
    body += "".join(f"{re.escape(lo)}-{re.escape(hi)}" for lo, hi in ranges)
    if negated:
        return f"[^/{body}]", i + 1
    if not body:
        return "(?!)", i + 1
    return f"(?!/)[{body}]", i + 1  # classes never match '/' under WM_PATHNAME


def _translate(pat: str) -> str:
    """wildmatch(pat, text, WM_PATHNAME) as a regex body; raises _Abort if malformed."""
    out: list[str] = []
    i, n = 0, len(pat)
    while i < n:
        c = pat[i]
        if c == "*":
            j = i
            while j < n and pat[j] == "*":
                j += 1
            if j - i >= 2 and (i == 0 or pat[i - 1] == "/"):
                if j == n:  # trailing "/**": everything inside
                    out.append(".*")
                    i = j
                    continue
                if pat[j] == "/":  # "**/": zero or more whole directories
                    out.append("(?:.*/)?")
                    i = j + 1
                    continue
                if pat.startswith("\\/", j):  # "**\/": git lets the star span '/'
                    out.append(".*")
                    i = j
                    continue
            out.append("[^/]*")  # other runs of stars stay within one component
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            regex, i = _bracket(pat, i + 1)
            out.append(regex)
        elif c == "\\":
            if i + 1 >= n:
                raise _Abort  # a trailing backslash can never match
            out.append(re.escape(pat[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def glob_to_regex(pattern: str) -> Optional["re.Pattern[str]"]:
    """Compile a git-style glob: `*`/`?`/`[...]` stay inside one path component,
    `**/`, `/**/` and `/**` span directories. None if the glob is malformed."""
    try:
        return re.compile(_translate(pattern), re.DOTALL)
    except _Abort:
        return None


def _wild(path: str) -> str:
    """The byte-per-character view of `path` that patterns are matched against."""
    return os.fsencode(path).decode("latin-1")


def _trim_trailing_spaces(line: str) -> str:
    """git's trim_trailing_spaces: drop unescaped trailing spaces (not tabs)."""
    last_space: Optional[int] = None
    i = 0
    while i < len(line):
        c = line[i]
        if c == " ":
            if last_space is None:
                last_space = i
        elif c == "\\":
            i += 1
            if i >= len(line):
                return line
            last_space = None
        else:
            last_space = None
        i += 1
    return line if last_space is None else line[:last_space]


@dataclass(frozen=True)
class Pattern:
    """One compiled line of an ignore file."""

    source: str  # the line as written, for messages
    negated: bool
    dir_only: bool  # trailing '/'
    basename_only: bool  # no '/' left: matches the name at any depth
    regex: Optional["re.Pattern[str]"]  # None: can never match (malformed or empty)

    @classmethod
    def parse(cls, line: Union[str, bytes]) -> Optional["Pattern"]:
        """Parse one line (without its newline); None for blanks and comments."""
        raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogateescape")
        text = raw.decode("latin-1")
        if text.endswith("\r"):
            text = text[:-1]
        if not text or text.startswith("#"):
            return None
        source = text.encode("latin-1").decode("utf-8", "replace")
        text = _trim_trailing_spaces(text)
        negated = text.startswith("!")
        if negated:
            text = text[1:]
        dir_only = text.endswith("/")
        if dir_only:
            text = text[:-1]
        basename_only = "/" not in text
        if not basename_only and text.startswith("/"):
            text = text[1:]
        return cls(source, negated, dir_only, basename_only, cls._compile(text, basename_only))

    @staticmethod
    def _compile(text: str, basename_only: bool) -> Optional["re.Pattern[str]"]:
        if not text:
            return None
        # git compares a path pattern's leading literal part with strncmp and hands
        # only the rest to wildmatch, so a "**" right after that prefix counts as
        # being at the start of the pattern ("a/b**/c" matches "a/b/x/c" in git).
        prefix = ""
        if not basename_only:
            cut = next((k for k, ch in enumerate(text) if ch in _GLOB_SPECIAL), len(text))
            prefix, text = text[:cut], text[cut:]
        try:
            return re.compile(re.escape(prefix) + _translate(text), re.DOTALL)
        except _Abort:
            return None

    def _matches(self, rel: str, is_dir: bool) -> bool:
        """`rel`: the wild view of the path relative to the ignore file's directory."""
        if self.regex is None or (self.dir_only and not is_dir):
            return False
        subject = rel.rpartition("/")[2] if self.basename_only else rel
        return self.regex.fullmatch(subject) is not None


@dataclass(frozen=True)
class IgnoreFile:
    """The patterns of one ignore file and the directory they are relative to."""

    base: str  # absolute directory
    patterns: tuple[Pattern, ...]

    @classmethod
    def parse(cls, data: Union[str, bytes], base: PathLike) -> "IgnoreFile":
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        if data.startswith(b"\xef\xbb\xbf"):  # git skips a UTF-8 BOM
            data = data[3:]
        parsed = (Pattern.parse(line) for line in data.split(b"\n"))
        return cls(os.path.abspath(base), tuple(p for p in parsed if p is not None))

    @classmethod
    def load(cls, file: PathLike, base: PathLike) -> Optional["IgnoreFile"]:
        """Read `file`; None if it is missing or unreadable (git skips those too)."""
        data = _read_regular(file)
        return None if data is None else cls.parse(data, base)

    def match(self, relpath: str, is_dir: bool) -> Optional[bool]:
        """Verdict of the last pattern matching `relpath` (posix, relative to base):
        True ignored, False re-included by a negation, None when nothing matched."""
        return self._match(_wild(relpath), is_dir)

    def _match(self, rel: str, is_dir: bool) -> Optional[bool]:
        for pattern in reversed(self.patterns):
            if pattern._matches(rel, is_dir):
                return not pattern.negated
        return None


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


def _strictly_within(path: str, directory: str) -> bool:
    prefix = directory if directory.endswith(os.sep) else directory + os.sep
    return path != directory and path.startswith(prefix)


def _relative_wild(path: str, directory: str) -> Optional[str]:
    if not _strictly_within(path, directory):
        return None
    start = len(directory) if directory.endswith(os.sep) else len(directory) + 1
    return _wild(path[start:].replace(os.sep, "/"))


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
        files: list[IgnoreFile] = []
        git_dir = _git_dir(base)
        if git_dir is not None:
            info = IgnoreFile.load(os.path.join(git_dir, "info", "exclude"), base)
            if info is not None:
                files.append(info)
        top = IgnoreFile.load(os.path.join(base, ".gitignore"), base)
        if top is not None:
            files.append(top)
        return cls(base, tuple(files))

    @property
    def directory(self) -> Path:
        """The deepest directory whose .gitignore this stack has loaded (or tried)."""
        return Path(self._dir)

    @property
    def files(self) -> tuple[IgnoreFile, ...]:
        return self._files

    def child(self, directory: PathLike, *, explicit: bool = False) -> "IgnoreRules":
        """Rules for `directory`, below this stack's directory (missing intermediate
        levels are loaded on the way). `explicit=True` waives the directory's own
        exclusion: the user named it, so its contents are judged on their own."""
        target = os.path.abspath(directory)
        if target == self._dir:
            return self if not explicit else self._replace(excluded=False)
        if not _strictly_within(target, self._dir):
            if self._top is not self and (
                target == self._top._dir or _strictly_within(target, self._top._dir)
            ):
                return self._top.child(target, explicit=explicit)
            raise ValueError(f"{target} is not inside {self._dir}")
        parent = os.path.dirname(target)
        base = self if parent == self._dir else self.child(parent)
        excluded = False if explicit else (base._excluded or base._decide(target, True))
        files = base._files
        if not excluded:  # git never reads .gitignore inside an ignored directory
            loaded = IgnoreFile.load(os.path.join(target, ".gitignore"), target)
            if loaded is not None and loaded.patterns:
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
            rel = _relative_wild(target, ignore_file.base)
            if rel is None:
                continue
            verdict = ignore_file._match(rel, is_dir)
            if verdict is not None:
                return verdict
        return False

    def _replace(self, *, excluded: bool) -> "IgnoreRules":
        return IgnoreRules(
            self.root, self._files, _directory=self._dir, _excluded=excluded, _top=self._top
        )

    def __repr__(self) -> str:
        return (
            f"IgnoreRules(root={str(self.root)!r}, directory={self._dir!r}, "
            f"files={len(self._files)})"
        )
