"""Settings loading: discovery, validation messages, selection, per-file ignores, CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from optax_lint.core.catalogue import RuleOption, RuleSpec
from optax_lint.core.config import (
    MAX_DEPTH,
    ConfigError,
    find_config,
    load_settings,
    resolve_codes,
)
from optax_lint.core.diagnostics import Severity
from optax_lint.core.globs import glob_matches


def _spec(code: str, name: str, *, enabled: bool = True, options: tuple[RuleOption, ...] = ()) -> RuleSpec:
    return RuleSpec(
        code=code,
        name=name,
        severity=Severity.WARNING,
        summary="",
        message="",
        fix=None,
        fix_title="",
        default_enabled=enabled,
        basis=(),
        doc={},
        options={o.name: o for o in options},
    )


CAT = {
    "OPX001": _spec("OPX001", "missing-clip"),
    "OPX002": _spec("OPX002", "pedantic-thing", enabled=False),
    "OPX101": _spec("OPX101", "chain-order"),
    "OPX102": _spec("OPX102", "double-scale"),
    "OPX201": _spec("OPX201", "schedule-mismatch"),
    "OPX403": _spec(
        "OPX403",
        "checkpoint-every",
        options=(
            RuleOption("max-steps", "int", 1000, ""),
            RuleOption("ratio", "float", 0.5, ""),
            RuleOption("strict", "bool", False, ""),
            RuleOption("names", "list", ["opt_state"], ""),
        ),
    ),
}
DEFAULT_ON = {"OPX001", "OPX101", "OPX102", "OPX201", "OPX403"}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Messages show paths relative to the working directory.
    monkeypatch.chdir(tmp_path)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _pyproject(path: Path, body: str) -> Path:
    return _write(path / "pyproject.toml", "[project]\nname = 'x'\n\n[tool.optax-lint]\n" + body)


def _load(tmp_path: Path, **kw) -> object:
    return load_settings(start=tmp_path, catalogue=CAT, **kw)


# ---------------------------------------------------------------------------- discovery


def test_standalone_wins_over_pyproject_in_same_directory(tmp_path: Path) -> None:
    _pyproject(tmp_path, 'output-format = "json"\n')
    _write(tmp_path / "optax-lint.toml", 'output-format = "github"\n')
    assert find_config(tmp_path) == tmp_path / "optax-lint.toml"
    settings = _load(tmp_path)
    assert settings.output_format == "github"
    assert settings.config_path == tmp_path / "optax-lint.toml"


def test_pyproject_without_table_is_skipped_and_search_continues_up(tmp_path: Path) -> None:
    _pyproject(tmp_path, 'output-format = "concise"\n')
    sub = tmp_path / "pkg"
    _write(sub / "pyproject.toml", "[project]\nname = 'inner'\n[tool.black]\nline-length = 99\n")
    deep = sub / "src" / "mod"
    deep.mkdir(parents=True)
    assert find_config(deep) == tmp_path / "pyproject.toml"
    settings = load_settings(start=deep, catalogue=CAT)
    assert settings.output_format == "concise"
    assert settings.root == tmp_path


def test_nearest_config_wins_over_farther_ones(tmp_path: Path) -> None:
    _write(tmp_path / "optax-lint.toml", 'output-format = "json"\n')
    _pyproject(tmp_path / "pkg", 'output-format = "concise"\n')
    assert find_config(tmp_path / "pkg" / "a.py") == tmp_path / "pkg" / "pyproject.toml"
    assert load_settings(start=tmp_path / "pkg", catalogue=CAT).output_format == "concise"


def test_pyproject_merely_mentioning_the_tool_is_not_a_config(tmp_path: Path) -> None:
    _write(tmp_path / "optax-lint.toml", "")
    _write(tmp_path / "app" / "pyproject.toml", '[project]\ndependencies = ["optax-lint>=0.1"]\n')
    assert find_config(tmp_path / "app") == tmp_path / "optax-lint.toml"


def test_unrelated_broken_pyproject_is_ignored_but_ours_is_reported(tmp_path: Path) -> None:
    inner = tmp_path / "inner"
    _write(inner / "pyproject.toml", "[project\nname = 'broken'\n")
    _write(tmp_path / "optax-lint.toml", "fix = true\n")
    assert find_config(inner) == tmp_path / "optax-lint.toml"
    _write(inner / "pyproject.toml", "[tool.optax-lint\nfix = true\n")
    with pytest.raises(ConfigError, match=r"^inner/pyproject.toml: invalid TOML: .*line 1, column"):
        find_config(inner)


def test_no_config_uses_defaults_rooted_at_start(tmp_path: Path) -> None:
    settings = _load(tmp_path)
    assert settings.config_path is None
    assert settings.root == tmp_path
    assert settings.enabled_codes() == DEFAULT_ON
    assert settings.select == sorted(DEFAULT_ON)
    assert (settings.fix, settings.unsafe_fixes, settings.output_format) == (False, False, "full")
    assert (settings.exclude, settings.respect_gitignore, settings.force_exclude) == (None, True, False)
    assert settings.context == {}


def test_explicit_config_beats_discovery(tmp_path: Path) -> None:
    _write(tmp_path / "optax-lint.toml", 'output-format = "json"\n')
    custom = _write(tmp_path / "conf" / "strict.toml", 'output-format = "github"\nfix = true\n')
    settings = _load(tmp_path, config=custom)
    assert settings.output_format == "github" and settings.fix is True
    assert settings.config_path == custom
    assert settings.root == tmp_path / "conf"


def test_explicit_pyproject_reads_tool_table(tmp_path: Path) -> None:
    path = _pyproject(tmp_path / "elsewhere", 'output-format = "concise"\n')
    assert _load(tmp_path, config=path).output_format == "concise"
    # An explicit pyproject without the table is valid and means defaults.
    bare = _write(tmp_path / "bare" / "pyproject.toml", "[project]\nname = 'x'\n")
    settings = _load(tmp_path, config=bare)
    assert settings.output_format == "full" and settings.root == tmp_path / "bare"


# ---------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('selct = ["OPX1"]\n', "pyproject.toml: [tool.optax-lint] unknown key 'selct' (did you mean 'select'?)"),
        ("extend_select = []\n", "pyproject.toml: [tool.optax-lint] unknown key 'extend_select' (did you mean 'extend-select'?)"),
        ("zzz = 1\n", "pyproject.toml: [tool.optax-lint] unknown key 'zzz'"),
        ('select = "OPX1"\n', "pyproject.toml: [tool.optax-lint] select: expected a list of strings, got str"),
        ('ignore = ["OPX1", 3]\n', "pyproject.toml: [tool.optax-lint] ignore: expected a list of strings, item 1 is int"),
        ('exclude = {a = 1}\n', "pyproject.toml: [tool.optax-lint] exclude: expected a list of strings, got table"),
        ('select = ["OPX999"]\n', "pyproject.toml: [tool.optax-lint] select: unknown rule code 'OPX999'"),
        ('ignore = ["OPX9"]\n', "pyproject.toml: [tool.optax-lint] ignore: unknown rule code 'OPX9'"),
        ('extend-select = [""]\n', "pyproject.toml: [tool.optax-lint] extend-select: unknown rule code ''"),
        ('select = ["opx1"]\n', "pyproject.toml: [tool.optax-lint] select: unknown rule code 'opx1'"),
        ('fix = "yes"\n', "pyproject.toml: [tool.optax-lint] fix: expected a boolean, got str"),
        ("unsafe-fixes = 1\n", "pyproject.toml: [tool.optax-lint] unsafe-fixes: expected a boolean, got int"),
        ('output-format = "xml"\n', "pyproject.toml: [tool.optax-lint] output-format: invalid value 'xml' (expected one of: full, concise, grouped, json, json-lines, github, sarif, gitlab, junit, pylint, rdjson, azure)"),
        ("output-format = 1\n", "pyproject.toml: [tool.optax-lint] output-format: expected a string, got int"),
        ("context = [1]\n", "pyproject.toml: [tool.optax-lint] context: expected a table, got list"),
        ('per-file-ignores = ["x"]\n', "pyproject.toml: [tool.optax-lint] per-file-ignores: expected a table of glob = [codes], got list"),
        ('[tool.optax-lint.per-file-ignores]\n"tests/*.py" = "OPX1"\n', 'pyproject.toml: [tool.optax-lint.per-file-ignores] "tests/*.py": expected a list of strings, got str'),
        ('[tool.optax-lint.per-file-ignores]\n"tests/*.py" = ["OPX77"]\n', "pyproject.toml: [tool.optax-lint.per-file-ignores] \"tests/*.py\": unknown rule code 'OPX77'"),
        ("rules = 3\n", "pyproject.toml: [tool.optax-lint] rules: expected a table, got int"),
        ("[tool.optax-lint.rules.OPX999]\nx = 1\n", "pyproject.toml: [tool.optax-lint.rules] unknown rule code 'OPX999'"),
        ("[tool.optax-lint.rules.chain-ordr]\nx = 1\n", "pyproject.toml: [tool.optax-lint.rules] unknown rule code 'chain-ordr' (did you mean 'chain-order'?)"),
        ("[tool.optax-lint.rules]\nOPX403 = 5\n", "pyproject.toml: [tool.optax-lint.rules] OPX403: expected a table, got int"),
        ("[tool.optax-lint.rules.OPX403]\nmax-step = 5\n", "pyproject.toml: [tool.optax-lint.rules.OPX403] unknown option 'max-step' (did you mean 'max-steps'?)"),
        ("[tool.optax-lint.rules.OPX101]\nfoo = 5\n", "pyproject.toml: [tool.optax-lint.rules.OPX101] unknown option 'foo' (OPX101 has no options)"),
        ('[tool.optax-lint.rules.OPX403]\nmax-steps = "5"\n', "pyproject.toml: [tool.optax-lint.rules.OPX403] max-steps: expected int, got str"),
        ("[tool.optax-lint.rules.OPX403]\nmax-steps = true\n", "pyproject.toml: [tool.optax-lint.rules.OPX403] max-steps: expected int, got bool"),
        ("[tool.optax-lint.rules.checkpoint-every]\nratio = [1]\n", "pyproject.toml: [tool.optax-lint.rules.checkpoint-every] ratio: expected float, got list"),
        ("[tool.optax-lint.rules.OPX403]\nstrict = true\n[tool.optax-lint.rules.checkpoint-every]\nratio = 1.0\n", "pyproject.toml: [tool.optax-lint.rules] OPX403 is configured twice (as 'OPX403' and 'checkpoint-every')"),
    ],
)
def test_pyproject_validation_messages(tmp_path: Path, body: str, message: str) -> None:
    _pyproject(tmp_path, body)
    with pytest.raises(ConfigError) as info:
        _load(tmp_path)
    assert str(info.value) == message
    assert info.value.path == tmp_path / "pyproject.toml"


def test_tool_table_of_wrong_type(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml", '[tool]\noptax-lint = "on"\n')
    with pytest.raises(ConfigError) as info:
        _load(tmp_path)
    assert str(info.value) == "pyproject.toml: [tool] optax-lint: expected a table, got str"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('selct = ["OPX1"]\n', "optax-lint.toml: unknown key 'selct' (did you mean 'select'?)"),
        ('select = "OPX1"\n', "optax-lint.toml: select: expected a list of strings, got str"),
        ('[tool.optax-lint]\nfix = true\n', "optax-lint.toml: unknown key 'tool'"),
        ("[rules.OPX403]\nbogus = 1\n", "optax-lint.toml: [rules.OPX403] unknown option 'bogus'"),
        ('[per-file-ignores]\n"a.py" = ["X"]\n', "optax-lint.toml: [per-file-ignores] \"a.py\": unknown rule code 'X'"),
    ],
)
def test_standalone_validation_messages(tmp_path: Path, body: str, message: str) -> None:
    _write(tmp_path / "optax-lint.toml", body)
    with pytest.raises(ConfigError) as info:
        _load(tmp_path)
    assert str(info.value) == message


def test_toml_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    _write(tmp_path / "sub" / "optax-lint.toml", 'fix = true\nselect = ["OPX1" "OPX2"]\n')
    with pytest.raises(ConfigError) as info:
        _load(tmp_path / "sub")
    text = str(info.value)
    assert text.startswith("sub/optax-lint.toml: invalid TOML: ")
    assert "line 2" in text and "column" in text


def test_non_utf8_file(tmp_path: Path) -> None:
    (tmp_path / "optax-lint.toml").write_bytes(b"fix = true\n# \xff\xfe\n")
    with pytest.raises(ConfigError, match=r"^optax-lint.toml: invalid TOML: not UTF-8"):
        _load(tmp_path)


def test_unreadable_explicit_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, config=tmp_path / "missing.toml")
    assert str(info.value) == "missing.toml: cannot read file: No such file or directory"
    (tmp_path / "adir.toml").mkdir()
    with pytest.raises(ConfigError, match=r"^adir.toml: cannot read file: "):
        _load(tmp_path, config=tmp_path / "adir.toml")


def test_resolve_codes() -> None:
    assert resolve_codes(["OPX1", "OPX403"], CAT, where="x") == {"OPX101", "OPX102", "OPX403"}
    assert resolve_codes(["ALL"], CAT, where="x") == set(CAT)
    assert resolve_codes([], CAT, where="x") == set()
    with pytest.raises(ConfigError) as info:
        resolve_codes(["OPX1", "OPX999"], CAT, where="--select")
    assert str(info.value) == "--select: unknown rule code 'OPX999'"


# ---------------------------------------------------------------------------- selection


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("", DEFAULT_ON),
        ('select = ["OPX1"]\n', {"OPX101", "OPX102"}),
        ('select = ["OPX101", "OPX2"]\n', {"OPX101", "OPX201"}),
        ('select = ["ALL"]\n', set(CAT)),  # ALL includes off-by-default rules
        ('select = ["OPX0"]\n', {"OPX001", "OPX002"}),  # explicitly selecting turns it on
        ("select = []\n", set()),
        ('extend-select = ["OPX002"]\n', DEFAULT_ON | {"OPX002"}),
        ('ignore = ["OPX1"]\n', DEFAULT_ON - {"OPX101", "OPX102"}),
        ('select = ["OPX1"]\nignore = ["OPX101"]\n', {"OPX102"}),
        ('select = ["ALL"]\nignore = ["OPX0", "OPX4"]\n', {"OPX101", "OPX102", "OPX201"}),
        ('select = ["OPX1"]\nextend-select = ["OPX201"]\nignore = ["OPX102"]\n', {"OPX101", "OPX201"}),
        ('extend-select = ["OPX002"]\nignore = ["OPX002"]\n', DEFAULT_ON),
    ],
)
def test_selection(tmp_path: Path, body: str, expected: set[str]) -> None:
    _write(tmp_path / "optax-lint.toml", body)
    assert _load(tmp_path).enabled_codes() == expected


def test_per_file_ignores(tmp_path: Path) -> None:
    _write(
        tmp_path / "optax-lint.toml",
        "[per-file-ignores]\n"
        '"tests/*.py" = ["OPX1"]\n'
        '"conftest.py" = ["OPX201"]\n'
        '"scripts/**/gen_*.py" = ["ALL"]\n'
        '"legacy" = ["OPX403"]\n',
    )
    s = _load(tmp_path)
    root = tmp_path
    assert s.codes_for_path(root / "tests" / "test_a.py") == DEFAULT_ON - {"OPX101", "OPX102"}
    # `*` stays within one directory: nested test files are not covered by tests/*.py.
    assert s.codes_for_path(root / "tests" / "unit" / "test_b.py") == DEFAULT_ON
    # A slash-free glob matches a basename (or directory name) at any depth.
    assert s.codes_for_path(root / "tests" / "unit" / "conftest.py") == DEFAULT_ON - {"OPX201"}
    assert s.codes_for_path(root / "scripts" / "gen_x.py") == set()
    assert s.codes_for_path(root / "scripts" / "a" / "b" / "gen_y.py") == set()
    assert s.codes_for_path(root / "scripts" / "a" / "keep.py") == DEFAULT_ON
    assert s.codes_for_path(root / "src" / "legacy" / "old.py") == DEFAULT_ON - {"OPX403"}
    assert s.codes_for_path(root / "src" / "main.py") == DEFAULT_ON
    # Relative paths are taken from the working directory (tmp_path here).
    assert s.codes_for_path(Path("tests/test_c.py")) == DEFAULT_ON - {"OPX101", "OPX102"}


def test_anchored_glob_does_not_match_outside_root(tmp_path: Path) -> None:
    project = tmp_path / "project"
    _write(project / "optax-lint.toml", '[per-file-ignores]\n"tests/*.py" = ["OPX1"]\n')
    s = load_settings(start=project, catalogue=CAT)
    assert s.codes_for_path(tmp_path / "tests" / "a.py") == DEFAULT_ON
    assert s.codes_for_path(project / "tests" / "a.py") == DEFAULT_ON - {"OPX101", "OPX102"}


@pytest.mark.parametrize(
    ("pattern", "rel", "hit"),
    [
        ("tests/", "tests/x/y.py", True),  # a directory match covers its contents
        ("./tests/*.py", "tests/a.py", True),
        ("**/test_*.py", "test_top.py", True),
        ("**/test_*.py", "a/b/test_x.py", True),
        ("src/[ab].py", "src/a.py", True),
        ("src/[!ab].py", "src/a.py", False),
        ("src/?.py", "src/ab.py", False),
        ("*.py", "src/deep/x.py", True),
        ("src/*", "src/pkg/x.py", True),
        ("src/*.py", "srcx/a.py", False),
    ],
)
def test_glob_matches(tmp_path: Path, pattern: str, rel: str, hit: bool) -> None:
    assert glob_matches(pattern, tmp_path / rel, tmp_path) is hit


# ---------------------------------------------------------------------------- rule options


def test_rule_option_defaults_and_overrides(tmp_path: Path) -> None:
    assert _load(tmp_path).option("OPX403", "max-steps") == 1000
    _write(
        tmp_path / "optax-lint.toml",
        "[rules.checkpoint-every]\nmax_steps = 50\nratio = 2\n[rules.OPX101]\n",
    )
    s = _load(tmp_path)
    assert s.option("OPX403", "max-steps") == 50  # snake_case spelling accepted
    ratio = s.option("OPX403", "ratio")
    assert ratio == 2.0 and isinstance(ratio, float)
    assert s.option("OPX403", "strict") is False
    assert s.rule_options["OPX403"]["names"] == ["opt_state"]
    assert s.rule_options["OPX101"] == {}
    with pytest.raises(KeyError):
        s.option("OPX403", "nope")


def test_default_list_option_is_not_shared_with_catalogue(tmp_path: Path) -> None:
    s = _load(tmp_path)
    s.rule_options["OPX403"]["names"].append("mutated")
    assert CAT["OPX403"].options["names"].default == ["opt_state"]


def test_context_table_kept_raw(tmp_path: Path) -> None:
    _pyproject(
        tmp_path,
        '[tool.optax-lint.context]\ndevices = 8\n[[tool.optax-lint.context.overrides]]\npath = "a/*"\nmesh = "x"\n',
    )
    assert _load(tmp_path).context == {"devices": 8, "overrides": [{"path": "a/*", "mesh": "x"}]}


# ---------------------------------------------------------------------------- CLI overrides


def test_cli_overrides_win(tmp_path: Path) -> None:
    _write(
        tmp_path / "optax-lint.toml",
        'fix = true\noutput-format = "json"\nexclude = ["build"]\nextend-exclude = ["a"]\n'
        'select = ["OPX1"]\nextend-select = ["OPX002"]\nignore = ["OPX102"]\n'
        '[per-file-ignores]\n"a.py" = ["OPX1"]\n"b.py" = ["OPX2"]\n',
    )
    s = _load(
        tmp_path,
        overrides={
            "fix": False,
            "output_format": "github",
            "exclude": ["dist"],
            "extend_exclude": ("b",),
            "select": ["OPX2", "OPX4"],
            "unsafe_fixes": None,  # None = flag not given
            "per_file_ignores": {"b.py": ["OPX403"]},
        },
    )
    assert (s.fix, s.output_format, s.unsafe_fixes) == (False, "github", False)
    assert s.exclude == ["dist"] and s.extend_exclude == ["a", "b"]
    # --select starts over: the file's select and extend-select no longer apply.
    assert s.enabled_codes() == {"OPX201", "OPX403"}
    assert s.per_file_ignores == {"a.py": ["OPX1"], "b.py": ["OPX403"]}


def test_cli_ignore_and_extend_select_add_to_file(tmp_path: Path) -> None:
    _write(tmp_path / "optax-lint.toml", 'ignore = ["OPX201"]\n')
    s = _load(tmp_path, overrides={"ignore": ["OPX101"], "extend_select": ["OPX002"]})
    assert s.enabled_codes() == {"OPX001", "OPX002", "OPX102", "OPX403"}


def test_cli_select_overrides_file_ignore_only_where_named(tmp_path: Path) -> None:
    _write(tmp_path / "optax-lint.toml", 'ignore = ["OPX1", "OPX403"]\n')
    s = _load(tmp_path, overrides={"extend_select": ["OPX101"]})
    assert s.enabled_codes() == {"OPX001", "OPX101", "OPX201"}
    s = _load(tmp_path, overrides={"select": ["OPX403"]})
    assert s.enabled_codes() == {"OPX403"}
    # A less specific CLI selection does not undo a more specific file ignore.
    s = _load(tmp_path, overrides={"select": ["OPX4", "OPX2"]})
    assert s.enabled_codes() == {"OPX201"}


def test_cli_fix_true_over_file_default(tmp_path: Path) -> None:
    assert _load(tmp_path, overrides={"fix": True}).fix is True


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"select": ["OPX999"]}, "--select: unknown rule code 'OPX999'"),
        ({"extend_select": "OPX1"}, "--extend-select: expected a list of strings, got str"),
        ({"output_format": "xml"}, "--output-format: invalid value 'xml' (expected one of: full, concise, grouped, json, json-lines, github, sarif, gitlab, junit, pylint, rdjson, azure)"),
        ({"per_file_ignores": {"a.py": ["NOPE"]}}, "--per-file-ignores a.py: unknown rule code 'NOPE'"),
    ],
)
def test_cli_validation_messages(tmp_path: Path, overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, overrides=overrides)
    assert str(info.value) == message


def test_unknown_override_key_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        _load(tmp_path, overrides={"selct": ["OPX1"]})


# ---------------------------------------------------------------------------- hostile files


def test_thousands_of_nested_tables_via_headers(tmp_path: Path) -> None:
    # tomllib builds this without recursing; the resulting depth is rejected iteratively.
    header = "tool.optax-lint.context." + ".".join(["a"] * 5000)
    _write(tmp_path / "pyproject.toml", f"[{header}]\nx = 1\n")
    with pytest.raises(ConfigError) as info:
        _load(tmp_path)
    assert str(info.value) == f"pyproject.toml: [tool.optax-lint] context: nested deeper than {MAX_DEPTH} levels"


@pytest.mark.parametrize(
    "value",
    ["[" * 50000 + "]" * 50000, "{a = " * 5000 + "1" + "}" * 5000],
    ids=["arrays", "inline-tables"],
)
def test_deep_inline_values_do_not_raise_recursion_error(tmp_path: Path, value: str) -> None:
    _write(tmp_path / "pyproject.toml", f"[tool.optax-lint.context]\nx = {value}\n")
    with pytest.raises(ConfigError) as info:
        _load(tmp_path)
    assert str(info.value) == "pyproject.toml: invalid TOML: values nested too deeply"


def test_moderate_nesting_is_fine(tmp_path: Path) -> None:
    _write(tmp_path / "optax-lint.toml", "[context]\nx = " + "[" * 10 + "]" * 10 + "\n")
    assert _load(tmp_path).context["x"] == [[[[[[[[[[]]]]]]]]]]
