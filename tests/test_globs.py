"""optax_lint.core.globs against git itself.

Every path pattern optax-lint reads (.gitignore files, `exclude`/`extend-exclude`,
`per-file-ignores`, `[context]` overrides) goes through one matcher, pathspec's gitignore
patterns. Each case below puts its lines in a .gitignore of its own and asks
`git check-ignore --no-index` about one path; our answer must be git's, except where
KNOWN_DIFFERENCES says why not (those cases must still differ: a fixed one fails here
and comes off the list). README.md and CHANGELOG.md tell users the same differences.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

from optax_lint.core.config import ConfigError, load_settings
from optax_lint.core.globs import IgnoreFile, IgnoreRules, glob_matches
from optax_lint.run.discovery import is_excluded

# Its module fixtures are costly: one xdist worker computes them once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("globs")

PATHSPEC_MAJOR = int(version("pathspec").split(".")[0])

CASES = [
    # (.gitignore lines, path relative to it, is_dir)
    # no slash: matches a name at any depth, files and directories alike
    ("hello.*", "hello.txt", False),
    ("hello.*", "a/b/hello.c", False),
    ("hello.*", "hello", False),
    ("foo", "foo", True),
    ("foo", "a/foo", False),
    ("foo", "foobar", False),
    # a leading or middle slash anchors to the .gitignore's directory
    ("/foo", "foo", False),
    ("/foo", "a/foo", False),
    ("doc/frotz", "doc/frotz", False),
    ("doc/frotz", "a/doc/frotz", False),
    ("doc/frotz/", "doc/frotz", True),
    ("doc/frotz/", "a/doc/frotz", True),
    # a trailing slash: directories only (but still at any depth when no other slash)
    ("frotz/", "frotz", True),
    ("frotz/", "a/frotz", True),
    ("frotz/", "frotz", False),
    # '*' and '?' do not cross '/'
    ("foo/*", "foo/test.json", False),
    ("foo/*", "foo/bar", True),
    ("foo/*", "foo/bar/hello.c", False),
    ("a/*.py", "a/b/c.py", False),
    ("a/?", "a/b", False),
    ("a?b", "a/b", False),
    ("x/a*c", "x/ab/c", False),
    # '**'
    ("**/foo", "foo", False),
    ("**/foo", "x/y/foo", True),
    ("**/foo/bar", "x/foo/bar", False),
    ("**/foo/bar", "x/foo/baz/bar", False),
    ("abc/**", "abc/x", False),
    ("abc/**", "abc/x/y/z", False),
    ("abc/**", "abc", True),
    ("a/**/b", "a/b", False),
    ("a/**/b", "a/x/b", False),
    ("a/**/b", "a/x/y/b", False),
    ("a/**/b", "a/xb", False),
    ("x**y", "xay", False),  # not next to slashes: an ordinary '*'
    ("x**y", "x/y", False),
    ("a/b**/c", "a/b/x/c", False),  # git strncmps the literal prefix first
    # character classes
    ("[a-c].py", "b.py", False),
    ("[a-c].py", "d.py", False),
    ("[!a].py", "a.py", False),
    ("[!a].py", "b.py", False),
    ("[^a].py", "b.py", False),
    ("[]a].py", "].py", False),
    ("[[:digit:]]x", "7x", False),
    ("[[:digit:]]x", "ax", False),
    ("a[/]b", "a/b", False),  # a class never matches '/'
    ("[z-a]", "m", False),  # reversed range
    ("[abc", "[abc", False),  # unterminated class
    ("[[:nope:]]", "n", False),  # unknown class
    ("[[:nope:]]", "n]", False),
    # escapes and spaces
    ("\\#frotz", "#frotz", False),
    ("\\!frotz", "!frotz", False),
    ("\\*", "*", False),
    ("\\*", "a", False),
    ("foo   ", "foo", False),  # unescaped trailing spaces are dropped
    ("foo\\ ", "foo ", False),  # an escaped one is kept
    ("foo\\ ", "foo", False),
    ("foo\\", "foo", False),  # trailing backslash
    # bytes, like git: '?' is one byte and 'é' is two in UTF-8
    ("caf?", "café", False),
    ("caf??", "café", False),
    ("café", "café", False),
    # the patterns the three old dialects disagreed on
    ("src/a**b.py", "src/axb.py", False),
    ("src/a**b.py", "src/a/x/b.py", False),  # '**' inside a segment is one '*'
    ("foo\\*.py", "foo*.py", False),  # a backslash escapes
    ("foo\\*.py", "fooX.py", False),
    ("[[:digit:]].py", "1.py", False),
    ("[[:digit:]].py", "d.py", False),
    ("[[:digit:]].py", "d].py", False),
    # more of the usual
    ("**/build/", "build", True),
    ("**/build/", "a/build", True),
    ("**/build/", "a/build/x.py", False),
    ("**/build/", "build.py", False),
    ("/anchored.py", "anchored.py", False),
    ("/anchored.py", "d/anchored.py", False),
    ("dir/", "dir/x.py", False),
    ("dir/", "a/dir", True),
    ("dir/", "dir", False),
    ("*.py[cod]", "a.pyc", False),
    ("*.py[cod]", "d/b.pyd", False),
    ("*.py[cod]", "a.py", False),
    ("[a-c][0-9].py", "b7.py", False),
    ("[!a-c]x", "dx", False),
    ("\\[1].py", "[1].py", False),
    ("[z-a]", "z", False),
    # several lines: the last match wins, negation, excluded directories
    ("*.py\n!keep.py", "keep.py", False),
    ("*.py\n!keep.py", "a/keep.py", False),
    ("*.py\n!keep.py", "a.py", False),
    ("build/\n!build/keep.py", "build/keep.py", False),  # inside an excluded directory
    ("out/*\n!out/keep.py", "out/keep.py", False),
    ("out/*\n!out/keep.py", "out/drop.py", False),
    ("a/\n*.py\n!a/", "a/x.py", False),
    ("*\n!*/\n!*.py", "d", True),  # the "ignore all but Python files" idiom
    ("*\n!*/\n!*.py", "d/a.py", False),
    ("*\n!*/\n!*.py", "d/a.txt", False),
    ("abc/**\n!abc/keep.py", "abc/keep.py", False),
]

# (lines, path) -> (why pathspec's answer is not git's, whether the installed pathspec has it)
KNOWN_DIFFERENCES: dict[tuple[str, str], tuple[str, bool]] = {
    # pathspec hands `[[:digit:]]` to `re`, where it is the set `[[:digt]` then a `]`
    ("[[:digit:]]x", "7x"): ("POSIX classes are not supported by pathspec", True),
    ("[[:digit:]].py", "1.py"): ("POSIX classes are not supported by pathspec", True),
    ("[[:digit:]].py", "d].py"): ("POSIX classes: pathspec reads a set of ':dgit[' and a ']'", True),
    ("[[:nope:]]", "n]"): ("POSIX classes: git never matches an unknown class", True),
    ("a/b**/c", "a/b/x/c"): ("git compares a pattern's literal prefix first, so its '**' spans directories", True),
    ("abc/**", "abc"): ("pathspec counts the directory itself as matched by 'abc/**'", True),
    ("abc/**\n!abc/keep.py", "abc/keep.py"): ("so 'abc/' is excluded and nothing inside it returns", True),
    ("[z-a]", "z"): ("git's reversed range still matches its first character; pathspec drops the pattern", True),
    ("[abc", "[abc"): ("pathspec 0.x reads an unterminated class literally; git never matches it", PATHSPEC_MAJOR < 1),
    ("*\n!*/\n!*.py", "d"): ("pathspec 1.x: a match of '*' outranks the later '!*/' for a directory", PATHSPEC_MAJOR >= 1),
    ("*\n!*/\n!*.py", "d/a.py"): ("so the directory is excluded, and its Python files with it", PATHSPEC_MAJOR >= 1),
}


def _param(index: int, lines: str, path: str, is_dir: bool):
    reason, applies = KNOWN_DIFFERENCES.get((lines, path), ("", False))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if applies else []
    return pytest.param(index, id=f"{lines!r}:{path}{'/' if is_dir else ''}", marks=marks)


def _make(base: Path, path: str, is_dir: bool) -> None:
    target = base / path
    if is_dir:
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"")


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> tuple[Path, dict[int, bool]]:
    """(the repository, git's verdict for each case): one directory per case."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    repo = tmp_path_factory.mktemp("globs")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for index, (lines, path, is_dir) in enumerate(CASES):
        _make(repo / f"c{index}", path, is_dir)
        (repo / f"c{index}" / ".gitignore").write_text(lines + "\n", encoding="utf-8")
    asked = [f"c{index}/{path}" for index, (_, path, _) in enumerate(CASES)]
    nowhere = repo / ".git" / "no-global-excludes"  # the user's own excludes must not count
    out = subprocess.run(
        ["git", "-c", f"core.excludesFile={nowhere}", "-C", str(repo), "check-ignore", "--no-index", "--stdin", "-z"],
        input="\0".join(asked) + "\0", capture_output=True, text=True, env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    assert out.returncode in (0, 1), out.stderr  # 1: nothing ignored
    ignored = set(out.stdout.split("\0"))
    return repo, {index: name in ignored for index, name in enumerate(asked)}


@pytest.mark.parametrize("index", [_param(i, *case) for i, case in enumerate(CASES)])
def test_agrees_with_git_check_ignore(verdicts, index):
    repo, git = verdicts
    _, path, is_dir = CASES[index]
    ours = IgnoreRules.for_root(repo).is_ignored(repo / f"c{index}" / path, is_dir)
    assert ours is git[index]


def test_every_known_difference_is_a_case():
    assert set(KNOWN_DIFFERENCES) <= {(lines, path) for lines, path, _ in CASES}


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("src/a**b.py", "src/axb.py", True),
        ("src/a**b.py", "src/a/x/b.py", False),
        ("foo\\*.py", "foo*.py", True),
        ("foo\\*.py", "foo/x.py", False),
        ("*.py[cod]", "pkg/a.pyc", True),
        ("build", "pkg/build/a.py", True),  # a name at any depth, the old `exclude` reading
        ("/gen", "pkg/gen/a.py", False),
        ("gen/", "pkg/gen/a.py", True),
    ],
)
def test_config_globs_and_gitignore_files_are_one_dialect(tmp_path, pattern, path, hit):
    """`exclude`, `per-file-ignores`/`[context]` and a .gitignore read a pattern alike."""
    assert glob_matches(pattern, tmp_path / path, tmp_path) is hit
    assert is_excluded(tmp_path / path, root=tmp_path, patterns=[pattern]) is hit
    assert bool(IgnoreFile.parse(pattern, tmp_path).match(path, False)) is hit


def test_config_globs_are_relative_to_the_config_directory(tmp_path):
    root = tmp_path / "tests" / "proj"
    assert not glob_matches("tests", root / "a.py", root)  # a directory above the project
    assert glob_matches("/src/*.py", root / "src/a.py", root)  # anchored, not absolute
    assert glob_matches("conftest.py", tmp_path / "elsewhere/conftest.py", root)  # outside: the name
    assert not glob_matches("elsewhere/*.py", tmp_path / "elsewhere/a.py", root)


def test_a_glob_pathspec_cannot_read_is_a_config_error(tmp_path):
    (tmp_path / "optax-lint.toml").write_text('[per-file-ignores]\n"src/\\\\" = ["OPX1"]\n')
    with pytest.raises(ConfigError, match=r"\[per-file-ignores\] \"src/\\\": invalid glob"):
        load_settings(start=tmp_path)
