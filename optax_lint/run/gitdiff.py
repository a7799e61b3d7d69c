"""--diff-against REF: the files and lines changed since a git ref.

The comparison is a pull request's: from the merge base of REF and HEAD to the working
tree (committed, staged and unstaged changes), so commits that landed on REF after the
branch was cut do not count as yours. Untracked files (not ignored) are new, so every
line of them counts. git runs as a subprocess with fixed arguments; REF is checked to
name a commit before it is used, and can never be read as an option.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from typing import Iterable, Optional

from optax_lint.core.diagnostics import Finding

# Findings about a whole file (does not parse, cannot be read, crashed a rule): kept
# whenever the file changed, wherever their line is.
FILE_LEVEL_CODES = frozenset({"OPX001", "OPX003", "OPX900"})
TIMEOUT = 120

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


class GitError(Exception):
    pass


@dataclass
class Changes:
    # real path -> changed line numbers in the working tree; None: the whole file is new
    lines: dict[str, Optional[frozenset[int]]]

    def has_file(self, path: os.PathLike | str) -> bool:
        return os.path.realpath(path) in self.lines

    def covers(self, finding: Finding) -> bool:
        key = os.path.realpath(finding.path)
        if key not in self.lines:
            return False
        changed = self.lines[key]
        # A notebook's finding lines count within its cells, not the JSON file git diffs:
        # a changed notebook is reported whole.
        if changed is None or finding.code in FILE_LEVEL_CODES or key.lower().endswith(".ipynb"):
            return True
        return any(n in changed for n in range(finding.span.line, max(finding.span.end_line, finding.span.line) + 1))


def _git(args: list[str], cwd: str) -> str:
    try:
        proc = subprocess.run(
            ["git", "-c", "core.quotePath=false", *args],
            cwd=cwd, capture_output=True, timeout=TIMEOUT, check=False,
        )
    except FileNotFoundError as exc:
        raise GitError("--diff-against needs git, which was not found on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {args[0]} took longer than {TIMEOUT}s") from exc
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {message[-1] if message else f'exit {proc.returncode}'}")
    return proc.stdout.decode("utf-8", "surrogateescape")


def _unquote(path: str) -> str:
    """git's C-style quoting of unusual file names ("a\\tb", octal UTF-8 bytes)."""
    if not (len(path) >= 2 and path[0] == path[-1] == '"'):
        return path
    out = bytearray()
    body, i = path[1:-1], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567":
                out.append(int(body[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        out.extend(ch.encode("utf-8", "surrogateescape"))
        i += 1
    return out.decode("utf-8", "surrogateescape")


def parse_diff(text: str) -> dict[str, frozenset[int]]:
    """New-side changed lines per path (as git prints it, relative to the repository
    root) from `git diff -U0` output. Deleted files and pure deletions add no lines."""
    changed: dict[str, set[int]] = {}
    current: Optional[set[int]] = None
    in_header = False
    for line in text.splitlines():
        if line.startswith("diff --git "):
            in_header, current = True, None
        elif in_header and line.startswith("+++ "):
            target = _unquote(line[4:].rstrip("\t"))
            current = None if target == "/dev/null" else changed.setdefault(target[2:] if target.startswith("b/") else target, set())
        elif line.startswith("@@"):
            in_header = False
            match = _HUNK.match(line)
            if match and current is not None:
                start, count = int(match.group(1)), int(match.group(2) if match.group(2) is not None else 1)
                current.update(range(start, start + count))
    return {path: frozenset(lines) for path, lines in changed.items()}


def changes_since(ref: str, cwd: str = ".") -> Changes:
    if not ref or ref.startswith("-"):
        raise GitError(f"--diff-against: {ref!r} is not a git revision")
    top = _git(["rev-parse", "--show-toplevel"], cwd).strip()
    try:
        _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], cwd)
    except GitError as exc:
        raise GitError(f"--diff-against: {ref!r} does not name a commit in this repository") from exc
    try:
        base = _git(["merge-base", "--end-of-options", ref, "HEAD"], cwd).strip() or ref
    except GitError:  # no common history (or no HEAD yet): compare with REF itself
        base = ref
    diff = _git(["diff", "--no-color", "--no-ext-diff", "--no-textconv", "--find-renames", "--src-prefix=a/", "--dst-prefix=b/", "-U0", base, "--"], top)
    lines: dict[str, Optional[frozenset[int]]] = {
        os.path.realpath(os.path.join(top, path)): changed for path, changed in parse_diff(diff).items()
    }
    untracked = _git(["ls-files", "--others", "--exclude-standard", "-z"], top)
    for path in filter(None, untracked.split("\0")):
        lines[os.path.realpath(os.path.join(top, path))] = None
    return Changes(lines)


def keep_changed(paths: Iterable, changes: Changes) -> list:
    return [p for p in paths if changes.has_file(p)]
