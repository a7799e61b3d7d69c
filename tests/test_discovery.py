"""optax_lint.core.globs (.gitignore stacks) and optax_lint.run.discovery: git-faithful
ignores, ruff-like walking. Single patterns against git itself: tests/test_globs.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from optax_lint.core.globs import IgnoreFile, IgnoreRules, Patterns, find_repo_root
from optax_lint.run import discovery as discovery_module
from optax_lint.run.discovery import DEFAULT_EXCLUDE, Problem, discover, is_excluded


def make(root: Path, *files: str, content: str = "x = 1\n") -> Path:
    """Create files (and their folders) under root; a trailing '/' makes a directory."""
    for name in files:
        path = root / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
    return root


def rel(result, root: Path) -> list[str]:
    return [Path(os.path.relpath(p, root)).as_posix() for p in result.files]


def found(root: Path, *paths, **options) -> list[str]:
    result = discover([root / p for p in paths] or [root], root=root, **options)
    assert result.problems == []
    return rel(result, root)


# --- gitignore: single files -----------------------------------------------------


@pytest.mark.parametrize("line", ["", "   ", "# a comment", "#*.py", "\r"])
def test_blank_and_comment_lines_are_not_patterns(line):
    assert IgnoreFile.parse(line, "/r").lines == ()


def test_negation_within_one_file_last_match_wins():
    rules = IgnoreFile.parse("*.py\n!keep.py\n", "/r")
    assert rules.match("a.py", False) is True
    assert rules.match("keep.py", False) is False  # re-included
    assert rules.match("a.txt", False) is None  # undecided
    again = IgnoreFile.parse("!keep.py\n*.py\n", "/r")
    assert again.match("keep.py", False) is True


def test_crlf_bom_and_comments_parsed_like_git():
    data = b"\xef\xbb\xbf# comment\r\n*.log\r\n\r\n!keep.log\r\n"
    rules = IgnoreFile.parse(data, "/r")
    assert rules.lines == ("*.log", "!keep.log")
    assert rules.match("x.log", False) is True
    assert rules.match("keep.log", False) is False


def test_patterns():
    patterns = Patterns(["src/**/gen_*.py"])
    assert patterns.verdict("src/gen_a.py", False)
    assert patterns.verdict("src/x/y/gen_a.py", False)
    assert not patterns.verdict("src/x/gen_a/b.py", False)
    assert not Patterns(["foo\\", "[z-a]"]).verdict("foo", False)  # malformed: dropped


# --- gitignore: stacks of files ---------------------------------------------------


def test_file_under_excluded_directory_cannot_be_reincluded(tmp_path):
    make(tmp_path, ".git/", "build/keep.py", "out/keep.py")
    (tmp_path / ".gitignore").write_text("build/\n!build/keep.py\nout/*\n!out/keep.py\n")
    rules = IgnoreRules.for_root(tmp_path)
    assert rules.is_ignored(tmp_path / "build", True)
    assert rules.is_ignored(tmp_path / "build/keep.py", False)  # parent excluded wins
    assert not rules.is_ignored(tmp_path / "out", True)
    assert not rules.is_ignored(tmp_path / "out/keep.py", False)  # the documented trick


def test_nested_gitignore_precedence_and_anchoring(tmp_path):
    make(tmp_path, ".git/", "a.py", "gen.py", "sub/a.py", "sub/gen.py", "sub/deep/gen.py")
    (tmp_path / ".gitignore").write_text("*.py\n")
    (tmp_path / "sub/.gitignore").write_text("!*.py\n/gen.py\n")
    rules = IgnoreRules.for_root(tmp_path)
    assert rules.is_ignored(tmp_path / "a.py", False)
    assert rules.is_ignored(tmp_path / "gen.py", False)
    sub = rules.child(tmp_path / "sub")
    assert not sub.is_ignored(tmp_path / "sub/a.py", False)  # deeper file wins
    assert sub.is_ignored(tmp_path / "sub/gen.py", False)  # anchored to sub/
    assert not sub.is_ignored(tmp_path / "sub/deep/gen.py", False)
    # asking the root stack about a deep path loads the intermediate .gitignore itself
    assert not rules.is_ignored(tmp_path / "sub/deep/gen.py", False)
    assert rules.is_ignored(tmp_path / "sub/gen.py", False)
    assert not rules.is_ignored(tmp_path.parent / "elsewhere.py", False)  # outside root


def test_info_exclude_is_read_and_has_lowest_precedence(tmp_path):
    make(tmp_path, ".git/info/", "secret.py", "local.py")
    (tmp_path / ".git/info/exclude").write_text("secret.py\nlocal.py\n")
    (tmp_path / ".gitignore").write_text("!local.py\n")
    rules = IgnoreRules.for_root(tmp_path)
    assert rules.is_ignored(tmp_path / "secret.py", False)
    assert not rules.is_ignored(tmp_path / "local.py", False)


def test_find_repo_root(tmp_path):
    make(tmp_path, "repo/.git/", "repo/a/b/")
    assert find_repo_root(tmp_path / "repo/a/b") == tmp_path / "repo"
    assert find_repo_root(tmp_path / "repo") == tmp_path / "repo"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_agrees_with_git_check_ignore(tmp_path):
    repo = tmp_path / "repo"
    paths = [
        "a.py", "b.log", "keep.log", "doc/x.py", "doc/frotz/y.py", "src/doc/frotz/z.py",
        "src/gen/g.py", "src/gen/keep.py", "src/pkg/m.py", "src/pkg/deep/n.py", "x/a b.py",
        "x/[1].py", "x/#c.py", "x/!d.py", "lib/foo/bar/q.py", "lib/r.py", "v/w/abc/k.py",
    ]
    make(repo, *paths)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text(
        "*.log\n!keep.log\ndoc/frotz/\n/src/gen/*\n!/src/gen/keep.py\n"
        "a\\ b.py\n\\#c.py\n\\!d.py\nx/\\[1].py\n**/bar\nabc/**\n"
    )
    (repo / "src/pkg/.gitignore").write_text("deep/\n!m.py\n*.py\n")
    parts = [p.split("/") for p in paths]
    candidates = sorted({"/".join(ps[: i + 1]) for ps in parts for i in range(len(ps))})
    out = subprocess.run(
        ["git", "-C", str(repo), "check-ignore", "--no-index", "--stdin", "-z"],
        input="\0".join(candidates) + "\0", capture_output=True, text=True,
    ).stdout
    expected = {p for p in out.split("\0") if p}
    assert expected  # the fixture must exercise something
    rules = IgnoreRules.for_root(repo)
    ours = {p for p in candidates if rules.is_ignored(repo / p, (repo / p).is_dir())}
    assert ours == expected


# --- discovery: walking -----------------------------------------------------------


def test_default_excludes(tmp_path):
    make(
        tmp_path,
        "a.py", "pkg/b.py", "pkg/notes.txt", "pkg/stub.pyi",
        ".hidden/c.py", ".git/hooks/d.py", ".venv/lib/e.py", "venv/f.py", ".tox/g.py",
        "myenv/pyvenv.cfg", "myenv/lib/h.py",
        "build/i.py", "dist/j.py", "pkg/__pycache__/k.py", "node_modules/l.py",
        "site-packages/m.py", "_build/n.py", "buck-out/o.py", "thing.egg-info/p.py", ".eggs/q.py",
        "pkg/.hidden_file.py",
    )
    assert found(tmp_path) == ["a.py", "pkg/.hidden_file.py", "pkg/b.py"]


def test_default_exclude_names_match_only_directories(tmp_path):
    make(tmp_path, "build.py", "pkg/dist.py", "venv.py")
    assert found(tmp_path) == ["build.py", "pkg/dist.py", "venv.py"]


def test_gitignore_applies_while_walking(tmp_path):
    make(tmp_path, ".git/", "a.py", "gen/x.py", "src/m.py", "src/tmp_1.py", "src/deep/z/gen.py",
         "src/deep/gen.py/inner.py", "gen.py/inner.py", "logs/l.py", "sub/keep.py", "sub/drop.py")
    (tmp_path / ".gitignore").write_text("/gen/\nsrc/**/z/\ntmp_*.py\nlogs\n")
    (tmp_path / "sub/.gitignore").write_text("*.py\n!keep.py\n")
    (tmp_path / "src/.gitignore").write_text("gen.py/\n")  # directory-only pattern
    assert found(tmp_path) == ["a.py", "gen.py/inner.py", "src/m.py", "sub/keep.py"]


def test_gitignore_root_is_the_repository(tmp_path):
    make(tmp_path, ".git/", "pkg/a.py", "pkg/generated_b.py")
    (tmp_path / ".gitignore").write_text("pkg/generated_*.py\n")
    result = discover([tmp_path / "pkg"], root=tmp_path / "pkg")
    assert rel(result, tmp_path) == ["pkg/a.py"]


def test_nested_repository_uses_its_own_gitignore(tmp_path):
    make(tmp_path, ".git/", "a.py", "vendored/.git/", "vendored/a.py", "vendored/b.py")
    (tmp_path / ".gitignore").write_text("a.py\n")
    (tmp_path / "vendored/.gitignore").write_text("b.py\n")
    assert found(tmp_path) == ["vendored/a.py"]


def test_without_repository_only_gitignores_inside_the_tree_count(tmp_path):
    make(tmp_path, "proj/a.py", "proj/b.py", "proj/sub/c.py", "proj/sub/d.py")
    (tmp_path / ".gitignore").write_text("a.py\n")  # above the walked tree: not used
    (tmp_path / "proj/.gitignore").write_text("b.py\n")
    (tmp_path / "proj/sub/.gitignore").write_text("c.py\n")
    assert found(tmp_path / "proj") == ["a.py", "sub/d.py"]


def test_git_info_exclude_applies(tmp_path):
    make(tmp_path, ".git/info/", "a.py", "scratch.py")
    (tmp_path / ".git/info/exclude").write_text("scratch.py\n")
    assert found(tmp_path) == ["a.py"]


def test_respect_gitignore_false(tmp_path):
    make(tmp_path, ".git/", "a.py", "b.py")
    (tmp_path / ".gitignore").write_text("b.py\n")
    assert found(tmp_path, respect_gitignore=False) == ["a.py", "b.py"]


def test_exclude_replaces_defaults_extend_exclude_adds(tmp_path):
    make(tmp_path, "a.py", "build/b.py", "gen/c.py", "pkg/gen_d.py", "env/pyvenv.cfg", "env/e.py",
         ".git/hooks/f.py", ".cfg/g.py")
    assert found(tmp_path, extend_exclude=["gen"]) == ["a.py", "pkg/gen_d.py"]
    # replacing the defaults brings build/ and hidden dirs back; .git and a virtualenv
    # are still never walked
    assert found(tmp_path, exclude=["gen_*.py"]) == [".cfg/g.py", "a.py", "build/b.py", "gen/c.py"]


def test_exclude_patterns_with_slash_are_relative_to_root(tmp_path):
    make(tmp_path, "src/a.py", "src/gen/b.py", "src/x/y/gen_c.py", "src/x/keep.py",
         "other/src/gen/d.py", "tests/fixtures/e.py", "tests/f.py")
    result = discover(
        [tmp_path], root=tmp_path, extend_exclude=["src/gen", "src/**/gen_*.py", "/tests/fixtures/"]
    )
    assert rel(result, tmp_path) == [
        "other/src/gen/d.py", "src/a.py", "src/x/keep.py", "tests/f.py",
    ]
    # '*' does not cross '/'
    assert found(tmp_path, exclude=["src/*.py"]) == [
        "other/src/gen/d.py", "src/gen/b.py", "src/x/keep.py", "src/x/y/gen_c.py",
        "tests/f.py", "tests/fixtures/e.py",
    ]


def test_is_excluded(tmp_path):
    make(tmp_path, "build/x.py", "src/gen/y.py", "src/z.py")
    assert is_excluded(tmp_path / "build/x.py", root=tmp_path, patterns=DEFAULT_EXCLUDE)
    assert is_excluded(tmp_path / "src/gen/y.py", root=tmp_path, patterns=["src/gen"])
    assert not is_excluded(tmp_path / "src/z.py", root=tmp_path, patterns=["src/gen"])
    assert is_excluded(tmp_path / "src/z.py", root=tmp_path, patterns=["z.py"])
    assert not is_excluded(tmp_path / "src/z.py", root=tmp_path, patterns=["z.py/"])
    # only the part below root counts: a project living inside "build/" is fine
    assert not is_excluded(tmp_path / "build/x.py", root=tmp_path / "build", patterns=["build"])


# --- discovery: explicit paths ----------------------------------------------------


def test_explicit_excluded_file_is_linted_unless_force_exclude(tmp_path):
    make(tmp_path, ".git/", "build/gen.py", "ignored.py", "script")
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    paths = [tmp_path / "build/gen.py", tmp_path / "ignored.py", tmp_path / "script"]
    result = discover(paths, root=tmp_path)
    assert rel(result, tmp_path) == ["build/gen.py", "ignored.py", "script"]  # any suffix
    forced = discover(paths, root=tmp_path, force_exclude=True)
    assert rel(forced, tmp_path) == ["script"]
    assert forced.problems == []


def test_force_exclude_honours_excluded_and_ignored_parents(tmp_path):
    make(tmp_path, ".git/", "gen/sub/a.py", "out/b.py", "src/c.py")
    (tmp_path / ".gitignore").write_text("out/\n!out/b.py\n")
    paths = [tmp_path / "gen/sub/a.py", tmp_path / "out/b.py", tmp_path / "src/c.py"]
    forced = discover(paths, root=tmp_path, extend_exclude=["gen"], force_exclude=True)
    assert rel(forced, tmp_path) == ["src/c.py"]


def test_explicit_directory_is_walked_even_if_excluded(tmp_path):
    make(tmp_path, ".git/", "build/a.py", "build/__pycache__/b.py", "out/c.py", "out/d.py")
    (tmp_path / ".gitignore").write_text("out/\nd.py\n")
    assert found(tmp_path, "build") == ["build/a.py"]
    assert found(tmp_path, "out") == ["out/c.py"]  # its contents still obey .gitignore
    assert found(tmp_path, "build", "out", force_exclude=True) == []


def test_named_directory_waives_only_the_patterns_that_exclude_it(tmp_path):
    make(tmp_path, "gen/a.py", "gen/b_tmp.py", "gen/sub/c.py")
    options = {"extend_exclude": ["/gen/", "*_tmp.py"]}
    assert found(tmp_path, **options) == []
    assert found(tmp_path, "gen", **options) == ["gen/a.py", "gen/sub/c.py"]
    assert found(tmp_path, "gen/sub", **options) == ["gen/sub/c.py"]


def test_missing_path_is_a_problem_and_others_still_found(tmp_path):
    make(tmp_path, "a.py")
    result = discover([tmp_path / "nope.py", tmp_path / "a.py"], root=tmp_path)
    assert rel(result, tmp_path) == ["a.py"]
    assert result.problems == [Problem(str(tmp_path / "nope.py"), "No such file or directory")]


def test_relative_paths_stay_relative_and_dedup(tmp_path, monkeypatch):
    make(tmp_path, "src/a.py", "src/b.py", "c.py")
    monkeypatch.chdir(tmp_path)
    named = ["src", "./src/a.py", "src/a.py", "c.py", str(tmp_path / "c.py")]
    result = discover(named, root=tmp_path)
    assert result.files == [Path("c.py"), Path("src/a.py"), Path("src/b.py")]
    assert result.problems == []


def test_output_sorted_by_posix_string(tmp_path):
    make(tmp_path, "b.py", "a/z.py", "a_b.py", "B.py", "a.py")
    assert found(tmp_path) == ["B.py", "a.py", "a/z.py", "a_b.py", "b.py"]


def test_directory_named_like_a_python_file_is_walked(tmp_path):
    make(tmp_path, "x.py/inner.py", "x.py/data.txt")
    assert found(tmp_path) == ["x.py/inner.py"]
    assert found(tmp_path, "x.py") == ["x.py/inner.py"]


def test_non_ascii_and_spaces(tmp_path):
    make(tmp_path, "données/été.py", "my dir/a file.py", "日本/模型.py", "keep out/x.py")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("keep\\ out/\n", encoding="utf-8")
    assert found(tmp_path) == ["données/été.py", "my dir/a file.py", "日本/模型.py"]
    named = found(tmp_path, "données/été.py", "my dir")
    assert named == ["données/été.py", "my dir/a file.py"]


# --- discovery: the file system fighting back -------------------------------------


def test_unreadable_directory_reported_and_walk_continues(tmp_path, monkeypatch):
    make(tmp_path, "a.py", "locked/b.py", "z/c.py")
    real_scandir = os.scandir
    locked = str(tmp_path / "locked")

    def scandir(path="."):
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(discovery_module.os, "scandir", scandir)
    result = discover([tmp_path], root=tmp_path)
    assert rel(result, tmp_path) == ["a.py", "z/c.py"]
    assert result.problems == [Problem(str(tmp_path / "locked"), "Permission denied")]


def test_chmod_000_directory(tmp_path):
    make(tmp_path, "a.py", "locked/b.py")
    locked = tmp_path / "locked"
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("running as root: chmod 000 does not stop reads")
        result = discover([tmp_path], root=tmp_path)
        assert rel(result, tmp_path) == ["a.py"]
        assert result.problems == [Problem(str(locked), "Permission denied")]
    finally:
        locked.chmod(0o755)


def test_symlink_loop_terminates_with_problem(tmp_path):
    make(tmp_path, "pkg/a.py", "pkg/sub/b.py")
    (tmp_path / "pkg/sub/loop").symlink_to("..", target_is_directory=True)
    result = discover([tmp_path / "pkg"], root=tmp_path)
    assert rel(result, tmp_path) == ["pkg/a.py", "pkg/sub/b.py"]
    assert result.problems == [Problem(str(tmp_path / "pkg/sub/loop"), "symlink loop")]


def test_self_referencing_symlink(tmp_path):
    make(tmp_path, "a.py")
    (tmp_path / "me.py").symlink_to("me.py")
    result = discover([tmp_path], root=tmp_path)
    assert rel(result, tmp_path) == ["a.py"]
    assert result.problems == [Problem(str(tmp_path / "me.py"), "symlink loop")]
    explicit = discover([tmp_path / "me.py"], root=tmp_path)
    assert explicit.problems == [Problem(str(tmp_path / "me.py"), "symlink loop")]


def test_symlinks_to_files_and_directories_are_followed(tmp_path):
    outside = make(tmp_path / "outside", "lib/util.py", "single.py")
    proj = make(tmp_path / "proj", "a.py")
    (proj / "linked_lib").symlink_to(outside / "lib", target_is_directory=True)
    (proj / "single_link.py").symlink_to(outside / "single.py")
    (proj / "dangling.py").symlink_to(tmp_path / "missing.py")
    result = discover([proj], root=proj)
    assert rel(result, proj) == ["a.py", "linked_lib/util.py", "single_link.py"]
    assert result.problems == [Problem(str(proj / "dangling.py"), "No such file or directory")]


def test_same_file_through_two_spellings_listed_once(tmp_path):
    make(tmp_path, "real/a.py")
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    named = [tmp_path / "real", tmp_path / "alias", tmp_path / "real/a.py"]
    result = discover(named, root=tmp_path)
    assert rel(result, tmp_path) == ["real/a.py"]  # the first spelling seen wins
    assert result.problems == []
    files = discover([tmp_path / "alias/a.py", tmp_path / "real/a.py"], root=tmp_path)
    assert rel(files, tmp_path) == ["alias/a.py"]
